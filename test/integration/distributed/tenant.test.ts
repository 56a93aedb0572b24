// Tenancy through the distributed front door (real Kafka + schema registry + Neo4j): two API keys,
// two tenants, overlapping content in a conversation of the same name (plus one fact each only
// they said). After the pipeline has drained, no listing, record lookup or query of one tenant
// returns the other's records, over HTTP or gRPC.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import fc from "fast-check";
import { kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import { loadConfig } from "../../../services/core/config.ts";
import type { Timeline } from "../../../services/core/explorer.ts";
import type { QueryResult } from "../../../services/core/query-types.ts";
import type { TurnInput } from "../../../services/core/requests.ts";
import { TenantNameSchema } from "../../../services/core/tenant-name.ts";
import { MemoryGrpcClient } from "../../../services/platform/grpc/client.ts";
import { runPrefix } from "../pipeline/helpers.ts";
import {
  cleanUp,
  type Deployment,
  httpJson,
  listAll,
  listAllHttp,
  newKey,
  sharedEnv,
  skip,
  startDeployment,
  tails,
  waitDrained,
} from "./helpers.ts";

const shared: TurnInput[] = [
  ["Caroline", "I went to the LGBTQ support group yesterday and it was so powerful."],
  ["Melanie", "That's amazing! What happened there?"],
  ["Caroline", "People shared their transgender stories. I felt so accepted and inspired."],
  ["Melanie", "I'm painting a sunset over the lake these days, it calms me down."],
  ["Caroline", "I am planning to study counseling and work in mental health."],
  ["Melanie", "You'd be great at that. I ran a charity race for mental health last Saturday."],
].map(([speaker, text], i) => ({
  turnId: `s${i + 1}`,
  speaker: speaker as string,
  role: "user" as const,
  text: text as string,
  timestamp: new Date(Date.UTC(2023, 4, 8, 13, 56) + i * 30_000).toISOString(),
  sessionId: "session_1",
}));

const own = (word: string): TurnInput => ({
  turnId: "own-1",
  speaker: "Caroline",
  role: "user",
  text: `My secret code word for the vault is ${word}.`,
  timestamp: new Date(Date.UTC(2023, 4, 8, 14, 0)).toISOString(),
  sessionId: "session_1",
});

test("two tenants with overlapping content never see each other's records (HTTP and gRPC)", {
  skip,
  timeout: 300_000,
}, async () => {
  const prefix = runPrefix("dist-tenant");
  const run = randomUUID().slice(0, 8);
  const tenants = { a: `tenant-a-${run}`, b: `tenant-b-${run}` };
  const keys = { a: newKey(), b: newKey() };
  const words = { a: "pineapple", b: "walrus" };
  const env = sharedEnv(prefix, { [keys.a]: tenants.a, [keys.b]: tenants.b });
  const kafka = kafkaClient(loadConfig({}, env), "tenant-test");
  const conversation = "shared-conv";
  let dep: Deployment | undefined;
  const clients: MemoryGrpcClient[] = [];
  try {
    dep = await startDeployment(prefix, { [keys.a]: tenants.a, [keys.b]: tenants.b });
    const d = dep;
    const grpcA = new MemoryGrpcClient({ address: d.grpc, apiKey: keys.a });
    const grpcB = new MemoryGrpcClient({ address: d.grpc, apiKey: keys.b });
    clients.push(grpcA, grpcB);

    // A over HTTP, B over gRPC; a body's `tenant` field is ignored.
    const ra = await httpJson(d.http, keys.a, "POST", `/v1/conversations/${conversation}/turns:batch`, {
      turns: [...shared, own(words.a)].map((t) => ({ ...t, tenant: tenants.b })),
    });
    assert.equal(ra.status, 202, JSON.stringify(ra.body));
    const rb = await grpcB.ingest([...shared, own(words.b)].map((t) => ({ ...t, conversation })));
    assert.equal(rb.accepted, shared.length + 1);
    assert.equal((await httpJson(d.http, keys.a, "POST", "/v1/flush")).status, 202);
    await grpcB.flush(conversation);
    await waitDrained(kafka, prefix, 180_000).catch((err: unknown) => {
      throw new Error(`${err instanceof Error ? err.message : String(err)}\n${tails(d)}`);
    });

    const byTenant = {
      a: {
        http: await listAllHttp(d.http, keys.a),
        grpc: await listAll((cursor) => grpcA.listRecords({ limit: 2, ...(cursor ? { cursor } : {}) })),
      },
      b: {
        http: await listAllHttp(d.http, keys.b),
        grpc: await listAll((cursor) => grpcB.listRecords({ limit: 2, ...(cursor ? { cursor } : {}) })),
      },
    };
    const ids = {
      a: new Set(byTenant.a.http.map((r) => r.id)),
      b: new Set(byTenant.b.http.map((r) => r.id)),
    };
    assert.ok(ids.a.size > 0 && ids.b.size > 0, "both tenants have records");
    for (const side of ["a", "b"] as const) {
      const other = side === "a" ? "b" : "a";
      assert.deepEqual(new Set(byTenant[side].grpc.map((r) => r.id)), ids[side], "HTTP and gRPC list the same records");
      for (const r of [...byTenant[side].http, ...byTenant[side].grpc]) {
        assert.equal(r.source.tenant, tenants[side], `a record of ${tenants[other]} listed for ${tenants[side]}`);
        assert.ok(!ids[other].has(r.id));
        assert.doesNotMatch(r.text, new RegExp(words[other]));
      }
      assert.ok(
        byTenant[side].http.some((r) => r.text.includes(words[side])),
        `${tenants[side]} has its own secret word`,
      );
    }
    // Overlapping content is stored for both, under different ids (ids hash the tenant).
    for (const id of ids.a) assert.ok(!ids.b.has(id));

    // Record lookups across tenants: 404 / NOT_FOUND.
    const aRecord = byTenant.a.http[0]?.id as string;
    const bRecord = byTenant.b.http[0]?.id as string;
    assert.equal((await httpJson(d.http, keys.b, "GET", `/v1/records/${aRecord}`)).status, 404);
    assert.equal((await httpJson(d.http, keys.a, "GET", `/v1/records/${bRecord}`)).status, 404);
    assert.equal(await grpcB.getRecord(aRecord), undefined);
    assert.equal(await grpcA.getRecord(bRecord), undefined);
    assert.equal((await grpcA.getRecord(aRecord))?.id, aRecord);

    // The explorer's routes (the gateway reads the shared Neo4j store): each tenant's own
    // conversation of that name, with its own segments and records only.
    for (const side of ["a", "b"] as const) {
      const other = side === "a" ? "b" : "a";
      const list = await httpJson<{ conversations: { conversation: string; turns: number }[] }>(
        d.http,
        keys[side],
        "GET",
        "/v1/conversations",
      );
      assert.equal(list.status, 200);
      assert.deepEqual(
        list.body.conversations.map((c) => [c.conversation, c.turns]),
        [[conversation, shared.length + 1]],
      );
      const timeline = await httpJson<Timeline>(
        d.http,
        keys[side],
        "GET",
        `/v1/conversations/${conversation}/timeline`,
      );
      assert.equal(timeline.status, 200);
      const shown = timeline.body.segments.flatMap((x) => x.records);
      assert.deepEqual(new Set(shown.map((r) => r.id)), ids[side], "the timeline shows every record of the tenant");
      for (const x of timeline.body.segments) {
        assert.equal(x.segment.tenant, tenants[side]);
        for (const t of x.segment.turns) assert.doesNotMatch(t.text, new RegExp(words[other]));
      }
    }

    // Queries: only the caller's records and turns.
    for (const side of ["a", "b"] as const) {
      const other = side === "a" ? "b" : "a";
      const grpc = side === "a" ? grpcA : grpcB;
      for (const question of ["What is the secret code word for the vault?", "What is Caroline planning to study?"]) {
        const http = await httpJson<QueryResult>(d.http, keys[side], "POST", "/v1/query", { question, budget: 2000 });
        assert.equal(http.status, 200);
        const viaGrpc = await grpc.query({ question, budget: 2000 });
        for (const result of [http.body, viaGrpc]) {
          assert.ok(result.items.length > 0, "the query finds something");
          for (const item of result.items) {
            if (item.kind === "record") {
              assert.ok(ids[side].has(item.id), `query of ${tenants[side]} returned a foreign record`);
              assert.ok(!ids[other].has(item.id));
            }
            assert.doesNotMatch(item.text, new RegExp(words[other]));
          }
          assert.doesNotMatch(result.context, new RegExp(words[other]));
        }
      }
      const secret = await grpc.query({ question: "What is the secret code word for the vault?", budget: 2000 });
      assert.match(secret.context, new RegExp(words[side]), "each tenant finds its own secret");
    }
  } finally {
    for (const c of clients) c.close();
    await dep?.stop();
    await cleanUp(kafka, prefix, [tenants.a, tenants.b]);
  }
});

/**
 * Names that once shared keys: tenant `acme`'s conversation `eu/c1` and tenant `acme/eu`'s `c1` were
 * one partition key, one segmenter state, one dead-letter key. Plus two seeded generated pairs of
 * the same shape (tenant B = tenant A + separator + x, A's conversation = x + separator + B's).
 */
test("tenants whose names nest (acme vs acme/eu, generated names) never share data; assigned ids are '@' + UUID", {
  skip,
  timeout: 420_000,
}, async () => {
  const prefix = runPrefix("dist-names");
  const run = randomUUID().slice(0, 8);
  const unit = fc.constantFrom("a", "b", "/", ":", "%", "2", "F", ".", "é", "🦊");
  const name = fc.string({ unit, minLength: 1, maxLength: 6 });
  const generated = fc.sample(fc.record({ x: name, convB: name, sep: fc.constantFrom("/", ":", "::", "%2F", "%") }), {
    seed: 20261201,
    numRuns: 2,
  });
  const pairs = [
    { a: `acme-${run}`, b: `acme-${run}/eu`, convA: "eu/c1", convB: "c1" },
    ...generated.map((g, i) => ({
      a: `g${i}-${run}`,
      b: `g${i}-${run}${g.sep}${g.x}`,
      convA: `${g.x}${g.sep}${g.convB}`,
      convB: g.convB,
    })),
  ];
  const words = ["pineapple", "walrus", "quokka", "marmot", "ocelot", "narwhal"];
  const sides = pairs.flatMap((p, i) => [
    { tenant: p.a, conversation: p.convA, key: newKey(), word: words[2 * i] as string },
    { tenant: p.b, conversation: p.convB, key: newKey(), word: words[2 * i + 1] as string },
  ]);
  for (const s of sides) assert.ok(TenantNameSchema.safeParse(s.tenant).success, s.tenant);
  const apiKeys = Object.fromEntries(sides.map((s) => [s.key, s.tenant]));
  const kafka = kafkaClient(loadConfig({}, sharedEnv(prefix, apiKeys)), "tenant-names-test");
  const path = (c: string) => encodeURIComponent(c).replace(/\./g, "%2E");
  let dep: Deployment | undefined;
  try {
    dep = await startDeployment(prefix, apiKeys);
    const d = dep;
    for (const s of sides) {
      const r = await httpJson<{ turnIds: string[] }>(
        d.http,
        s.key,
        "POST",
        `/v1/conversations/${path(s.conversation)}/turns:batch`,
        {
          turns: [
            { ...own(s.word), turnId: "own-1" },
            { ...own(s.word), turnId: undefined, text: `The vault keeps ${s.word} safe.` },
          ],
        },
      );
      assert.equal(r.status, 202, JSON.stringify(r.body));
      // The gateway keeps no counter: an assigned id is the reserved prefix and a UUID.
      assert.match(r.body.turnIds[1] ?? "", /^@[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      assert.equal(
        (await httpJson(d.http, s.key, "POST", `/v1/conversations/${path(s.conversation)}/flush`)).status,
        202,
      );
    }
    const reserved = await httpJson<{ issues: { path: string }[] }>(
      d.http,
      sides[0]?.key as string,
      "POST",
      "/v1/conversations/c/turns",
      {
        ...own("x"),
        turnId: "@1",
      },
    );
    assert.equal(reserved.status, 400);
    assert.equal(reserved.body.issues[0]?.path, "turnId");
    await waitDrained(kafka, prefix, 180_000).catch((err: unknown) => {
      throw new Error(`${err instanceof Error ? err.message : String(err)}\n${tails(d)}`);
    });

    for (const s of sides) {
      const others = sides.filter((o) => o !== s).map((o) => o.word);
      const records = await listAllHttp(d.http, s.key);
      assert.ok(
        records.some((r) => r.text.includes(s.word)),
        `${JSON.stringify(s.tenant)} has its own records`,
      );
      for (const r of records) {
        assert.equal(r.source.tenant, s.tenant);
        assert.equal(r.source.conversation, s.conversation);
        for (const w of others)
          assert.ok(!r.text.includes(w), `${JSON.stringify(s.tenant)} lists another tenant's record`);
      }
      const q = await httpJson<QueryResult>(d.http, s.key, "POST", "/v1/query", {
        question: "What is the secret code word for the vault?",
        budget: 2000,
      });
      assert.equal(q.status, 200);
      assert.match(q.body.context, new RegExp(s.word));
      for (const w of others) assert.doesNotMatch(q.body.context, new RegExp(w));
    }
  } finally {
    await dep?.stop();
    await cleanUp(
      kafka,
      prefix,
      sides.map((s) => s.tenant),
    );
  }
});
