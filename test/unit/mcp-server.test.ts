import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { mcpTenant } from "../../services/cli/mcp.ts";
import { UsageError } from "../../services/cli/usage.ts";
import { DEFAULT_API_KEY } from "../../services/core/config.ts";
import { ConflictError } from "../../services/core/errors.ts";
import { DistributedMemoryService } from "../../services/gateway/distributed-memory-service.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { createMemoryMcpServer } from "../../services/mcp/server.ts";
import { startHttpServer } from "../../services/platform/http-server.ts";
import { Metrics } from "../../services/platform/metrics.ts";
import { FakeMemoryService, fakeRemoteReader, fakeTurnWriter, sampleRecord } from "../helpers/fake-memory-service.ts";

const textOf = (r: CallToolResult): string => r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

const connected = async (service: FakeMemoryService, onInternalError?: (err: unknown) => void) => {
  const server = createMemoryMcpServer({
    service,
    tenant: "tenant-a",
    ...(onInternalError ? { onInternalError } : {}),
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "unit", version: "1" });
  await client.connect(clientSide);
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  return { call, close: () => client.close() };
};

const TURN = { speaker: "Ana", text: "I adopted a dog.", timestamp: "2024-05-06T10:15:00Z" };

describe("MCP tools over the service contracts (fake service)", () => {
  it("acts for the server's tenant only and passes the listing filters through the shared schema", async () => {
    const fake = new FakeMemoryService();
    fake.addRecords("tenant-a", sampleRecord());
    const mcp = await connected(fake);
    await mcp.call("remember", { conversation: "c1", turns: [TURN], tenant: "tenant-b" });
    await mcp.call("list_memories", { conversation: "conv-1", from: "2023-05-01", limit: 3 });
    assert.deepEqual(
      fake.calls.map((c) => c.tenant),
      ["tenant-a", "tenant-a"],
    );
    assert.deepEqual(fake.callsOf("listRecords")[0]?.query, {
      conversation: "conv-1",
      timeFrom: Date.UTC(2023, 4, 1),
      limit: 3,
    });
    assert.equal(fake.callsOf("flush").length, 0, "no endOfSession: the segment stays open");
    await mcp.call("remember", { conversation: "c1", turns: [TURN], endOfSession: true });
    assert.deepEqual(fake.callsOf("flush"), [{ method: "flush", tenant: "tenant-a", conversation: "c1" }]);
    await mcp.close();
  });

  it("lists recall's sources with their dates: an event of several days by both ends", async () => {
    const mcp = await connected(new FakeMemoryService());
    const text = textOf(await mcp.call("recall", { question: "Where did Caroline move?" }));
    assert.match(
      text,
      /\n\[1\] record rec-1 · 2023-05-01T00:00:00\.000Z to 2023-05-31T23:59:59\.999Z · conversation conv-1/,
    );
    assert.match(text, /\n\[2\] turn turn-1 · 2023-06-02T09:00:00\.000Z · conversation conv-1/);
    await mcp.close();
  });

  it("says when the runtime has no maintenance, names conflicting turns, and hides internal errors", async () => {
    const fake = new FakeMemoryService();
    const internal: unknown[] = [];
    const mcp = await connected(fake, (err) => internal.push(err));
    const consolidate = await mcp.call("consolidate", {});
    assert.equal(consolidate.isError, true);
    assert.match(textOf(consolidate), /not supported by this runtime/);

    fake.failWith = new ConflictError([{ index: 0, turnId: "t1" }]);
    const conflict = await mcp.call("remember", { conversation: "c1", turns: [{ ...TURN, turnId: "t1" }] });
    assert.equal(conflict.isError, true);
    assert.match(textOf(conflict), /^turns\.0\.turnId: /m);

    fake.failWith = new Error("disk on fire at /secret/path");
    const failed = await mcp.call("recall", { question: "dog?" });
    assert.equal(failed.isError, true);
    assert.equal(textOf(failed), "internal error in recall");
    assert.equal(internal.length, 1);
    await mcp.close();
  });
});

describe("/mcp of the distributed gateway (Kafka writer and gRPC reader faked)", () => {
  it("writes go to the writer and reads to the reader for the key's tenant; no maintenance there", async () => {
    const writes = new FakeMemoryService();
    const reads = new FakeMemoryService();
    const service = new DistributedMemoryService(fakeTurnWriter(writes), fakeRemoteReader(reads));
    const app = createHttpApp({
      service,
      apiKeys: { "gateway-key-123": "acme" },
      metrics: new Metrics({ defaultMetrics: false }),
    });
    const server = await startHttpServer(app, { host: "127.0.0.1", port: 0 });
    const client = new Client({ name: "unit", version: "1" });
    try {
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
          requestInit: { headers: { "x-api-key": "gateway-key-123" } },
        }),
      );
      const call = async (name: string, args: Record<string, unknown>) =>
        (await client.callTool({ name, arguments: args })) as CallToolResult;
      assert.equal(
        (await call("remember", { conversation: "c1", turns: [TURN], endOfSession: true })).isError,
        undefined,
      );
      assert.equal((await call("recall", { question: "dog?" })).isError, undefined);
      assert.deepEqual(
        writes.calls.map((c) => [c.method, c.tenant]),
        [
          ["ingest", "acme"],
          ["flush", "acme"],
        ],
      );
      assert.deepEqual(
        reads.calls.map((c) => [c.method, c.tenant]),
        [["query", "acme"]],
      );
      const history = await call("memory_history", { id: "r1" });
      assert.equal(history.isError, true);
      assert.match(textOf(history), /not supported by this runtime/);
    } finally {
      await client.close();
      await server.close();
      await service.close();
    }
  });
});

describe("the tenant of `memory mcp`", () => {
  it("is --tenant, else MEMORY_MCP_TENANT, else the default key's, else the only configured one", () => {
    const keys = { [DEFAULT_API_KEY]: "default", "another-key-123": "t2" };
    assert.equal(mcpTenant({ apiKeys: keys }, "flagged", { MEMORY_MCP_TENANT: "env" }), "flagged");
    assert.equal(mcpTenant({ apiKeys: keys }, undefined, { MEMORY_MCP_TENANT: "env" }), "env");
    assert.equal(mcpTenant({ apiKeys: keys }, undefined, {}), "default");
    assert.equal(mcpTenant({ apiKeys: { "only-key-1234": "solo" } }, undefined, {}), "solo");
    assert.throws(() => mcpTenant({ apiKeys: { "k1-12345678": "a", "k2-12345678": "b" } }, undefined, {}), UsageError);
    assert.throws(() => mcpTenant({ apiKeys: keys }, " padded", {}), UsageError);
  });
});
