import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { scopeMatch } from "../../services/core/adapters/sqlite/fts-scope.ts";
import { openSqlite, type SqliteDatabase } from "../../services/core/adapters/sqlite-db.ts";
import { loadConfig } from "../../services/core/config.ts";
import { turnRowId } from "../../services/core/ids.ts";
import type { TurnInput } from "../../services/core/requests.ts";
import type { MemoryRecord } from "../../services/core/types.ts";
import type { EmbeddedEngine } from "../../services/embedded/engine.ts";
import { type OpenedEngine, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { Metrics } from "../../services/platform/metrics.ts";
import { LIFE, TRAVEL } from "../helpers/consolidation-scenario.ts";
import { carries } from "../helpers/evidence.ts";

const MODEL = "models/all-MiniLM-L6-v2/model.onnx";

const config = (dataDir: string) =>
  loadConfig({
    dataDir,
    consolidation: { window: "", idleMinutes: 0, similarityThreshold: 0.8, concurrency: 2 },
  });

const ingest = async (engine: EmbeddedEngine, tenant: string, conversation: string, turns: TurnInput[]) => {
  await engine.ingest(tenant, conversation, turns);
  await engine.flush(tenant, conversation);
  await engine.drain();
};

const allRecords = async (engine: EmbeddedEngine, tenant: string): Promise<MemoryRecord[]> =>
  (await engine.listRecords(tenant, { limit: 1000, includeSuperseded: true })).records;

/** Everything consolidation may change, in a comparable form. */
const dump = async (engine: EmbeddedEngine, db: SqliteDatabase, tenant: string) => ({
  records: (await allRecords(engine, tenant))
    .map((r) => ({ id: r.id, text: r.text, valid: r.valid, mergedSources: r.mergedSources ?? [] }))
    .sort((a, b) => (a.id < b.id ? -1 : 1)),
  relations: db
    .prepare("SELECT from_id, to_id, relation, at FROM record_relations WHERE tenant = ? ORDER BY 1, 2, 3")
    .all(tenant),
  candidates: db
    .prepare("SELECT record_id, candidate_id, status, decision FROM update_candidates WHERE tenant = ? ORDER BY 1, 2")
    .all(tenant),
});

const find = (records: MemoryRecord[], re: RegExp): MemoryRecord => {
  const r = records.find((x) => re.test(x.text));
  assert.ok(r, `no record matches ${re}: ${records.map((x) => x.text).join(" | ")}`);
  return r;
};

describe("sleep-time consolidation through the embedded engine (real embedder)", {
  skip: existsSync(MODEL) ? false : "model missing: run node scripts/setup.mjs",
}, () => {
  const dirs: string[] = [];
  const opened: OpenedEngine[] = [];
  const dbs: SqliteDatabase[] = [];
  const open = async () => {
    const dir = mkdtempSync(join(tmpdir(), "memory-consolidation-"));
    dirs.push(dir);
    const o = await openEmbeddedEngine(config(dir));
    opened.push(o);
    const db = openSqlite(dir);
    dbs.push(db);
    return { engine: o.engine, db, dir };
  };
  let main: Awaited<ReturnType<typeof open>>;
  let referenceDump: Awaited<ReturnType<typeof dump>>;

  before(async () => {
    main = await open();
    await ingest(main.engine, "alice", "life", LIFE);
    await ingest(main.engine, "alice", "travel", TRAVEL);
    await ingest(main.engine, "bob", "life", LIFE);
  });
  after(async () => {
    for (const db of dbs) db.close();
    for (const o of opened) await o.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("the indexer queued update candidates; nothing changed before consolidation", async () => {
    const pending = main.db
      .prepare("SELECT COUNT(*) AS n FROM update_candidates WHERE tenant = 'alice' AND status = 'pending'")
      .get() as { n: number };
    assert.ok(pending.n > 0);
    assert.ok((await allRecords(main.engine, "alice")).every((r) => r.valid.to === undefined));
  });

  it("consolidates: moved city, changed job, reversed preference superseded; duplicates merged; trips kept", async () => {
    const before = await allRecords(main.engine, "alice");
    const report = await main.engine.consolidate("alice");
    assert.deepEqual(report.tenants, ["alice"]);
    assert.equal(report.decider, "rules");
    assert.deepEqual(report.cost, { llmCalls: 0, inputTokens: 0, outputTokens: 0 });
    assert.ok(report.examined > 0 && report.ms >= 0);
    const records = await allRecords(main.engine, "alice");
    assert.equal(records.length, before.length, "nothing is deleted");
    const byId = new Map(records.map((r) => [r.id, r]));

    const boston = find(records, /lives in Boston/);
    const denver = find(records, /moved to Denver/);
    assert.equal(boston.valid.supersededBy, denver.id);
    assert.equal(boston.valid.to, denver.valid.from);
    assert.equal(denver.valid.to, undefined);

    const google = find(records, /works at Google/);
    const microsoft = find(records, /Microsoft/);
    assert.equal(google.valid.supersededBy, microsoft.id);
    assert.equal(microsoft.valid.to, undefined);

    const loves = find(records, /loves sushi/);
    const over = find(records, /like sushi anymore/);
    assert.equal(loves.valid.supersededBy, over.id);
    assert.equal(over.valid.to, undefined);

    // Near duplicate (favourite/favorite) and a repeat in another conversation: merged into the first.
    const bands = records.filter((r) => /band is Coldplay/.test(r.text));
    assert.equal(bands.length, 3);
    const canonical = bands.find((r) => r.valid.to === undefined);
    assert.ok(canonical && /favourite/.test(canonical.text), "the oldest statement is the canonical one");
    assert.deepEqual(
      (canonical.mergedSources ?? []).map((s) => s.conversation).sort(),
      ["life", "travel"],
      "the newer duplicates' sources are recorded on it",
    );
    for (const b of bands) if (b !== canonical) assert.equal(b.valid.supersededBy, canonical.id);

    // Exact duplicate said again two months later.
    const cleo = records.filter((r) => /Cleo is a nurse in Lisbon/.test(r.text));
    assert.equal(cleo.length, 2);
    assert.equal(cleo.filter((r) => r.valid.to === undefined).length, 1);

    // Two different trips are not merged: both current.
    const tokyo = find(records, /trip to Tokyo/);
    const kyoto = find(records, /train to Kyoto/);
    assert.equal(byId.get(tokyo.id)?.valid.to, undefined);
    assert.equal(byId.get(kyoto.id)?.valid.to, undefined);

    // Bob's copy of the same conversation is another tenant: untouched until his own run.
    assert.ok((await allRecords(main.engine, "bob")).every((r) => r.valid.to === undefined));

    // Edges: SUPERSEDES from the newer record, DUPLICATE_OF to the canonical one.
    const edges = main.db
      .prepare("SELECT from_id, to_id, relation FROM record_relations WHERE tenant = 'alice'")
      .all() as { from_id: string; to_id: string; relation: string }[];
    assert.ok(edges.some((e) => e.from_id === denver.id && e.to_id === boston.id && e.relation === "SUPERSEDES"));
    assert.ok(edges.some((e) => e.to_id === canonical.id && e.relation === "DUPLICATE_OF"));
    referenceDump = await dump(main.engine, main.db, "alice");
  });

  it("is idempotent: a second run finds nothing to do and changes nothing", async () => {
    const again = await main.engine.consolidate("alice");
    assert.equal(again.examined, 0);
    assert.equal(again.merged + again.superseded + again.linked, 0);
    assert.deepEqual(await dump(main.engine, main.db, "alice"), referenceDump);
    assert.ok(referenceDump.candidates.every((c) => (c as { status: string }).status === "done"));
  });

  it("queries prefer current versions; as-of queries return the version valid then", async () => {
    const boston = find(await allRecords(main.engine, "alice"), /lives in Boston/);
    const denver = find(await allRecords(main.engine, "alice"), /moved to Denver/);
    // Evidence is matched as the record or its raw turn (test/helpers/evidence.ts).
    const items = async (asOf?: string) =>
      (
        await main.engine.query("alice", {
          question: "Where does Ana live?",
          budget: 2000,
          ...(asOf ? { asOf } : {}),
        })
      ).items;
    const now = await items();
    assert.ok(carries(now, denver));
    assert.ok(!now.some((i) => i.id === boston.id), "the superseded version is not current");
    const then = await items("2024-02-01T00:00:00.000Z");
    assert.ok(carries(then, boston), "as of February, Ana lived in Boston");
    assert.ok(!carries(then, denver), "the move was not known yet");
  });

  it("returns a record's version history, also over HTTP", async () => {
    const boston = find(await allRecords(main.engine, "alice"), /lives in Boston/);
    const history = await main.engine.history("alice", boston.id);
    assert.ok(history);
    assert.deepEqual(
      history.versions.map((v) => [v.relation, v.current]),
      [
        ["self", false],
        ["later", true],
      ],
    );
    assert.equal(history.current, boston.valid.supersededBy);
    assert.equal(history.versions[0]?.validTo, boston.valid.to);
    assert.equal(await main.engine.history("bob", boston.id), undefined, "another tenant's record is unknown");

    const app = createHttpApp({
      service: main.engine,
      apiKeys: { "key-of-alice-1234": "alice", "key-of-bob-12345": "bob" },
      metrics: new Metrics({ defaultMetrics: false }),
    });
    const get = (path: string, key: string, method = "GET") =>
      app.request(path, { method, headers: { authorization: `Bearer ${key}` } });
    const res = await get(`/v1/records/${boston.id}/history`, "key-of-alice-1234");
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { current: string }).current, boston.valid.supersededBy);
    assert.equal((await get("/v1/records/nope/history", "key-of-alice-1234")).status, 404);
    const consolidated = await get("/v1/consolidate", "key-of-bob-12345", "POST");
    assert.equal(consolidated.status, 200);
    const bobReport = (await consolidated.json()) as { tenants: string[]; superseded: number };
    assert.deepEqual(bobReport.tenants, ["bob"]);
    assert.equal(bobReport.superseded, 3);
    assert.equal((await get("/v1/tenant?confirm=alice", "key-of-bob-12345", "DELETE")).status, 400);
  });

  it("a crash in the middle leaves whole decisions only; a rerun ends where an uninterrupted run does", async () => {
    const other = await open();
    await ingest(other.engine, "alice", "life", LIFE);
    await ingest(other.engine, "alice", "travel", TRAVEL);
    await assert.rejects(
      other.engine.consolidate("alice", {
        beforeCommit: (n) => {
          if (n === 3) throw new Error("injected crash");
        },
      }),
      /injected crash/,
    );
    // No partial state: every superseded record has its edge, every edge its superseded record.
    const partial = await allRecords(other.engine, "alice");
    const edges = other.db
      .prepare("SELECT from_id, to_id, relation FROM record_relations WHERE tenant = 'alice' AND relation <> 'REFINES'")
      .all() as { from_id: string; to_id: string; relation: string }[];
    const superseded = partial.filter((r) => r.valid.supersededBy !== undefined);
    assert.equal(edges.length, superseded.length);
    for (const r of superseded) {
      assert.ok(edges.some((e) => e.to_id === r.id || e.from_id === r.id));
    }
    const done = other.db
      .prepare(
        "SELECT COUNT(DISTINCT record_id) AS n FROM update_candidates WHERE tenant = 'alice' AND status = 'done'",
      )
      .get() as { n: number };
    assert.equal(done.n, 3, "three decisions committed, the fourth rolled back");

    const resumed = await other.engine.consolidate("alice");
    assert.ok(resumed.examined > 0);
    assert.deepEqual(await dump(other.engine, other.db, "alice"), referenceDump);
  });

  it("the off-peak scheduler runs on its own once ingest has been idle (injected clock)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memory-consolidation-"));
    dirs.push(dir);
    let now = Date.parse("2024-06-01T12:00:00.000Z");
    const o = await openEmbeddedEngine(
      loadConfig({ dataDir: dir, consolidation: { window: "01:00-05:00", idleMinutes: 10 } }),
      { settings: { clock: () => now } },
    );
    opened.push(o);
    await ingest(o.engine, "carol", "life", LIFE);
    const scheduler = o.engine.consolidationScheduler;
    assert.ok(scheduler?.enabled);
    assert.equal(await scheduler.tick(), undefined, "busy hours, ingest just happened");
    now += 11 * 60_000;
    assert.equal(await scheduler.tick(), "idle");
    assert.equal(o.engine.lastConsolidation?.trigger, "idle");
    assert.ok((o.engine.lastConsolidation?.superseded ?? 0) >= 3);
    now = Date.parse("2024-06-02T02:00:00.000Z");
    assert.equal(await scheduler.tick(), undefined, "in the window, but nothing is pending");
  });

  /** Rows left of a tenant (or one of its conversations) in every table of the data folder. */
  const leftovers = (db: SqliteDatabase, tenant: string, conversation?: string, ids: string[] = []): string[] => {
    const out: string[] = [];
    const tables = (
      db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]
    )
      .map((t) => t.name)
      .filter((n) => !/^sqlite_|_fts_(data|idx|content|docsize|config)$/.test(n));
    const checked = new Set<string>();
    const idList = JSON.stringify(ids);
    for (const table of tables) {
      const cols = new Set((db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name));
      const count = (where: string, ...params: string[]): number =>
        (db.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`).get(...params) as { n: number }).n;
      let n = 0;
      if (cols.has("tenant") && conversation === undefined) {
        n = count("tenant = ?", tenant);
        checked.add(table);
      } else if (cols.has("tenant") && conversation !== undefined) {
        if (cols.has("conversation")) n += count("tenant = ? AND conversation = ?", tenant, conversation);
        for (const c of ["record_id", "candidate_id", "from_id", "to_id", "id"]) {
          if (cols.has(c)) n += count(`tenant = ? AND ${c} IN (SELECT value FROM json_each(?))`, tenant, idList);
        }
        if (cols.has("key")) n += count("tenant = ? AND key = ?", tenant, `${tenant}/${conversation}`);
        checked.add(table);
      } else if (table === "records_fts" || table === "turns_fts") {
        // No content kept (migration 13): a row is found by its tenant's or conversation's scope token.
        n = count(`${table} MATCH ?`, scopeMatch(tenant, conversation));
        checked.add(table);
      } else if (table === "stage_state") {
        n =
          conversation === undefined
            ? count("key LIKE ?", `${tenant}/%`)
            : count("key = ?", `${tenant}/${conversation}`);
        checked.add(table);
      } else if (["migrations", "runtime_cursor", "runtime_attempts", "inbox_done", "vector_meta"].includes(table)) {
        // No tenant data in these (runtime_attempts: seq numbers of work in flight; inbox_done: seq
        // numbers of entries processed ahead of the cursor).
        checked.add(table);
      }
      if (n > 0) out.push(`${table}: ${n}`);
    }
    const unchecked = tables.filter((t) => !checked.has(t));
    assert.deepEqual(unchecked, [], "every table is checked");
    return out;
  };

  it("erases one conversation from every store, leaving the other conversation and tenant intact", async () => {
    const vectorsOf = (tenant: string, conversation?: string) =>
      (
        main.db
          .prepare(`SELECT COUNT(*) AS n FROM vectors WHERE tenant = ?${conversation ? " AND conversation = ?" : ""}`)
          .get(...(conversation ? [tenant, conversation] : [tenant])) as { n: number }
      ).n;
    const travelIds = (
      main.db.prepare("SELECT id FROM records WHERE tenant = 'alice' AND conversation = 'travel'").all() as {
        id: string;
      }[]
    ).map((r) => r.id);
    const turnIds = TRAVEL.map((t) => turnRowId("travel", t.turnId ?? ""));
    assert.ok(travelIds.length > 0 && vectorsOf("alice", "travel") > 0);
    const lifeBefore = await main.engine.listRecords("alice", {
      conversation: "life",
      limit: 1000,
      includeSuperseded: true,
    });
    const lifeVectors = vectorsOf("alice", "life");
    const bobBefore = await dump(main.engine, main.db, "bob");
    const bobVectors = vectorsOf("bob");

    const report = await main.engine.erase("alice", "travel");
    assert.equal(report.records, travelIds.length);
    assert.equal(report.turns, TRAVEL.length);
    assert.ok(report.vectors >= travelIds.length + TRAVEL.length);
    assert.deepEqual(leftovers(main.db, "alice", "travel", [...travelIds, ...turnIds]), []);
    assert.equal(vectorsOf("alice", "travel"), 0);
    assert.equal(vectorsOf("alice", "life"), lifeVectors);
    const lifeAfter = await main.engine.listRecords("alice", {
      conversation: "life",
      limit: 1000,
      includeSuperseded: true,
    });
    assert.equal(lifeAfter.records.length, lifeBefore.records.length);
    const canonical = lifeAfter.records.find((r) => /favourite band/.test(r.text));
    assert.deepEqual(
      canonical?.mergedSources?.map((s) => s.conversation),
      ["life"],
      "the erased conversation's source is gone from the canonical record",
    );
    assert.deepEqual(await dump(main.engine, main.db, "bob"), bobBefore);
    assert.equal(vectorsOf("bob"), bobVectors);
    const q = await main.engine.query("alice", { question: "Which hotel did Ana book in Kyoto?" });
    assert.ok(q.items.every((i) => i.conversation !== "travel"));
  });

  it("erases a whole tenant (confirmed), leaving the other tenant intact", async () => {
    const aliceBefore = await dump(main.engine, main.db, "alice");
    const app = createHttpApp({
      service: main.engine,
      apiKeys: { "key-of-bob-12345": "bob" },
      metrics: new Metrics({ defaultMetrics: false }),
    });
    const del = (path: string) =>
      app.request(path, { method: "DELETE", headers: { authorization: "Bearer key-of-bob-12345" } });
    assert.equal((await del("/v1/tenant")).status, 400, "no confirmation, nothing erased");
    assert.ok((await allRecords(main.engine, "bob")).length > 0);
    const res = await del("/v1/tenant?confirm=bob");
    assert.equal(res.status, 200);
    const report = (await res.json()) as { records: number; vectors: number };
    assert.ok(report.records > 0 && report.vectors > 0);
    assert.deepEqual(leftovers(main.db, "bob"), []);
    assert.equal(
      (main.db.prepare("SELECT COUNT(*) AS n FROM vectors WHERE tenant = 'bob'").get() as { n: number }).n,
      0,
    );
    const search = await main.engine.query("bob", { question: "Where does Ana live?" });
    assert.equal(search.items.length, 0);
    assert.deepEqual(await dump(main.engine, main.db, "alice"), aliceBefore);
    // The tenant can start over.
    await ingest(main.engine, "bob", "life", LIFE.slice(0, 2));
    assert.ok((await allRecords(main.engine, "bob")).length > 0);
  });
});
