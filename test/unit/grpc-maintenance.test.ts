// memory.v1.Maintenance (schemas/memory.proto): the query service's consolidation, history and
// erasure RPCs, served over a recording fake and called through the gateway's GrpcQueryBackend and
// DistributedMemoryService, up to the HTTP routes: reports and histories cross the wire unchanged,
// the tenant travels in the metadata, the internal token is required, and an erasure is also
// published through the writer (its count as `kafka`) with the erased record ids, which the HTTP
// answer does not carry.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { status } from "@grpc/grpc-js";
import { ValidationError } from "../../services/core/errors.ts";
import { buildHistory, type RecordHistory } from "../../services/core/history.ts";
import type {
  ConsolidationReport,
  ErasureReport,
  StoreErasureReport,
  StoreSideMaintenance,
} from "../../services/core/maintenance.ts";
import { DistributedMemoryService } from "../../services/gateway/distributed-memory-service.ts";
import { GrpcQueryBackend } from "../../services/gateway/grpc-client.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { internalAuthenticator } from "../../services/platform/grpc/auth.ts";
import { MemoryGrpcClient } from "../../services/platform/grpc/client.ts";
import { type RunningGrpcServer, startGrpcServer } from "../../services/platform/grpc/server.ts";
import { isServiceError } from "../../services/platform/grpc/status-mapping.ts";
import { Metrics } from "../../services/platform/metrics.ts";
import { FakeMemoryService, fakeRemoteReader, fakeTurnWriter, sampleRecord } from "../helpers/fake-memory-service.ts";

const TOKEN = "internal-token-123456";

const REPORT: ConsolidationReport = {
  tenants: ["acme"],
  examined: 4,
  candidates: 6,
  merged: 1,
  superseded: 2,
  linked: 1,
  unchanged: 0,
  dropped: 2,
  ms: 12.5,
  decider: "rules",
  cost: { llmCalls: 0, inputTokens: 0, outputTokens: 0 },
};

const older = sampleRecord({
  id: "r-old",
  text: "Ana lives in Boston.",
  valid: { from: "2024-01-10T10:00:00.000Z", to: "2024-03-12T10:00:00.000Z", supersededBy: "r-new" },
});
const newer = sampleRecord({ id: "r-new", text: "Ana moved to Denver.", valid: { from: "2024-03-12T10:00:00.000Z" } });
const HISTORY = buildHistory("r-old", {
  records: [older, newer],
  relations: [{ from: "r-new", to: "r-old", relation: "SUPERSEDES", at: "2024-03-12T10:00:00.000Z", reason: "moved" }],
}) as RecordHistory;

/** Records the calls it gets; answers fixed reports. */
class RecordingMaintenance implements StoreSideMaintenance {
  readonly calls: { op: string; tenant?: string; arg?: string }[] = [];
  async consolidate(tenant?: string): Promise<ConsolidationReport> {
    this.calls.push({ op: "consolidate", ...(tenant !== undefined ? { tenant } : {}) });
    return REPORT;
  }
  async history(tenant: string, recordId: string): Promise<RecordHistory | undefined> {
    this.calls.push({ op: "history", tenant, arg: recordId });
    return recordId === "r-old" ? HISTORY : undefined;
  }
  async erase(tenant: string, conversation?: string): Promise<StoreErasureReport> {
    this.calls.push({ op: "erase", tenant, ...(conversation !== undefined ? { arg: conversation } : {}) });
    return {
      tenant,
      ...(conversation !== undefined ? { conversation, turns: 3 } : {}),
      records: 2,
      vectors: 5,
      inboxEntries: 0,
      stateKeys: 0,
      restored: 1,
      ms: 3.25,
      // None for the tenant: an empty list crosses the wire as absent.
      ...(conversation !== undefined ? { erasedRecordIds: ["r-1", "r-2"] } : {}),
    };
  }
}

