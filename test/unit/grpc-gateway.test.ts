// The gRPC front door (schemas/memory.proto) over the fake MemoryService: authentication, field-named
// INVALID_ARGUMENT, client-streaming ingest with partial acceptance, pagination, and replies that
// convert back to exactly the service's shapes.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Metadata, type ServiceError, status } from "@grpc/grpc-js";
import { CursorCodec } from "../../services/core/cursor.ts";
import { MAX_ID_LENGTH } from "../../services/core/input-rules.ts";
import { GrpcQueryBackend } from "../../services/gateway/grpc-client.ts";
import { startGrpcServer } from "../../services/gateway/grpc-server.ts";
import { internalAuthenticator, peerAddressOf, TENANT_METADATA_KEY } from "../../services/platform/grpc/auth.ts";
import { MemoryGrpcClient } from "../../services/platform/grpc/client.ts";
import type { RunningGrpcServer } from "../../services/platform/grpc/server.ts";
import { isServiceError, issuesOf } from "../../services/platform/grpc/status-mapping.ts";
import { Metrics } from "../../services/platform/metrics.ts";
import { FakeMemoryService, sampleQueryResult, sampleRecord } from "../helpers/fake-memory-service.ts";

const KEY_A = "key-tenant-a-123456";
const KEY_B = "key-tenant-b-123456";

const rejection = async (p: Promise<unknown>): Promise<ServiceError> => {
  try {
    await p;
  } catch (err) {
    assert.ok(isServiceError(err), `a gRPC error, got ${String(err)}`);
    return err;
  }
  assert.fail("expected the call to fail");
};

const turn = (conversation: string, turnId: string, extra: Record<string, unknown> = {}) => ({
  conversation,
  turnId,
  speaker: "Ana",
  text: `text of ${turnId}`,
  timestamp: "2024-05-06T10:15:00Z",
  ...extra,
});

