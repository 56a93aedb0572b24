import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, describe, it } from "node:test";
import { status } from "@grpc/grpc-js";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";
import { ConflictError, ValidationError } from "../../services/core/errors.ts";
import type { TurnInput } from "../../services/core/requests.ts";
import { openEmbeddedEngine } from "../../services/embedded/open.ts";
import { startGrpcServer } from "../../services/gateway/grpc-server.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { apiKeyAuthenticator } from "../../services/platform/grpc/auth.ts";
import { MemoryGrpcClient } from "../../services/platform/grpc/client.ts";
import { isServiceError } from "../../services/platform/grpc/status-mapping.ts";
import { Metrics } from "../../services/platform/metrics.ts";
import { Closer } from "../helpers/closer.ts";

const KEYS = { "key-of-tenant-a-1": "acme", "key-of-tenant-b-2": "acme/eu" };
const A = "key-of-tenant-a-1";
const B = "key-of-tenant-b-2";

const turn = (text: string, extra: Partial<TurnInput> = {}) => ({
  speaker: "Ana",
  text,
  timestamp: "2024-05-06T10:00:00Z",
  ...extra,
});

interface Body {
  accepted?: number;
  turnIds?: string[];
  error?: string;
  issues?: { path: string; message: string }[];
  rejected?: { index: number; turnId?: string; status?: number; issues: { path: string; message: string }[] }[];
}

