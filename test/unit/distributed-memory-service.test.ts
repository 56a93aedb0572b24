// The gateway's MemoryService in the distributed runtime: a Kafka writer and a gRPC reader composed
// (services/gateway/distributed-memory-service.ts), here over fakes of both sides: no broker.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DistributedMemoryService } from "../../services/gateway/distributed-memory-service.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { Metrics } from "../../services/platform/metrics.ts";
import { FakeMemoryService, fakeRemoteReader, fakeTurnWriter, sampleRecord } from "../helpers/fake-memory-service.ts";

const setup = () => {
  const writes = new FakeMemoryService();
  const reads = new FakeMemoryService();
  const writer = fakeTurnWriter(writes);
  const service = new DistributedMemoryService(writer, fakeRemoteReader(reads));
  return { writes, reads, writer, service };
};

const turn = {
  speaker: "Ana",
  role: "user" as const,
  text: "hello",
  timestamp: "2024-05-06T10:00:00Z",
  sessionId: "s1",
};

describe("DistributedMemoryService: writes to the writer, reads from the reader", () => {
  it("sends ingest and flush to the writer only", async () => {
    const { writes, reads, service } = setup();
    const r = await service.ingest("acme", "c1", [{ ...turn, turnId: "t1" }]);
    assert.deepEqual(r, { accepted: 1, turnIds: ["t1"] });
    await service.flush("acme", "c1");
    await service.flush("acme");
    assert.deepEqual(
      writes.calls.map((c) => c.method),
      ["ingest", "flush", "flush"],
    );
    assert.deepEqual(writes.callsOf("flush"), [
      { method: "flush", tenant: "acme", conversation: "c1" },
      { method: "flush", tenant: "acme" },
    ]);
    assert.equal(reads.calls.length, 0);
  });

  it("sends query, listRecords and getRecord to the reader only, with the tenant", async () => {
    const { writes, reads, service } = setup();
    const record = sampleRecord({ id: "r1" });
    reads.addRecords("acme", record);
    const result = await service.query("acme", { question: "where?", budget: 200 });
    assert.equal(result.budget, 200);
    assert.deepEqual((await service.listRecords("acme", { limit: 5 })).records, [record]);
    assert.deepEqual(await service.getRecord("acme", "r1"), record);
    assert.equal(await service.getRecord("other", "r1"), undefined);
    assert.deepEqual(
      reads.calls.map((c) => [c.method, c.tenant]),
      [
        ["query", "acme"],
        ["listRecords", "acme"],
        ["getRecord", "acme"],
        ["getRecord", "other"],
      ],
    );
    assert.equal(writes.calls.length, 0);
  });

  it("is healthy and ready only when both sides are, and says what each side is", async () => {
    const { writes, reads, service } = setup();
    assert.deepEqual(await service.health(), {
      ok: true,
      ready: true,
      details: { kafka: "producer connected (fake)", query: "query service serving (fake)" },
    });
    reads.ready = false;
    assert.deepEqual(await service.health(), {
      ok: false,
      ready: false,
      details: { kafka: "producer connected (fake)", query: "unreachable" },
    });
    reads.ready = true;
    writes.ready = false;
    const h = await service.health();
    assert.equal(h.ok, false);
    assert.equal(h.ready, false);
    assert.equal(h.details.kafka, "producer disconnected");
  });

  it("close closes the writer; the reader is its owner's to close", async () => {
    const { writer, service } = setup();
    await service.close();
    assert.equal(writer.closed, true);
  });

  it("behind the HTTP app: writes and reads land on their side, maintenance routes answer 501", async () => {
    const { writes, reads, service } = setup();
    const app = createHttpApp({ service, apiKeys: { k: "acme" }, metrics: new Metrics({ defaultMetrics: false }) });
    const call = (path: string, method = "GET", json?: unknown) =>
      app.request(path, {
        method,
        headers: { authorization: "Bearer k", ...(json ? { "content-type": "application/json" } : {}) },
        ...(json ? { body: JSON.stringify(json) } : {}),
      });
    assert.equal((await call("/v1/conversations/c1/turns", "POST", { ...turn, turnId: "t1" })).status, 202);
    assert.equal((await call("/v1/query", "POST", { question: "hello?" })).status, 200);
    assert.equal((await call("/v1/records/r1/history")).status, 501);
    assert.equal((await call("/v1/consolidate", "POST")).status, 501);
    assert.deepEqual(
      writes.calls.map((c) => c.method),
      ["ingest"],
    );
    assert.deepEqual(
      reads.calls.map((c) => c.method),
      ["query"],
    );
  });
});