describe("gRPC gateway", () => {
  const fake = new FakeMemoryService();
  const metrics = new Metrics({ defaultMetrics: false });
  let server: RunningGrpcServer;
  let a: MemoryGrpcClient;
  let b: MemoryGrpcClient;
  let anon: MemoryGrpcClient;

  before(async () => {
    const { apiKeyAuthenticator } = await import("../../services/platform/grpc/auth.ts");
    server = await startGrpcServer({
      service: fake,
      authenticate: apiKeyAuthenticator({ [KEY_A]: "tenant-a", [KEY_B]: "tenant-b" }),
      metrics,
      port: 0,
    });
    a = new MemoryGrpcClient({ address: server.address, apiKey: KEY_A, deadlineMs: 5000 });
    b = new MemoryGrpcClient({ address: server.address, apiKey: KEY_B, deadlineMs: 5000 });
    anon = new MemoryGrpcClient({ address: server.address, deadlineMs: 5000 });
  });
  after(async () => {
    for (const c of [a, b, anon]) c?.close();
    await server?.close();
  });

  it("refuses calls without a key or with an unknown key (UNAUTHENTICATED), and takes x-api-key too", async () => {
    const before = fake.calls.length;
    assert.equal((await rejection(anon.query({ question: "hi" }))).code, status.UNAUTHENTICATED);
    const wrong = new Metadata();
    wrong.set("authorization", "Bearer not-a-key-at-all");
    assert.equal((await rejection(anon.listRecords({ limit: 5 }, wrong))).code, status.UNAUTHENTICATED);
    assert.equal((await rejection(anon.ingest([turn("c1", "t1")]))).code, status.UNAUTHENTICATED);
    assert.equal(fake.calls.length, before, "the service was never called");

    const viaHeader = new Metadata();
    viaHeader.set("x-api-key", KEY_B);
    await anon.flush("c9", viaHeader);
    assert.deepEqual(fake.calls.at(-1), { method: "flush", tenant: "tenant-b", conversation: "c9" });
  });

  it("answers a query with exactly the service's QueryResult, for the key's tenant", async () => {
    const got = await a.query({ question: "Where did Caroline move?", budget: 500 });
    assert.deepEqual(got, sampleQueryResult("Where did Caroline move?", 500));
    const call = fake.callsOf("query").at(-1);
    assert.equal(call?.tenant, "tenant-a");
    assert.deepEqual(call?.req, { question: "Where did Caroline move?", budget: 500 });
  });

  it("names the bad field in INVALID_ARGUMENT (message and memory-issues metadata)", async () => {
    const q = await rejection(a.query({ question: "   " }));
    assert.equal(q.code, status.INVALID_ARGUMENT);
    assert.match(q.details, /question/);
    assert.deepEqual(
      issuesOf(q).map((i) => i.path),
      ["question"],
    );

    const budget = await rejection(a.query({ question: "ok", budget: 10 }));
    assert.equal(budget.code, status.INVALID_ARGUMENT);
    assert.deepEqual(
      issuesOf(budget).map((i) => i.path),
      ["budget"],
    );

    const asOf = await rejection(a.query({ question: "ok", asOf: "not a date" }));
    assert.deepEqual(
      issuesOf(asOf).map((i) => i.path),
      ["as_of"],
    );

    const limit = await rejection(a.listRecords({ limit: 500 }));
    assert.equal(limit.code, status.INVALID_ARGUMENT);
    assert.match(limit.details, /limit/);

    const range = await rejection(
      a.listRecords({ limit: 5, timeFrom: Date.UTC(2024, 1, 1), timeTo: Date.UTC(2023, 1, 1) }),
    );
    assert.deepEqual(
      issuesOf(range).map((i) => i.path),
      ["from"],
    );

    const id = await rejection(a.getRecord(""));
    assert.equal(id.code, status.INVALID_ARGUMENT);
    assert.deepEqual(
      issuesOf(id).map((i) => i.path),
      ["id"],
    );
  });

  it("applies the HTTP input rules: asOf, timestamps, control characters, id caps, forged cursors", async () => {
    for (const asOf of ["garbage", "May 8", "9999-01-01T00:00:00Z"]) {
      const r = await rejection(a.query({ question: "ok", asOf }));
      assert.equal(r.code, status.INVALID_ARGUMENT, asOf);
      assert.deepEqual(
        issuesOf(r).map((i) => i.path),
        ["as_of"],
      );
    }
    const long = "x".repeat(MAX_ID_LENGTH + 1);
    for (const conversation of [long, "c\u0000x"]) {
      const q = await rejection(a.query({ question: "ok", conversation }));
      assert.deepEqual(
        issuesOf(q).map((i) => i.path),
        ["conversation"],
      );
      const f = await rejection(a.flush(conversation));
      assert.equal(f.code, status.INVALID_ARGUMENT);
      const l = await rejection(a.listRecords({ limit: 5, conversation }));
      assert.deepEqual(
        issuesOf(l).map((i) => i.path),
        ["conversation"],
      );
    }
    const id = await rejection(a.getRecord(long));
    assert.deepEqual(
      issuesOf(id).map((i) => i.path),
      ["id"],
    );

    const summary = await a.ingest([
      turn("c1", "t1", { timestamp: "1" }),
      turn("c1", "t2", { timestamp: "2023-05-08" }),
      turn("c1", "t3", { speaker: "A\u0000na" }),
      turn("c1", "t4", { text: " \n\t " }),
      turn("c1", "t5", { text: "ok\u0000 text" }),
    ]);
    assert.deepEqual(
      summary.rejected.map((r) => [r.index, r.issues.map((i) => i.path)]),
      [
        [0, ["timestamp"]],
        [1, ["timestamp"]],
        [2, ["speaker"]],
        [3, ["text"]],
      ],
    );
    assert.equal(fake.callsOf("ingest").at(-1)?.turns[0]?.text, "ok text");

    // A store's cursor check (a ValidationError naming `cursor`) is INVALID_ARGUMENT, not INTERNAL.
    try {
      new CursorCodec("secret-of-the-test").decode("tenant-a", "forged");
    } catch (err) {
      fake.failWith = err as Error;
    }
    try {
      const c = await rejection(a.listRecords({ limit: 5, cursor: "forged" }));
      assert.equal(c.code, status.INVALID_ARGUMENT);
      assert.deepEqual(
        issuesOf(c).map((i) => i.path),
        ["cursor"],
      );
    } finally {
      fake.failWith = undefined;
    }
  });

  it("client-streaming ingest: valid turns go to the service in stream order, invalid ones come back by index", async () => {
    fake.calls.length = 0;
    const summary = await a.ingest([
      turn("c1", "t1"),
      turn("c1", "t2", { speaker: "" }),
      turn("c1", "t3", { role: "robot" }),
      turn("c2", "t4"),
      { conversation: "", turn_id: "t5", speaker: "Ana", text: "x", timestamp: "2024-05-06T10:15:00Z" },
      turn("c2", "t6", { timestamp: "yesterday-ish", sessionId: "s2" }),
      turn("c1", "t7", { metadata: { lang: "en" } }),
    ]);
    assert.equal(summary.accepted, 3);
    assert.deepEqual(summary.turn_ids, ["t1", "t4", "t7"]);
    assert.deepEqual(
      summary.rejected.map((r) => [r.index, r.turn_id, r.issues.map((i) => i.path)]),
      [
        [1, "t2", ["speaker"]],
        [2, "t3", ["role"]],
        [4, "t5", ["conversation"]],
        [5, "t6", ["timestamp"]],
      ],
    );
    const ingests = fake.callsOf("ingest");
    assert.deepEqual(
      ingests.map((c) => [c.tenant, c.conversation, c.turns.map((t) => t.turnId)]),
      [
        ["tenant-a", "c1", ["t1"]],
        ["tenant-a", "c2", ["t4"]],
        ["tenant-a", "c1", ["t7"]],
      ],
    );
    assert.deepEqual(ingests[2]?.turns[0], {
      turnId: "t7",
      speaker: "Ana",
      role: "user",
      text: "text of t7",
      timestamp: "2024-05-06T10:15:00Z",
      sessionId: "default",
      metadata: { lang: "en" },
    });
  });

  it("client-streaming ingest: no valid turn (or none at all) is INVALID_ARGUMENT naming the fields", async () => {
    const none = await rejection(a.ingest([turn("c1", "t1", { text: "" }), turn("c1", "t2", { speaker: "" })]));
    assert.equal(none.code, status.INVALID_ARGUMENT);
    assert.deepEqual(
      issuesOf(none).map((i) => i.path),
      ["turns.0.text", "turns.1.speaker"],
    );
    const empty = await rejection(a.ingest([]));
    assert.equal(empty.code, status.INVALID_ARGUMENT);
  });

  it("a large stream is handed over in chunks, in order", async () => {
    fake.calls.length = 0;
    const turns = Array.from({ length: 450 }, (_, i) => turn("big", `t${i}`));
    const summary = await a.ingest(turns);
    assert.equal(summary.accepted, 450);
    const ids = fake.callsOf("ingest").flatMap((c) => c.turns.map((t) => t.turnId));
    assert.deepEqual(
      ids,
      turns.map((t) => t.turnId),
    );
    assert.ok(fake.callsOf("ingest").length >= 3, "chunked");
  });

  it("paginates records with the cursor, scoped to the key's tenant; GetRecord is NOT_FOUND across tenants", async () => {
    const r1 = sampleRecord({ id: "r1" });
    const r2 = sampleRecord({
      id: "r2",
      type: "event",
      time: {},
      valid: { from: "2023-05-08T10:00:00.000Z", to: "2023-06-01T00:00:00.000Z", supersededBy: "r1" },
    });
    fake.addRecords("tenant-a", r1, r2);
    fake.addRecords("tenant-b", sampleRecord({ id: "rb" }));
    fake.nextCursor = "cursor-2";
    const page1 = await a.listRecords({ limit: 1, conversation: "conv-1" });
    assert.deepEqual(page1, { records: [r1], nextCursor: "cursor-2" });
    fake.nextCursor = undefined;
    const page2 = await a.listRecords({ limit: 1, cursor: "cursor-2", includeSuperseded: true });
    assert.equal(page2.nextCursor, undefined);
    const call = fake.callsOf("listRecords").at(-1);
    assert.deepEqual(call, {
      method: "listRecords",
      tenant: "tenant-a",
      query: { limit: 1, cursor: "cursor-2", includeSuperseded: true },
    });
    const from = Date.UTC(2023, 0, 1);
    await a.listRecords({ limit: 3, type: "event", timeFrom: from, entity: "Lisbon" });
    assert.deepEqual(fake.callsOf("listRecords").at(-1)?.query, {
      limit: 3,
      type: "event",
      timeFrom: from,
      entity: "Lisbon",
    });
    const defaults = await a.listRecords({ limit: 0 });
    assert.ok(defaults.records.length <= 50);
    assert.equal(fake.callsOf("listRecords").at(-1)?.query.limit, 50, "limit 0 means the default");

    assert.deepEqual(await a.getRecord("r2"), r2);
    assert.equal(await b.getRecord("r2"), undefined, "another tenant's record is not found");
    assert.deepEqual(await b.getRecord("rb"), fake.records.get("tenant-b")?.[0]);
  });

  it("flushes one conversation or all of the tenant's", async () => {
    assert.deepEqual(await a.flush("c1"), { flushed: true, conversation: "c1" });
    assert.deepEqual(fake.calls.at(-1), { method: "flush", tenant: "tenant-a", conversation: "c1" });
    assert.deepEqual(await a.flush(), { flushed: true, conversation: "" });
    assert.deepEqual(fake.calls.at(-1), { method: "flush", tenant: "tenant-a" });
  });

  it("maps service failures to INTERNAL without leaking the message, and counts calls in /metrics", async () => {
    fake.failWith = new Error("secret database detail");
    try {
      const err = await rejection(a.query({ question: "hi" }));
      assert.equal(err.code, status.INTERNAL);
      assert.doesNotMatch(err.details, /secret/);
    } finally {
      fake.failWith = undefined;
    }
    const text = await metrics.render();
    assert.match(text, /memory_grpc_requests_total\{method="Query",code="OK"\} \d+/);
    assert.match(text, /memory_grpc_requests_total\{method="Query",code="UNAUTHENTICATED"\} \d+/);
    assert.match(text, /memory_grpc_requests_total\{method="Query",code="INTERNAL"\} \d+/);
  });
});