describe("turn ids: a reserved namespace for assigned ids, 409 on a reused id with other content", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  // Each test closes its engines; one that fails first still gets them closed here.
  const engines = new Closer();
  afterEach(() => engines.closeAll());
  const open = async (dir = mkdtempSync(join(tmpdir(), "turn-ids-"))) => {
    if (!dirs.includes(dir)) dirs.push(dir);
    const opened = await engines.track(
      openEmbeddedEngine(loadConfig({ dataDir: dir }), { embedder: new HashingEmbedder() }),
    );
    const app = createHttpApp({
      service: opened.engine,
      apiKeys: KEYS,
      metrics: new Metrics({ defaultMetrics: false }),
    });
    const post = async (path: string, key: string, json: unknown) => {
      const res = await app.request(path, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(json),
      });
      return { status: res.status, body: (await res.json()) as Body };
    };
    return { dir, opened, engine: opened.engine, post };
  };

  it("numbers assigned ids per tenant and conversation, never the global inbox position", async () => {
    const o = await open();
    const a1 = await o.post("/v1/conversations/c1/turns:batch", A, {
      turns: [turn("one"), turn("two"), turn("three")],
    });
    assert.deepEqual(a1.body.turnIds, ["@1", "@2", "@3"]);
    const a2 = await o.post("/v1/conversations/c2/turns", A, turn("other conversation"));
    assert.deepEqual(a2.body.turnIds, ["@1"]);
    // acme/eu's first turn is @1 whatever acme ingested: no tenant learns another's volume.
    const b1 = await o.post("/v1/conversations/c1/turns", B, turn("eu one"));
    assert.deepEqual(b1.body.turnIds, ["@1"]);
    const a3 = await o.post("/v1/conversations/c1/turns", A, turn("four"));
    assert.deepEqual(a3.body.turnIds, ["@4"]);
    await o.opened.close();
  });

  it("assigned ids never collide with client ids: every acknowledged turn is stored", async () => {
    const o = await open();
    // The old scheme assigned t<global seq>: a client id t12 made a later id-less turn vanish.
    const client = await o.post("/v1/conversations/c/turns:batch", A, {
      turns: Array.from({ length: 12 }, (_, i) => turn(`client turn ${i}`, { turnId: `t${i + 1}` })),
    });
    assert.equal(client.status, 202);
    const assigned: string[] = [];
    for (let i = 0; i < 15; i++) {
      const r = await o.post("/v1/conversations/c/turns", A, turn(`server turn ${i}`));
      assert.equal(r.status, 202);
      assigned.push(...(r.body.turnIds ?? []));
    }
    assert.equal(new Set(assigned).size, 15);
    assert.ok(assigned.every((id) => id.startsWith("@")));
    await o.engine.flush("acme", "c");
    await o.engine.drain();
    assert.equal(o.engine.progress.turns, 27, "12 client turns and 15 assigned ones, none dropped");
    await o.opened.close();
  });

  it("refuses client ids with the reserved prefix: 400 naming turnId, single and batch", async () => {
    const o = await open();
    const single = await o.post("/v1/conversations/c/turns", A, turn("x", { turnId: "@7" }));
    assert.equal(single.status, 400);
    assert.equal(single.body.issues?.[0]?.path, "turnId");
    assert.match(single.body.issues?.[0]?.message ?? "", /reserved/);
    const batch = await o.post("/v1/conversations/c/turns:batch", A, {
      turns: [turn("ok", { turnId: "k1" }), turn("bad", { turnId: " @1" })],
    });
    assert.equal(batch.status, 207);
    assert.deepEqual(batch.body.rejected?.[0]?.index, 1);
    assert.equal(batch.body.rejected?.[0]?.issues[0]?.path, "turnId");
    await assert.rejects(
      o.engine.ingest("acme", "c", [turn("direct", { turnId: "@2" }) as TurnInput]),
      ValidationError,
    );
    await o.opened.close();
  });

  it("same id and content is idempotent (202); other content is 409 naming the id, the first kept", async () => {
    const o = await open();
    const first = await o.post("/v1/conversations/c/turns", A, turn("I live in Paris", { turnId: "k1" }));
    assert.equal(first.status, 202);
    const again = await o.post("/v1/conversations/c/turns", A, turn("I live in Paris", { turnId: "k1" }));
    assert.equal(again.status, 202);
    const other = await o.post("/v1/conversations/c/turns", A, turn("I live in Rome", { turnId: "k1" }));
    assert.equal(other.status, 409);
    assert.equal(other.body.issues?.[0]?.path, "turnId");
    assert.match(other.body.error ?? "", /"k1"/);
    // Same id in another conversation or another tenant is another turn.
    assert.equal((await o.post("/v1/conversations/c2/turns", A, turn("I live in Rome", { turnId: "k1" }))).status, 202);
    assert.equal((await o.post("/v1/conversations/c/turns", B, turn("I live in Rome", { turnId: "k1" }))).status, 202);
    // Metadata order does not make content different.
    const m1 = turn("meta", { turnId: "k2", metadata: { a: "1", b: "2" } });
    const m2 = turn("meta", { turnId: "k2", metadata: { b: "2", a: "1" } });
    assert.equal((await o.post("/v1/conversations/c/turns", A, m1)).status, 202);
    assert.equal((await o.post("/v1/conversations/c/turns", A, m2)).status, 202);
    await o.engine.flush("acme", "c");
    await o.engine.drain();
    const texts = (await o.engine.query("acme", { question: "where do I live", conversation: "c" })).items
      .map((i) => i.text)
      .join(" ");
    assert.doesNotMatch(texts, /Rome/);
    await o.opened.close();
  });

  it("a batch sets conflicting turns aside with status 409 and ingests the others; all in conflict is 409", async () => {
    const o = await open();
    await o.post("/v1/conversations/c/turns", A, turn("original", { turnId: "k1" }));
    const mixed = await o.post("/v1/conversations/c/turns:batch", A, {
      turns: [
        turn("new one", { turnId: "k2" }),
        turn("changed", { turnId: "k1" }),
        turn("no id"),
        turn("first k3", { turnId: "k3" }),
        turn("second k3, different", { turnId: "k3" }),
      ],
    });
    assert.equal(mixed.status, 207);
    assert.deepEqual(mixed.body.turnIds, ["k2", "@1", "k3"]);
    assert.deepEqual(
      mixed.body.rejected?.map((r) => [r.index, r.turnId, r.status, r.issues[0]?.path]),
      [
        [1, "k1", 409, "turnId"],
        [4, "k3", 409, "turnId"],
      ],
    );
    const all = await o.post("/v1/conversations/c/turns:batch", A, {
      turns: [turn("changed again", { turnId: "k2" })],
    });
    assert.equal(all.status, 409);
    assert.equal(all.body.rejected?.[0]?.status, 409);
    await assert.rejects(
      o.engine.ingest("acme", "c", [{ ...turn("x", { turnId: "k2" }), role: "user", sessionId: "default" }]),
      ConflictError,
    );
    await o.opened.close();
  });

  it("keeps the per-conversation counter across a restart; erasure of the conversation resets it", async () => {
    const o = await open();
    await o.post("/v1/conversations/c/turns:batch", A, { turns: [turn("one"), turn("two")] });
    await o.opened.close();
    const p = await open(o.dir);
    assert.deepEqual((await p.post("/v1/conversations/c/turns", A, turn("three"))).body.turnIds, ["@3"]);
    await p.engine.erase("acme", "c");
    assert.deepEqual((await p.post("/v1/conversations/c/turns", A, turn("again"))).body.turnIds, ["@1"]);
    await p.opened.close();
  });

  it("gRPC: a conflicting turn of the stream is rejected naming turn_id, the others ingested; all in conflict is ALREADY_EXISTS", async () => {
    const o = await open();
    const server = await startGrpcServer({
      service: o.engine,
      authenticate: apiKeyAuthenticator(KEYS),
      metrics: new Metrics({ defaultMetrics: false }),
      port: 0,
    });
    const client = new MemoryGrpcClient({ address: server.address, apiKey: A, deadlineMs: 5000 });
    try {
      const t = (turnId: string, text: string) => ({ conversation: "c", turnId, ...turn(text) });
      assert.equal((await client.ingest([t("k1", "original")])).accepted, 1);
      const mixed = await client.ingest([t("k1", "changed"), t("k9", "new"), t("k1", "original")]);
      assert.equal(mixed.accepted, 2);
      assert.deepEqual(mixed.turn_ids, ["k9", "k1"]);
      assert.deepEqual(
        mixed.rejected.map((r) => [r.index, r.turn_id, r.issues[0]?.path]),
        [[0, "k1", "turn_id"]],
      );
      const err = await client.ingest([t("k9", "changed too")]).then(
        () => assert.fail("expected ALREADY_EXISTS"),
        (e: unknown) => e,
      );
      assert.ok(isServiceError(err));
      assert.equal(err.code, status.ALREADY_EXISTS);
      assert.match(err.details, /"k9"/);
    } finally {
      client.close();
      await server.close();
      await o.opened.close();
    }
  });
});
