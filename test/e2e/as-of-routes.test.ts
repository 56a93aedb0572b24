// As-of queries reach superseded versions through every route, not only the dense one (issue 13):
// after consolidation of the scenario (test/helpers/consolidation-scenario.ts), the lexical, entity,
// topic, time and event-frame indexes of the graph store return, for a moment before the change,
// the version valid then (superseded since) and not the later one; without a moment, current
// records only. Then a query as of that moment finds the old version through those routes.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite, type SqliteDatabase } from "../../services/core/adapters/sqlite-db.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { ScoredId } from "../../services/core/ports.ts";
import type { MemoryRecord } from "../../services/core/types.ts";
import { type OpenedEngine, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { OPEN_START } from "../../services/query/question-time.ts";
import { LIFE } from "../helpers/consolidation-scenario.ts";

const MODEL = "models/all-MiniLM-L6-v2/model.onnx";
const TENANT = "alice";
/** Between the two sessions (January 10 and March 12, 2024). */
const FEBRUARY = Date.parse("2024-02-01T00:00:00.000Z");

const ids = (hits: readonly ScoredId[]): string[] => hits.map((h) => h.id);

describe("as-of through every route (embedded runtime, real embedder)", {
  skip: existsSync(MODEL) ? false : "model missing: run node scripts/setup.mjs",
}, () => {
  let dir: string;
  let opened: OpenedEngine;
  let db: SqliteDatabase;
  let graph: SqliteGraphStore;
  let records: MemoryRecord[];
  const find = (re: RegExp): MemoryRecord => {
    const r = records.find((x) => re.test(x.text));
    assert.ok(r, `no record matches ${re}: ${records.map((x) => x.text).join(" | ")}`);
    return r;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "memory-as-of-"));
    opened = await openEmbeddedEngine(
      loadConfig({ dataDir: dir, consolidation: { window: "", idleMinutes: 0, similarityThreshold: 0.8 } }),
    );
    await opened.engine.ingest(TENANT, "life", LIFE);
    await opened.engine.flush(TENANT, "life");
    await opened.engine.drain();
    await opened.engine.consolidate(TENANT);
    records = (await opened.engine.listRecords(TENANT, { limit: 1000, includeSuperseded: true })).records;
    db = openSqlite(dir);
    graph = new SqliteGraphStore(db);
  });
  after(async () => {
    db?.close();
    await opened?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the graph routes read the versions valid at the moment, and current records without one", async () => {
    const boston = find(/lives in Boston/);
    const denver = find(/moved to Denver/);
    assert.equal(boston.valid.supersededBy, denver.id, "the scenario superseded Boston");
    const routes: [string, (validAt?: number) => Promise<ScoredId[]>][] = [
      ["lexical", (at) => graph.searchRecordsLexical(TENANT, "Ana lives Boston Denver", 20, undefined, at)],
      ["entity", (at) => graph.recordsByEntities(TENANT, ["Boston", "Denver"], 20, undefined, at)],
      ["topic", (at) => graph.recordsByTopics(TENANT, [...boston.topics, ...denver.topics], 20, undefined, at)],
      [
        "time",
        (at) =>
          graph.recordsInTime(
            TENANT,
            { from: Date.parse("2024-01-01"), to: Date.parse("2024-04-01") },
            50,
            undefined,
            at,
          ),
      ],
    ];
    if (boston.topics.length === 0) routes.splice(2, 1);
    const validThen = (id: string): boolean => {
      const r = records.find((x) => x.id === id) as MemoryRecord;
      return Date.parse(r.valid.from) <= FEBRUARY && (r.valid.to === undefined || Date.parse(r.valid.to) > FEBRUARY);
    };
    const current = (id: string): boolean => records.find((x) => x.id === id)?.valid.supersededBy === undefined;
    for (const [route, run] of routes) {
      const now = ids(await run());
      const then = ids(await run(FEBRUARY));
      assert.ok(!now.includes(boston.id), `${route}: current records only`);
      assert.ok(now.every(current), `${route}: every record returned is current`);
      assert.ok(then.includes(boston.id), `${route}: as of February the Boston version is found`);
      assert.ok(!then.includes(denver.id), `${route}: the move was not known yet`);
      assert.ok(then.every(validThen), `${route}: every version returned was valid then`);
    }
    // Event frames: the neighbours of a record said with Boston in January include it as of February.
    const frameMates = records.filter((r) => r.source.segmentId === boston.source.segmentId && r.id !== boston.id);
    assert.ok(frameMates.length > 0, "Boston shares its segment with other records");
    const seeds = frameMates.map((r) => r.id);
    const nowFrames = ids(await graph.eventFrameNeighbours(TENANT, seeds, 50));
    const thenFrames = ids(await graph.eventFrameNeighbours(TENANT, seeds, 50, FEBRUARY));
    assert.ok(!nowFrames.includes(boston.id));
    assert.ok(thenFrames.includes(boston.id), "event-frame: as of February the Boston version is found");
    assert.ok(thenFrames.every(validThen));
  });

  it("a query as of the moment finds the old version through the graph routes too", async () => {
    const boston = find(/lives in Boston/);
    const q = await opened.engine.query(TENANT, {
      question: "Did Ana live in Boston?",
      budget: 2000,
      asOf: "2024-02-01T00:00:00.000Z",
    });
    const item = q.items.find((i) => i.id === boston.id);
    assert.ok(item, "the version valid then is in the context");
    const routes = item.routes.map((r) => r.route);
    assert.ok(
      routes.some((r) => r !== "dense"),
      `found by more than the dense route: ${routes.join(", ")}`,
    );
    const current = await opened.engine.query(TENANT, { question: "Did Ana live in Boston?", budget: 2000 });
    assert.ok(!current.items.some((i) => i.id === boston.id), "not current");
  });
  it("a question asked as of a moment reads the versions valid then, without the request's asOf", async () => {
    const boston = find(/lives in Boston/);
    const denver = find(/moved to Denver/);
    const asked = await opened.engine.query(TENANT, {
      question: "Where did Ana live as of February 2024?",
      budget: 2000,
    });
    const item = asked.items.find((i) => i.id === boston.id);
    assert.ok(item, `the version valid in February is in the context: ${asked.context}`);
    assert.ok(
      item.routes.some((r) => r.route === "time"),
      `found by the time route: ${item.routes.map((r) => r.route).join(", ")}`,
    );
    assert.deepEqual(asked.plan.timeWindow, { from: OPEN_START, to: "2024-02-29T23:59:59.999Z" });
    // The current version stays a candidate (a later turn can tell of what was so then).
    assert.ok(
      asked.items.some((i) => i.id === denver.id),
      "the current version is in the context too",
    );
    // Without the moment in the question, current versions only.
    const plain = await opened.engine.query(TENANT, { question: "Where did Ana live?", budget: 2000 });
    assert.ok(!plain.items.some((i) => i.id === boston.id), "not current");
  });
});
