import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { MemoryApiError, MemoryClient } from "../../clients/typescript/src/index.ts";
import { loadConfig } from "../../services/core/config.ts";
import { loadLocomo } from "../../services/core/datasets/locomo.ts";
import type { QueryResult } from "../../services/core/query-types.ts";
import { type OpenedEngine, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { type RunningHttpServer, startHttpServer } from "../../services/platform/http-server.ts";
import { Metrics } from "../../services/platform/metrics.ts";

const MODEL = "models/all-MiniLM-L6-v2/model.onnx";
const SAMPLE = "services/cli/sample-locomo.json";
const KEYS = { "key-of-tenant-a-123": "tenant-a", "key-of-tenant-b-456": "tenant-b" };

describe("HTTP API over the embedded engine (real embedder, real storage, real socket)", {
  skip: existsSync(MODEL) ? false : "model missing: run node scripts/setup.mjs",
}, () => {
  let dir: string;
  let opened: OpenedEngine;
  let server: RunningHttpServer;
  const metrics = new Metrics({ defaultMetrics: false });
  // Happy paths go through the typed client; `call` stays for requests that are wrong on purpose.
  let tenantA: MemoryClient;
  let tenantB: MemoryClient;
  const call = (path: string, key: string | undefined, body?: unknown) =>
    fetch(`${server.url}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
    });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "memory-http-"));
    opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }), { observer: metrics });
    server = await startHttpServer(createHttpApp({ service: opened.engine, apiKeys: KEYS, metrics }), { port: 0 });
    tenantA = new MemoryClient({ baseUrl: server.url, apiKey: "key-of-tenant-a-123" });
    tenantB = new MemoryClient({ baseUrl: server.url, apiKey: "key-of-tenant-b-456" });
  });
  after(async () => {
    await server?.close();
    await opened?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("ingests a batch with one bad turn (207), keeps the valid ones, and answers from them", async () => {
    const [conv] = loadLocomo(SAMPLE);
    assert.ok(conv);
    const turns: unknown[] = [...conv.turns];
    turns.splice(3, 0, { speaker: "Ana", text: "no timestamp here" });
    const res = await call(`/v1/conversations/${conv.id}/turns:batch`, "key-of-tenant-a-123", {
      turns,
      tenant: "tenant-b",
    });
    assert.equal(res.status, 207);
    const body = (await res.json()) as { accepted: number; rejected: { index: number; issues: { path: string }[] }[] };
    assert.equal(body.accepted, conv.turns.length);
    assert.equal(body.rejected[0]?.index, 3);
    assert.equal(body.rejected[0]?.issues[0]?.path, "timestamp");
    assert.deepEqual(await tenantA.flush(conv.id), { flushed: true, conversation: conv.id });
    await opened.engine.drain();

    // The client resolves only on 200 (else it throws a MemoryApiError with the status).
    const result: QueryResult = await tenantA.query({ question: "What is the name of Ben's dog?", budget: 500 });
    assert.ok(result.contextTokens <= 500 && result.contextTokens > 0);
    assert.ok(result.context.includes("Pepper"), result.context);
    assert.ok(result.items.some((i) => i.turnIds.includes("D1:2")));
    assert.ok(result.items.every((i) => i.routes.length > 0));
    assert.ok(result.cost.embeddingCalls >= 1);

    const page = await tenantA.listRecords({ entity: "Pepper", limit: 5 });
    assert.ok(page.records.length > 0 && page.records.every((r) => r.text.includes("Pepper")));
    const one = await tenantA.getRecord(page.records[0]?.id ?? "");
    assert.equal(one.id, page.records[0]?.id);
  });

  it("never shows tenant A's memory to tenant B (the body's tenant field is ignored)", async () => {
    const q = await tenantB.query({ question: "What is the name of Ben's dog?" });
    assert.equal(q.items.length, 0);
    assert.equal((await tenantB.listRecords()).records.length, 0);
    const [id] = (await tenantA.listRecords({ limit: 1 })).records;
    const missing = await tenantB.getRecord(id?.id ?? "").catch((e: unknown) => e);
    assert.ok(missing instanceof MemoryApiError);
    assert.equal(missing.status, 404);
  });

  it("pages records with signed cursors: a forged, altered or other tenant's cursor is 400 naming cursor", async () => {
    const page = await tenantA.listRecords({ limit: 1 });
    assert.ok(page.nextCursor, "more than one record, so a next cursor");
    const next = await tenantA.listRecords({ limit: 1, cursor: page.nextCursor });
    assert.equal(next.records.length, 1);
    const [payload, mac] = page.nextCursor.split(".");
    const altered = `${Buffer.from(JSON.stringify([0, ""])).toString("base64url")}.${mac}`;
    for (const [cursor, key] of [
      ["not-issued-by-us", "key-of-tenant-a-123"],
      [`${payload}.`, "key-of-tenant-a-123"],
      [altered, "key-of-tenant-a-123"],
      [page.nextCursor, "key-of-tenant-b-456"],
    ] as const) {
      const res = await call(`/v1/records?limit=1&cursor=${encodeURIComponent(cursor)}`, key);
      assert.equal(res.status, 400, cursor);
      const body = (await res.json()) as { issues: { path: string }[] };
      assert.deepEqual(
        body.issues.map((i) => i.path),
        ["cursor"],
      );
    }
  });

  it("rejects bad credentials and bad bodies with clear errors", async () => {
    assert.equal((await call("/v1/query", undefined, { question: "x" })).status, 401);
    assert.equal((await call("/v1/query", "wrong-key-000000", { question: "x" })).status, 401);
    const bad = await call("/v1/conversations/c/turns", "key-of-tenant-a-123", {
      speaker: "A",
      timestamp: "2024-01-01T00:00:00Z",
    });
    assert.equal(bad.status, 400);
    assert.match(JSON.stringify(await bad.json()), /"path":"text"/);
    assert.equal((await call("/v1/query", "key-of-tenant-a-123", "{not json")).status, 400);
    const metricsText = await tenantA.metrics();
    assert.match(metricsText, /memory_records_written_total \d+/);
    assert.match(metricsText, /memory_embedding_calls_total \d+/);
    assert.match(metricsText, /memory_segments_closed_total\{reason="/);
  });
});
