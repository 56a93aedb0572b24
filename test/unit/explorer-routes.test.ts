// The explorer's HTTP routes (services/gateway/explorer-routes.ts) over a real SQLite graph store:
// conversations and timelines of the key's tenant only, bounded pages with a cursor, 400 naming
// the bad parameter, 404 for an unknown conversation, 501 where the runtime has no store to read,
// and the static page under its Content-Security-Policy.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import type { ConversationSummary, Timeline } from "../../services/core/explorer.ts";
import type { BoundaryDecision } from "../../services/core/types.ts";
import { EXPLORER_CSP } from "../../services/gateway/explorer-routes.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { Metrics } from "../../services/platform/metrics.ts";
import { StoreExplorerReader } from "../../services/query/explorer-reader.ts";
import { batchesFor, makeSegment, makeTurn } from "../contract/graph-store.contract.ts";
import { FakeMemoryService } from "../helpers/fake-memory-service.ts";

const KEY_A = "key-for-tenant-a";
const KEY_B = "key-for-tenant-b";
const API_KEYS = { [KEY_A]: "tenant-a", [KEY_B]: "tenant-b" };

interface ErrorBody {
  error: string;
  issues?: { path: string; message: string }[];
}

const decision = (turnId: string, p: number, cut: boolean): BoundaryDecision => ({
  turnId,
  surprise: 0.5,
  z: 1,
  phi: 0.4,
  cohesionDrop: 0.1,
  lengthPressure: -1.3,
  turnPressure: 0.2,
  p,
  cut,
});

