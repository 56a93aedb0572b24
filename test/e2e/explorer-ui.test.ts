// The browser memory explorer (/ui) in a real headless Chromium (playwright-core driving the
// system's Chromium: CHROMIUM_PATH, else /usr/bin/chromium; skipped with the reason when there is
// none) over the embedded gateway on 127.0.0.1:0 with the real embedder: ingest the sample
// conversation, type the key, open the conversation's timeline (segments, decisions, records),
// a record's history, a query in the playground (its packed context), a consolidation run, and
// another tenant's empty view. Screenshots go to out/explorer-ui/ (git-ignored).
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type Browser, chromium, type Page } from "playwright-core";
import { loadConfig } from "../../services/core/config.ts";
import { loadLocomo } from "../../services/core/datasets/locomo.ts";
import type { Timeline } from "../../services/core/explorer.ts";
import { type OpenedEngine, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { type RunningHttpServer, startHttpServer } from "../../services/platform/http-server.ts";
import { Metrics } from "../../services/platform/metrics.ts";

const MODEL = "models/all-MiniLM-L6-v2/model.onnx";
const SAMPLE = "services/cli/sample-locomo.json";
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const SHOTS = "out/explorer-ui";
const KEY_A = "key-of-tenant-a-123";
const KEY_B = "key-of-tenant-b-456";
const KEYS = { [KEY_A]: "tenant-a", [KEY_B]: "tenant-b" };
/** Bound on every wait in the page (the query and consolidation run on two shared cores). */
const WAIT_MS = 60_000;

const skip = !existsSync(MODEL)
  ? "model missing: run node scripts/setup.mjs"
  : !existsSync(CHROMIUM)
    ? `no Chromium at ${CHROMIUM}: install Debian's chromium package or set CHROMIUM_PATH`
    : false;

describe("browser memory explorer at /ui (headless Chromium, embedded gateway, real embedder)", {
  skip,
  timeout: 300_000,
}, () => {
  let dir: string;
  let opened: OpenedEngine;
  let server: RunningHttpServer;
  let browser: Browser;
  const metrics = new Metrics({ defaultMetrics: false });
  const [conv] = loadLocomo(SAMPLE);
  /** Console errors and page errors (a CSP violation is reported as a console error). */
  const problems: string[] = [];

  const newPage = async (): Promise<Page> => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(m.text());
    });
    page.on("pageerror", (e) => problems.push(e.message));
    page.on("response", (r) => {
      if (r.status() >= 400) problems.push(`${r.status()} ${r.url()}`);
    });
    return page;
  };
  const typeKey = async (page: Page, key: string) => {
    await page.goto(`${server.url}/ui/`);
    await page.fill("#api-key", key);
    await page.click("#key-save");
  };
  const api = async <T>(path: string, key = KEY_A): Promise<T> => {
    const res = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200, path);
    return (await res.json()) as T;
  };

  before(async () => {
    assert.ok(conv);
    mkdirSync(SHOTS, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), "memory-explorer-"));
    opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }), { observer: metrics });
    server = await startHttpServer(createHttpApp({ service: opened.engine, apiKeys: KEYS, metrics }), {
      host: "127.0.0.1",
      port: 0,
    });
    const ingest = await fetch(`${server.url}/v1/conversations/${conv.id}/turns:batch`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY_A}` },
      body: JSON.stringify({ turns: conv.turns }),
    });
    assert.equal(ingest.status, 202);
    await opened.engine.flush("tenant-a", conv.id);
    await opened.engine.drain();
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
  });
  after(async () => {
    await browser?.close();
    await server?.close();
    await opened?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("shows the conversation's timeline: segments, decisions against the threshold, records; then a record's history", async () => {
    assert.ok(conv);
    const timeline = await api<Timeline>(`/v1/conversations/${conv.id}/timeline?limit=200`);
    const segments = timeline.segments.length;
    const records = timeline.segments.reduce((n, s) => n + s.records.length, 0);
    const decisions = timeline.segments.reduce((n, s) => n + s.segment.decisions.length, 0);
    assert.ok(segments > 1 && records > 0, `${segments} segments, ${records} records`);

    const page = await newPage();
    await typeKey(page, KEY_A);
    // The key stays out of the URL and in this tab's sessionStorage only.
    assert.ok(!page.url().includes(KEY_A));
    assert.equal(await page.evaluate("sessionStorage.getItem('memory-explorer.apiKey')"), KEY_A);
    assert.equal(await page.evaluate("localStorage.length"), 0);

    await page.click(`button.conversation[data-conversation="${conv.id}"]`);
    await page.waitForSelector("section.segment");
    assert.equal(await page.locator("section.segment").count(), segments);
    assert.equal(await page.locator("li.record").count(), records);
    assert.equal(await page.locator("svg.score-chart circle").count(), decisions);
    assert.equal(await page.locator("svg.score-chart line.threshold").count(), 1);
    assert.ok((await page.locator("mark.kept").count()) > 0, "kept tokens are highlighted");
    // Every record shows under the segment that produced it.
    for (const s of timeline.segments)
      for (const r of s.records)
        assert.equal(
          await page
            .locator(`section.segment[data-segment="${s.segment.id}"] li.record[data-record="${r.id}"]`)
            .count(),
          1,
        );
    const firstRecord = timeline.segments.flatMap((s) => s.records)[0];
    assert.ok(firstRecord);
    assert.ok(((await page.textContent("main")) ?? "").includes(firstRecord.text));
    await page.screenshot({ path: `${SHOTS}/timeline.png`, fullPage: true });
    await page.screenshot({ path: `${SHOTS}/timeline-top.png` });

    await page.click(`li.record[data-record="${firstRecord.id}"] button`);
    await page.waitForSelector("table.versions");
    assert.ok(((await page.textContent("table.versions")) ?? "").includes(firstRecord.text));
    await page.screenshot({ path: `${SHOTS}/history.png` });
    await page.context().close();
  });

  it("runs a query in the playground: plan, route hits, fused order, the packed context and its token bar", async () => {
    const page = await newPage();
    await typeKey(page, KEY_A);
    await page.click('button[data-view="query"]');
    await page.fill("#q-question", "What is the name of Ben's dog?");
    await page.fill("#q-budget", "500");
    await page.click("#q-run");
    await page.waitForSelector("#query-context");
    const context = (await page.textContent("#query-context")) ?? "";
    assert.ok(context.includes("Pepper"), context);
    const tokens = Number(await page.getAttribute("#token-progress", "value"));
    assert.equal(Number(await page.getAttribute("#token-progress", "max")), 500);
    assert.ok(tokens > 0 && tokens <= 500, String(tokens));
    // The embedded runtime answers `explain`: every route's hit list and the whole fused order.
    const routes = await page.locator("section.route").count();
    assert.ok(routes >= 4, `${routes} routes shown`);
    assert.ok((await page.locator("ol.fused li").count()) >= (await page.locator("ol.fused li.packed").count()));
    assert.ok((await page.locator("ol.fused li.packed").count()) > 0);
    await page.screenshot({ path: `${SHOTS}/query.png`, fullPage: true });
    await page.context().close();
  });

  it("runs a consolidation from the page and shows its report", async () => {
    const page = await newPage();
    await typeKey(page, KEY_A);
    await page.click('button[data-view="consolidation"]');
    await page.click("#consolidate");
    await page.waitForSelector("li.run dl.report");
    assert.match((await page.textContent("li.run")) ?? "", /examined/);
    await page.screenshot({ path: `${SHOTS}/consolidation.png` });
    await page.context().close();
  });

  it("shows another key's tenant none of it", async () => {
    assert.ok(conv);
    const page = await newPage();
    await typeKey(page, KEY_B);
    await page.waitForSelector("ul.conversation-list li");
    assert.equal(await page.locator("button.conversation").count(), 0);
    assert.ok(!((await page.textContent("main")) ?? "").includes(conv.id));
    await page.context().close();
  });

  it("ran without console errors or Content-Security-Policy violations", () => {
    assert.deepEqual(problems, []);
  });
});
