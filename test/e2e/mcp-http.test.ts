import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { loadConfig } from "../../services/core/config.ts";
import { loadLocomo } from "../../services/core/datasets/locomo.ts";
import type { QueryResult } from "../../services/core/query-types.ts";
import type { MemoryRecord } from "../../services/core/types.ts";
import { type OpenedEngine, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { type RunningHttpServer, startHttpServer } from "../../services/platform/http-server.ts";
import { Metrics } from "../../services/platform/metrics.ts";

const MODEL = "models/all-MiniLM-L6-v2/model.onnx";
const SAMPLE = "services/cli/sample-locomo.json";
const KEY_A = "key-of-tenant-a-123";
const KEY_B = "key-of-tenant-b-456";
const KEYS = { [KEY_A]: "tenant-a", [KEY_B]: "tenant-b" };

const textOf = (r: CallToolResult): string => r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

describe("MCP over Streamable HTTP at /mcp (gateway app, embedded engine, real embedder)", {
  skip: existsSync(MODEL) ? false : "model missing: run node scripts/setup.mjs",
}, () => {
  let dir: string;
  let opened: OpenedEngine;
  let server: RunningHttpServer;
  const metrics = new Metrics({ defaultMetrics: false });
  const clients: Client[] = [];

  const connect = async (key: string): Promise<Client> => {
    const client = new Client({ name: "mcp-http-test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${key}` } },
      }),
    );
    clients.push(client);
    return client;
  };
  const call = async (client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "memory-mcp-http-"));
    opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }), { observer: metrics });
    server = await startHttpServer(createHttpApp({ service: opened.engine, apiKeys: KEYS, metrics }), {
      host: "127.0.0.1",
      port: 0,
    });
  });
  after(async () => {
    for (const c of clients) await c.close();
    await server?.close();
    await opened?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("lists the seven tools with JSON schemas and descriptions", async () => {
    const client = await connect(KEY_A);
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [
      "consolidate",
      "forget",
      "get_memory",
      "list_memories",
      "memory_history",
      "recall",
      "remember",
    ]);
    for (const t of tools) {
      assert.ok((t.description ?? "").length > 20, t.name);
      assert.equal(t.inputSchema.type, "object");
    }
    const remember = tools.find((t) => t.name === "remember");
    assert.deepEqual(remember?.inputSchema.required?.sort(), ["conversation", "turns"]);
  });

  it("remembers a conversation and recalls it end to end, with sources; the other tenant sees nothing", async () => {
    const [conv] = loadLocomo(SAMPLE);
    assert.ok(conv);
    const a = await connect(KEY_A);
    const stored = await call(a, "remember", { conversation: conv.id, turns: conv.turns, endOfSession: true });
    assert.equal(stored.isError, undefined, textOf(stored));
    assert.equal((stored.structuredContent as { accepted: number }).accepted, conv.turns.length);
    await opened.engine.drain();

    const recalled = await call(a, "recall", { question: "What is the name of Ben's dog?", budget: 500 });
    assert.equal(recalled.isError, undefined, textOf(recalled));
    const result = recalled.structuredContent as unknown as QueryResult;
    assert.ok(result.contextTokens > 0 && result.contextTokens <= 500);
    assert.ok(textOf(recalled).includes("Pepper"), textOf(recalled));
    assert.match(textOf(recalled), /Sources \(\d+\/500 tokens\):\n\[1\] /);
    assert.ok(result.items.some((i) => i.turnIds.includes("D1:2")));

    const listed = await call(a, "list_memories", { entity: "Pepper", limit: 5 });
    const page = listed.structuredContent as { records: MemoryRecord[] };
    assert.ok(page.records.length > 0 && page.records.every((r) => r.text.includes("Pepper")));
    const id = page.records[0]?.id as string;
    const one = await call(a, "get_memory", { id });
    assert.equal((one.structuredContent as unknown as MemoryRecord).id, id);
    const history = await call(a, "memory_history", { id });
    assert.equal(history.isError, undefined, textOf(history));
    const consolidated = await call(a, "consolidate", {});
    assert.equal(consolidated.isError, undefined, textOf(consolidated));

    const b = await connect(KEY_B);
    const other = await call(b, "recall", { question: "What is the name of Ben's dog?" });
    assert.equal((other.structuredContent as unknown as QueryResult).items.length, 0);
    const notYours = await call(b, "get_memory", { id });
    assert.equal(notYours.isError, true);

    // forget needs its confirmation; with it the conversation is gone.
    const refused = await call(a, "forget", { conversation: conv.id, confirm: "yes" });
    assert.equal(refused.isError, true);
    assert.match(textOf(refused), /^confirm: /m);
    const erased = await call(a, "forget", { conversation: conv.id, confirm: conv.id });
    assert.equal(erased.isError, undefined, textOf(erased));
    assert.ok((erased.structuredContent as { records: number }).records > 0);
    const after = await call(a, "list_memories", { conversation: conv.id });
    assert.equal((after.structuredContent as { records: unknown[] }).records.length, 0);
  });

  it("answers a bad argument with a tool error naming the field", async () => {
    const a = await connect(KEY_A);
    const noTimestamp = await call(a, "remember", {
      conversation: "c-bad",
      turns: [{ speaker: "Ana", text: "no timestamp here" }],
    });
    assert.equal(noTimestamp.isError, true);
    // The SDK checks the published schema first and names the field its way: "... at turns[0].timestamp".
    assert.match(textOf(noTimestamp), /at turns\[0\]\.timestamp/);
    const budget = await call(a, "recall", { question: "anything?", budget: 10 });
    assert.equal(budget.isError, true);
    assert.match(textOf(budget), /budget/);
    const listing = await call(a, "list_memories", { from: "2024-05-02", to: "2024-05-01" });
    assert.equal(listing.isError, true);
    assert.match(textOf(listing), /^from: /m);
  });

  it("refuses a wrong or missing API key with 401 and a GET with 405", async () => {
    const initialize = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    };
    const post = (headers: Record<string, string>) =>
      fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body: JSON.stringify(initialize),
      });
    assert.equal((await post({ authorization: "Bearer not-a-key-at-all" })).status, 401);
    assert.equal((await post({})).status, 401);
    assert.equal((await post({ authorization: `Bearer ${KEY_A}` })).status, 200);
    const get = await fetch(`${server.url}/mcp`, { headers: { authorization: `Bearer ${KEY_A}` } });
    assert.equal(get.status, 405);
    await assert.rejects(connect("wrong-key-123456"));
    // Counted under their own route label, like the /v1 routes.
    assert.match(await metrics.render(), /memory_http_requests_total\{[^}]*route="\/mcp"[^}]*status="200"/);
  });
});