describe("explorer routes", () => {
  let dir: string;
  let store: SqliteGraphStore;
  const metrics = new Metrics({ defaultMetrics: false });
  const appWith = (service: FakeMemoryService) => createHttpApp({ service, apiKeys: API_KEYS, metrics });
  let app: ReturnType<typeof createHttpApp>;
  const get = (path: string, key: string | null = KEY_A) =>
    app.request(path, { headers: key ? { authorization: `Bearer ${key}` } : {} });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "explorer-routes-"));
    store = SqliteGraphStore.open(dir);
    for (const b of batchesFor("tenant-a")) await store.writeBatch(b);
    // Tenant A: 25 more one-turn segments in conversation "long", so its timeline takes pages.
    for (let i = 0; i < 25; i++) {
      const at = new Date(Date.UTC(2024, 0, 1, 0, i)).toISOString();
      const seg = {
        ...makeSegment("tenant-a", "long", `long-${String(i).padStart(2, "0")}`, [makeTurn(`l${i}`, `turn ${i}`, at)]),
        decisions: [decision(`l${i}`, i % 5 === 0 ? 0.8 : 0.2, i % 5 === 0)],
      };
      await store.writeBatch({ tenant: "tenant-a", conversation: "long", segment: seg, records: [], eventFrames: [] });
    }
    // Tenant B holds only its own conversation.
    const other = makeSegment("tenant-b", "b-only", "b-seg", [
      makeTurn("x1", "B's secret", "2024-02-01T00:00:00.000Z"),
    ]);
    await store.writeBatch({
      tenant: "tenant-b",
      conversation: "b-only",
      segment: other,
      records: [],
      eventFrames: [],
    });
    const service = Object.assign(new FakeMemoryService(), { explorer: new StoreExplorerReader(store, 0.55) });
    app = appWith(service);
  });
  after(async () => {
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("lists the key's tenant's conversations only", async () => {
    const res = await get("/v1/conversations");
    assert.equal(res.status, 200);
    const body = (await res.json()) as { conversations: ConversationSummary[]; nextCursor: string | null };
    assert.deepEqual(
      body.conversations.map((c) => [c.conversation, c.segments, c.turns]),
      [
        ["c1", 1, 3],
        ["c2", 1, 1],
        ["long", 25, 25],
      ],
    );
    assert.equal(body.nextCursor, null);

    const b = (await (await get("/v1/conversations", KEY_B)).json()) as { conversations: ConversationSummary[] };
    assert.deepEqual(
      b.conversations.map((c) => c.conversation),
      ["b-only"],
    );
  });

  it("pages conversations with a cursor", async () => {
    const first = (await (await get("/v1/conversations?limit=2")).json()) as {
      conversations: ConversationSummary[];
      nextCursor: string;
    };
    assert.deepEqual(
      first.conversations.map((c) => c.conversation),
      ["c1", "c2"],
    );
    assert.ok(first.nextCursor);
    const second = (await (await get(`/v1/conversations?limit=2&cursor=${first.nextCursor}`)).json()) as {
      conversations: ConversationSummary[];
      nextCursor: string | null;
    };
    assert.deepEqual(
      second.conversations.map((c) => c.conversation),
      ["long"],
    );
    assert.equal(second.nextCursor, null);
  });

  it("serves a timeline: segments in time order with turns, decisions, threshold and their records", async () => {
    const res = await get("/v1/conversations/c1/timeline");
    assert.equal(res.status, 200);
    const t = (await res.json()) as Timeline;
    assert.equal(t.conversation, "c1");
    assert.equal(t.threshold, 0.55);
    assert.equal(t.segments.length, 1);
    const [entry] = t.segments;
    assert.deepEqual(
      entry?.segment.turns.map((x) => x.turnId),
      ["t1", "t2", "t3"],
    );
    assert.equal(entry?.records.length, 3);
    assert.ok(entry?.records.every((r) => r.source.segmentId === "seg-1"));

    const pages: string[][] = [];
    let cursor: string | null = null;
    for (let n = 0; n < 10; n++) {
      const page = (await (
        await get(`/v1/conversations/long/timeline?limit=10${cursor ? `&cursor=${cursor}` : ""}`)
      ).json()) as Timeline & { nextCursor: string | null };
      pages.push(page.segments.map((s) => s.segment.id));
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    assert.deepEqual(
      pages.map((p) => p.length),
      [10, 10, 5],
    );
    assert.deepEqual(
      pages.flat(),
      Array.from({ length: 25 }, (_, i) => `long-${String(i).padStart(2, "0")}`),
    );
  });

  it("another key's tenant sees nothing of it (404), and its own conversation is not A's", async () => {
    assert.equal((await get("/v1/conversations/c1/timeline", KEY_B)).status, 404);
    assert.equal((await get("/v1/conversations/b-only/timeline", KEY_A)).status, 404);
    const own = (await (await get("/v1/conversations/b-only/timeline", KEY_B)).json()) as Timeline;
    assert.deepEqual(
      own.segments.map((s) => s.segment.id),
      ["b-seg"],
    );
  });

  it("answers 400 naming the bad parameter", async () => {
    const cases: [string, string][] = [
      ["/v1/conversations?limit=0", "limit"],
      ["/v1/conversations?limit=abc", "limit"],
      ["/v1/conversations?limit=1000", "limit"],
      ["/v1/conversations?cursor=not-a-cursor", "cursor"],
      ["/v1/conversations/long/timeline?limit=-1", "limit"],
      ["/v1/conversations/long/timeline?cursor=eyJ4IjoxfQ", "cursor"],
      [`/v1/conversations/${"x".repeat(300)}/timeline`, "conversation"],
    ];
    for (const [path, field] of cases) {
      const res = await get(path);
      assert.equal(res.status, 400, path);
      const body = (await res.json()) as ErrorBody;
      assert.deepEqual(
        body.issues?.map((i) => i.path),
        [field],
        path,
      );
    }
  });

  it("needs the API key", async () => {
    assert.equal((await get("/v1/conversations", null)).status, 401);
    assert.equal((await get("/v1/conversations/c1/timeline", "wrong")).status, 401);
  });

  it("answers 501 where the runtime has no explorer store", async () => {
    const bare = appWith(new FakeMemoryService());
    const res = await bare.request("/v1/conversations", { headers: { authorization: `Bearer ${KEY_A}` } });
    assert.equal(res.status, 501);
  });

  it("serves the page without a key, under a strict Content-Security-Policy, and no other file", async () => {
    const page = await app.request("/ui/");
    assert.equal(page.status, 200);
    assert.equal(page.headers.get("content-security-policy"), EXPLORER_CSP);
    assert.match(page.headers.get("content-type") ?? "", /^text\/html/);
    const html = await page.text();
    assert.match(html, /<script type="module" src="\/ui\/app\.js"><\/script>/);
    assert.doesNotMatch(
      html,
      /<script>|<script type="module">|\sstyle=|\son[a-z]+=/i,
      "no inline script, style or handler",
    );
    assert.match(EXPLORER_CSP, /script-src 'self'/);
    assert.doesNotMatch(EXPLORER_CSP, /unsafe-inline|unsafe-eval/);
    const js = await app.request("/ui/app.js");
    assert.equal(js.status, 200);
    assert.match(js.headers.get("content-type") ?? "", /^text\/javascript/);
    assert.equal((await app.request("/ui")).status, 308);
    for (const path of ["/ui/../package.json", "/ui/%2e%2e%2fpackage.json", "/ui/secret.js", "/ui/index.html.bak"])
      assert.equal((await app.request(path)).status, 404, path);
  });
});