describe("internal authenticator (query service)", () => {
  const fake = new FakeMemoryService();
  let server: RunningGrpcServer;

  before(async () => {
    server = await startGrpcServer({ service: fake, authenticate: internalAuthenticator("internal-token"), port: 0 });
  });
  after(async () => {
    await server?.close();
  });

  it("takes the tenant from x-memory-tenant only with the internal token", async () => {
    const ok = new MemoryGrpcClient({ address: server.address, internalToken: "internal-token" });
    const bad = new MemoryGrpcClient({ address: server.address, internalToken: "wrong-token" });
    try {
      await ok.query({ question: "hi" }, ok.metadata({ [TENANT_METADATA_KEY]: "tenant-x" }));
      assert.equal(fake.callsOf("query").at(-1)?.tenant, "tenant-x");
      const noTenant = await rejection(ok.query({ question: "hi" }));
      assert.equal(noTenant.code, status.UNAUTHENTICATED);
      const wrong = await rejection(bad.query({ question: "hi" }, bad.metadata({ [TENANT_METADATA_KEY]: "tenant-x" })));
      assert.equal(wrong.code, status.UNAUTHENTICATED);
      // Tenant names are Unicode, metadata values ASCII: the gateway's backend percent-encodes them.
      const backend = new GrpcQueryBackend(server.address, { internalToken: "internal-token" });
      try {
        for (const tenant of ["acme/eu", "Zürich 🦊 50%", "東京:%2F"]) {
          await backend.listRecords(tenant, { limit: 1 });
          assert.equal(fake.callsOf("listRecords").at(-1)?.tenant, tenant);
        }
      } finally {
        await backend.close();
      }
    } finally {
      ok.close();
      bad.close();
    }
  });
});