describe("memory.v1.Maintenance through the gateway's query backend", () => {
  const maintenance = new RecordingMaintenance();
  let server: RunningGrpcServer;
  let backend: GrpcQueryBackend;

  before(async () => {
    server = await startGrpcServer({
      service: new FakeMemoryService(),
      maintenance,
      authenticate: internalAuthenticator(TOKEN),
      metrics: new Metrics({ defaultMetrics: false }),
      port: 0,
    });
    backend = new GrpcQueryBackend(server.address, { internalToken: TOKEN });
  });
  after(async () => {
    await backend.close();
    await server.close();
  });

  it("carries reports and histories across the wire unchanged, for the tenant of the metadata", async () => {
    maintenance.calls.length = 0;
    assert.deepEqual(await backend.consolidate("acme/eu"), REPORT);
    assert.deepEqual(await backend.history("acme/eu", "r-old"), HISTORY);
    assert.equal(await backend.history("acme/eu", "missing"), undefined);
    const conv = await backend.erase("acme/eu", "c1");
    assert.equal(conv.conversation, "c1");
    assert.equal(conv.turns, 3);
    assert.deepEqual(conv.erasedRecordIds, ["r-1", "r-2"]);
    const all = await backend.erase("acme/eu");
    assert.equal(all.conversation, undefined);
    assert.equal(all.turns, undefined);
    assert.equal(all.erasedRecordIds, undefined);
    assert.deepEqual(maintenance.calls, [
      { op: "consolidate", tenant: "acme/eu" },
      { op: "history", tenant: "acme/eu", arg: "r-old" },
      { op: "history", tenant: "acme/eu", arg: "missing" },
      { op: "erase", tenant: "acme/eu", arg: "c1" },
      { op: "erase", tenant: "acme/eu" },
    ]);
  });

  it("refuses a call without the internal token, and a bad record id or conversation as invalid", async () => {
    const stranger = new MemoryGrpcClient({ address: server.address, internalToken: "wrong-token-123456" });
    try {
      await assert.rejects(stranger.consolidate(stranger.metadata({ "x-memory-tenant": "acme" })), (err) => {
        assert.ok(isServiceError(err));
        assert.equal(err.code, status.UNAUTHENTICATED);
        return true;
      });
    } finally {
      stranger.close();
    }
    await assert.rejects(backend.history("acme", "x".repeat(10_000)), ValidationError);
    await assert.rejects(backend.erase("acme", "bad\u0000conversation"), ValidationError);
  });

  it("behind the HTTP app: the maintenance routes answer, and an erasure is published through the writer", async () => {
    const writes = new FakeMemoryService();
    const published: { tenant: string; conversation?: string; ids?: readonly string[] }[] = [];
    const writer = Object.assign(fakeTurnWriter(writes), {
      publishErasure: async (tenant: string, conversation?: string, ids?: readonly string[]) => {
        published.push({ tenant, ...(conversation !== undefined ? { conversation } : {}), ids });
        return { messages: 7 };
      },
    });
    const service = new DistributedMemoryService(writer, backend);
    assert.equal(service.offersMaintenance, true);
    const app = createHttpApp({ service, apiKeys: { k: "acme" }, metrics: new Metrics({ defaultMetrics: false }) });
    const call = (path: string, method = "GET") =>
      app.request(path, { method, headers: { authorization: "Bearer k" } });

    const consolidated = await call("/v1/consolidate", "POST");
    assert.equal(consolidated.status, 200);
    assert.deepEqual(await consolidated.json(), REPORT);
    const history = await call("/v1/records/r-old/history");
    assert.equal(history.status, 200);
    assert.deepEqual(await history.json(), JSON.parse(JSON.stringify(HISTORY)));
    assert.equal((await call("/v1/records/missing/history")).status, 404);

    const erased = await call("/v1/conversations/c1", "DELETE");
    assert.equal(erased.status, 200);
    const body = (await erased.json()) as ErasureReport;
    assert.equal(body.records, 2);
    assert.equal(body.kafka, 7);
    assert.ok(!("erasedRecordIds" in body), "the record ids stay between the query service and the gateway");
    assert.equal((await call("/v1/tenant?confirm=acme", "DELETE")).status, 200);
    assert.deepEqual(published, [
      { tenant: "acme", conversation: "c1", ids: ["r-1", "r-2"] },
      { tenant: "acme", ids: [] },
    ]);

    // A reader without the Maintenance RPCs: the routes answer 501 as before.
    const bare = new DistributedMemoryService(writer, fakeRemoteReader(new FakeMemoryService()));
    assert.equal(bare.offersMaintenance, false);
    const bareApp = createHttpApp({
      service: bare,
      apiKeys: { k: "acme" },
      metrics: new Metrics({ defaultMetrics: false }),
    });
    assert.equal(
      (await bareApp.request("/v1/consolidate", { method: "POST", headers: { authorization: "Bearer k" } })).status,
      501,
    );
  });
});
