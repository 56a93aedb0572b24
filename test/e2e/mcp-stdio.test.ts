import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { testProcessEnv } from "../../scripts/test-env.mjs";
import type { QueryResult } from "../../services/core/query-types.ts";

const MODEL = "models/all-MiniLM-L6-v2/model.onnx";

const textOf = (r: CallToolResult): string => r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

const TURNS = [
  { speaker: "Ana", text: "Hi Ben, did you settle in after the move?", timestamp: "2024-05-06T10:15:00Z" },
  {
    speaker: "Ben",
    text: "Yes! I moved to Lisbon last month and I adopted a dog called Pepper from the shelter.",
    timestamp: "2024-05-06T10:16:00Z",
  },
  { speaker: "Ana", text: "Pepper is a lovely name. What breed is she?", timestamp: "2024-05-06T10:17:00Z" },
  { speaker: "Ben", text: "She is a beagle, two years old, and loves the beach.", timestamp: "2024-05-06T10:18:00Z" },
];

describe("`memory mcp` over stdio (the SDK's client spawns the CLI; embedded engine, real embedder)", {
  skip: existsSync(MODEL) ? false : "model missing: run node scripts/setup.mjs",
}, () => {
  let dir: string;
  let client: Client;
  let stderr = "";

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "memory-mcp-stdio-"));
    const env = Object.fromEntries(
      Object.entries(testProcessEnv(process.env)).filter((e): e is [string, string] => e[1] !== undefined),
    );
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ["--import", "tsx", "services/cli/main.ts", "--data-dir", dir, "mcp"],
      env: { ...env, MEMORY_MCP_TENANT: "agent-tenant" },
      stderr: "pipe",
    });
    transport.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    client = new Client({ name: "mcp-stdio-test", version: "1.0.0" });
    await client.connect(transport);
  });
  after(async () => {
    await client?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = async (name: string, args: Record<string, unknown>): Promise<CallToolResult> =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;

  it("serves the tools, remembers turns and recalls them with sources", { timeout: 180_000 }, async () => {
    const { tools } = await client.listTools();
    assert.equal(tools.length, 7);
    assert.match(stderr, /serving tenant "agent-tenant" over stdio/);

    const stored = await call("remember", { conversation: "trip", turns: TURNS, endOfSession: true });
    assert.equal(stored.isError, undefined, textOf(stored));
    assert.equal((stored.structuredContent as { accepted: number }).accepted, TURNS.length);

    // The engine indexes in the background; over stdio the only view of it is the tools, so wait
    // (bounded) until the records of the flushed segment are listed.
    const deadline = Date.now() + 120_000;
    let records = 0;
    while (records === 0) {
      assert.ok(Date.now() < deadline, `no records indexed within 120 s; server stderr:\n${stderr}`);
      const page = await call("list_memories", { conversation: "trip" });
      records = (page.structuredContent as { records: unknown[] }).records.length;
      if (records === 0) await new Promise((r) => setTimeout(r, 250));
    }

    const recalled = await call("recall", { question: "What is the name of Ben's dog?", conversation: "trip" });
    assert.equal(recalled.isError, undefined, textOf(recalled));
    assert.ok(textOf(recalled).includes("Pepper"), textOf(recalled));
    assert.ok((recalled.structuredContent as unknown as QueryResult).items.length > 0);
  });

  it("answers a bad argument with a tool error naming the field", async () => {
    const bad = await call("recall", { question: "where?", asOf: "last Tuesday" });
    assert.equal(bad.isError, true);
    assert.match(textOf(bad), /asOf/);
    const forget = await call("forget", { conversation: "trip", confirm: "trip " });
    assert.equal(forget.isError, true);
    assert.match(textOf(forget), /^confirm: must equal the conversation id$/m);
  });
});