describe("failed-authentication limit (gRPC, as HTTP's 429)", () => {
  const fake = new FakeMemoryService();
  let server: RunningGrpcServer;

  before(async () => {
    const { apiKeyAuthenticator } = await import("../../services/platform/grpc/auth.ts");
    server = await startGrpcServer({
      service: fake,
      authenticate: apiKeyAuthenticator({ [KEY_A]: "tenant-a" }),
      authFailuresPerMinute: 3,
      port: 0,
    });
  });
  after(async () => {
    await server?.close();
  });

  it("refuses an address with RESOURCE_EXHAUSTED and retry-after after too many failures, even with a good key", async () => {
    const guesser = new MemoryGrpcClient({ address: server.address, apiKey: "guess-0000000", deadlineMs: 5000 });
    const good = new MemoryGrpcClient({ address: server.address, apiKey: KEY_A, deadlineMs: 5000 });
    try {
      for (let i = 0; i < 3; i++)
        assert.equal((await rejection(guesser.query({ question: "hi" }))).code, status.UNAUTHENTICATED);
      const refused = await rejection(guesser.ingest([turn("c1", "t1")]));
      assert.equal(refused.code, status.RESOURCE_EXHAUSTED);
      assert.ok(Number(refused.metadata.get("retry-after")[0]) >= 1, "retry-after trailer");
      // Same address (127.0.0.1): the limit is per address, before the key is looked at.
      assert.equal((await rejection(good.query({ question: "hi" }))).code, status.RESOURCE_EXHAUSTED);
      assert.equal(fake.calls.length, 0, "the service was never called");
    } finally {
      guesser.close();
      good.close();
    }
  });
});

describe("peerAddressOf", () => {
  it("drops the port of IPv4 and IPv6 peers", () => {
    assert.equal(peerAddressOf("ipv4:127.0.0.1:5000"), "127.0.0.1");
    assert.equal(peerAddressOf("ipv6:[::1]:5000"), "::1");
    assert.equal(peerAddressOf("unix:/tmp/s.sock"), "/tmp/s.sock");
  });
});
