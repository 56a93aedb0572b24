// The TypeScript client (clients/typescript) against the real gateway over the embedded engine (real
// embedder, real storage, real socket): a conversation ingested through the batching helper (split
// into several requests, a bad turn reported by its index in the caller's array), queried, its
// records iterated page by page, one record read with its history, consolidated, then erased.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { MemoryApiError, MemoryClient, type TurnInput } from "../../clients/typescript/src/index.ts";
import { loadConfig } from "../../services/core/config.ts";
import { loadLocomo } from "../../services/core/datasets/locomo.ts";
import { type OpenedEngine, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { type RunningHttpServer, startHttpServer } from "../../services/platform/http-server.ts";
import { Metrics } from "../../services/platform/metrics.ts";

const MODEL = "models/all-MiniLM-L6-v2/model.onnx";
const SAMPLE = "services/cli/sample-locomo.json";
const KEYS = { "client-e2e-key-a-123": "tenant-a", "client-e2e-key-b-456": "tenant-b" };

describe("TypeScript client against the embedded gateway", {
  skip: existsSync(MODEL) ? false : "model missing: run node scripts/setup.mjs",
}, () => {
  let dir: string;
  let opened: OpenedEngine;
  let server: RunningHttpServer;
  let memory: MemoryClient;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "memory-client-e2e-"));
    const metrics = new Metrics({ defaultMetrics: false });
    opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }), { observer: metrics });
    server = await startHttpServer(createHttpApp({ service: opened.engine, apiKeys: KEYS, metrics }), { port: 0 });
    // Ten turns a request, so that the sample's conversation takes several.
    memory = new MemoryClient({ baseUrl: server.url, apiKey: "client-e2e-key-a-123", maxBatchTurns: 10 });
  });
  after(async () => {
    await server?.close();
    await opened?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("ingests, queries, iterates records, reads a history, consolidates and erases", async () => {
    assert.deepEqual(await memory.healthz(), { status: "ok" });
    assert.equal((await memory.readyz()).ready, true);

    const [conv] = loadLocomo(SAMPLE);
    assert.ok(conv);
    const turns: TurnInput[] = [...conv.turns];
    const BAD = 12;
    // Every turn has a turnId (the sample's dia_ids, and this one), so a batch is safe to resend: the
    // client then retries one whose connection was reset (the server drops an idle keep-alive
    // connection when its event loop was busy past the keep-alive timeout with the earlier batches).
    turns.splice(BAD, 0, { turnId: "bad-1", speaker: "Ana", text: "said at no real time", timestamp: "yesterday" });

    const report = await memory.ingest(conv.id, turns);
    assert.equal(report.requests, Math.ceil(turns.length / 10));
    assert.equal(report.accepted, conv.turns.length);
    assert.equal(report.turnIds.length, conv.turns.length);
    assert.deepEqual(
      report.rejected.map((r) => [r.index, r.turnId, r.issues.map((i) => i.path)]),
      [[BAD, "bad-1", ["timestamp"]]],
    );
    assert.deepEqual(await memory.flush(conv.id), { flushed: true, conversation: conv.id });
    await opened.engine.drain();

    const result = await memory.query({ question: "What is the name of Ben's dog?", budget: 500 });
    assert.ok(result.contextTokens > 0 && result.contextTokens <= 500);
    assert.ok(result.context.includes("Pepper"), result.context);
    assert.ok(result.items.some((i) => i.turnIds.includes("D1:2")));

    // Page by page (two records a page) gives what one big page gives, in the same order.
    const iterated: string[] = [];
    let pages = 0;
    for await (const page of memory.recordPages({ conversation: conv.id }, { pageSize: 2 })) {
      pages += 1;
      iterated.push(...page.records.map((r) => r.id));
    }
    const onePage = await memory.listRecords({ conversation: conv.id, limit: 200 });
    assert.equal(onePage.nextCursor, null);
    assert.ok(onePage.records.length > 2, `${onePage.records.length} records`);
    assert.deepEqual(
      iterated,
      onePage.records.map((r) => r.id),
    );
    assert.equal(pages, Math.ceil(iterated.length / 2));
    const viaRecords: string[] = [];
    for await (const r of memory.records({ conversation: conv.id, entity: "Pepper" }, { pageSize: 1 })) {
      assert.ok(r.text.includes("Pepper"), r.text);
      viaRecords.push(r.id);
    }
    assert.ok(viaRecords.length > 0);

    const id = viaRecords[0] ?? "";
    const record = await memory.getRecord(id);
    assert.equal(record.id, id);
    assert.equal(record.source.conversation, conv.id);
    const history = await memory.getRecordHistory(id);
    assert.equal(history.id, id);
    assert.ok(history.versions.some((v) => v.id === id && v.relation === "self"));

    // The explorer's reads: the conversation, and its timeline holding the record under its segment.
    const conversations: string[] = [];
    for await (const c of memory.conversations({ pageSize: 1 })) conversations.push(c.conversation);
    assert.deepEqual(conversations, [conv.id]);
    const timeline = await memory.timeline(conv.id, { limit: 200 });
    assert.equal(timeline.nextCursor, null);
    assert.ok(timeline.segments.length > 0);
    assert.ok(timeline.segments.some((s) => s.records.some((r) => r.id === id)));

    const consolidation = await memory.consolidate();
    assert.deepEqual(consolidation.tenants, ["tenant-a"]);

    // Another tenant's key sees nothing of it: a typed 404.
    const other = new MemoryClient({ baseUrl: server.url, apiKey: "client-e2e-key-b-456" });
    const missing = await other.getRecord(id).catch((e: unknown) => e);
    assert.ok(missing instanceof MemoryApiError);
    assert.equal(missing.code, "not_found");

    const erased = await memory.eraseConversation(conv.id);
    assert.equal(erased.conversation, conv.id);
    assert.ok(erased.records >= iterated.length);
    const left: string[] = [];
    for await (const r of memory.records({ conversation: conv.id })) left.push(r.id);
    assert.deepEqual(left, []);
  });

  it("names the field of a bad argument in a typed error", async () => {
    const err = await memory.listRecords({ cursor: "not-issued-by-us" }).catch((e: unknown) => e);
    assert.ok(err instanceof MemoryApiError);
    assert.equal(err.status, 400);
    assert.equal(err.field, "cursor");
    const confirm = await memory.eraseTenant("tenant-b").catch((e: unknown) => e);
    assert.ok(confirm instanceof MemoryApiError);
    assert.equal(confirm.field, "confirm");
  });
});
