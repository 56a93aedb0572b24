import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
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
    assert.equal((await call(`/v1/conversations/${conv.id}/flush`, "key-of-tenant-a-123", {})).status, 202);
    await opened.engine.drain();

    const q = await call("/v1/query", "key-of-tenant-a-123", {
      question: "What is the name of Ben's dog?",
      budget: 500,
    });
    assert.equal(q.status, 200);
    const result = (await q.json()) as QueryResult;
    assert.ok(result.contextTokens <= 500 && result.contextTokens > 0);
    assert.ok(result.context.includes("Pepper"), result.context);
    assert.ok(result.items.some((i) => i.turnIds.includes("D1:2")));
    assert.ok(result.items.every((i) => i.routes.length > 0));
    assert.ok(result.cost.embeddingCalls >= 1);

    const list = await call("/v1/records?entity=Pepper&limit=5", "key-of-tenant-a-123");
    assert.equal(list.status, 200);
    const page = (await list.json()) as { records: { id: string; text: string }[] };
    assert.ok(page.records.length > 0 && page.records.every((r) => r.text.includes("Pepper")));
    const one = await call(`/v1/records/${page.records[0]?.id}`, "key-of-tenant-a-123");
    assert.equal(one.status, 200);
  });

  it("never shows tenant A's memory to tenant B (the body's tenant field is ignored)", async () => {
    const q = await call("/v1/query", "key-of-tenant-b-456", { question: "What is the name of Ben's dog?" });
    assert.equal(((await q.json()) as QueryResult).items.length, 0);
    const list = await call("/v1/records", "key-of-tenant-b-456");
    assert.equal(((await list.json()) as { records: unknown[] }).records.length, 0);
    const [id] = (
      (await (await call("/v1/records?limit=1", "key-of-tenant-a-123")).json()) as { records: { id: string }[] }
    ).records;
    assert.equal((await call(`/v1/records/${id?.id}`, "key-of-tenant-b-456")).status, 404);
  });

  it("pages records with signed cursors: a forged, altered or other tenant's cursor is 400 naming cursor", async () => {
    const first = await call("/v1/records?limit=1", "key-of-tenant-a-123");
    const page = (await first.json()) as { nextCursor: string | null };
    assert.ok(page.nextCursor, "more than one record, so a next cursor");
    const next = await call(`/v1/records?limit=1&cursor=${encodeURIComponent(page.nextCursor)}`, "key-of-tenant-a-123");
    assert.equal(next.status, 200);
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
    const metricsText = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metricsText, /memory_records_written_total \d+/);
    assert.match(metricsText, /memory_embedding_calls_total \d+/);
    assert.match(metricsText, /memory_segments_closed_total\{reason="/);
  });
});
