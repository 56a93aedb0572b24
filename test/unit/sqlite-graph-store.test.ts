// What only the SQLite graph store has: pragmas and schema version, persistence across reopen, the
// non-port supersede / candidate listings. The GraphStore contract runs from
// test/contract/sqlite-graph-store.test.ts.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { eraseConversation } from "../../services/consolidator/erasure.ts";
import {
  ftsTermsText,
  scopedMatch,
  scopeMatch,
  tenantTermsQuery,
} from "../../services/core/adapters/sqlite/fts-scope.ts";
import { SqliteGraphStore, validIdsSql, validity } from "../../services/core/adapters/sqlite/graph-store.ts";
import { GRAPH_MIGRATIONS } from "../../services/core/adapters/sqlite/schema.ts";
import {
  openSqlite,
  SQLITE_WAL_AUTOCHECKPOINT_PAGES,
  type SqliteDatabase,
  schemaVersion,
} from "../../services/core/adapters/sqlite-db.ts";
import { SQLITE_DEFAULTS } from "../../services/core/config.ts";
import { recordId } from "../../services/core/ids.ts";
import { lexicalTerms } from "../../services/core/lexical.ts";
import { VOCABULARY_SCAN_LIMIT } from "../../services/core/text/fuzzy-terms.ts";
import { batchesFor, makeRecord, makeSegment, makeTurn } from "../contract/graph-store.contract.ts";
import {
  UNDO_MIGRATION_7,
  UNDO_MIGRATION_9,
  UNDO_MIGRATION_10,
  UNDO_MIGRATION_11,
  UNDO_MIGRATION_12,
  undoMigration13,
} from "../helpers/sqlite-migration-undo.ts";

const R1 = (t: string) => recordId(t, "Caroline moved to Paris in May 2023.");
const R3 = (t: string) => recordId(t, "Caroline prefers tea over coffee.");
const R4 = (t: string) => recordId(t, "Melanie plans a trip to Paris from 2023-07-01 to 2023-07-14.");

describe("SqliteGraphStore (SQLite only)", () => {
  let dir: string;
  let db: SqliteDatabase;
  let store: SqliteGraphStore;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "graph-store-"));
    db = openSqlite(dir);
    store = new SqliteGraphStore(db);
    for (const b of batchesFor("A")) await store.writeBatch(b);
  });

  after(async () => {
    await store.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("opens with WAL, foreign keys and the latest schema version", () => {
    assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
    assert.equal(db.pragma("foreign_keys", { simple: true }), 1);
    // Sized for stores of GBs (sqlite-db.ts): a 64 MiB page cache, reads through a memory map, a
    // checkpoint every 10,000 WAL pages.
    assert.equal(db.pragma("cache_size", { simple: true }), -SQLITE_DEFAULTS.pageCacheMiB * 1024);
    assert.equal(db.pragma("mmap_size", { simple: true }), SQLITE_DEFAULTS.mmapMiB * 1024 * 1024);
    assert.equal(db.pragma("wal_autocheckpoint", { simple: true }), SQLITE_WAL_AUTOCHECKPOINT_PAGES);
    assert.equal(schemaVersion(db, "graph"), GRAPH_MIGRATIONS.length);
  });

  it("takes its page cache and memory map from the configuration (MEMORY_SQLITE_CACHE_MIB / _MMAP_MIB)", () => {
    const other = mkdtempSync(join(tmpdir(), "graph-store-memory-"));
    const small = openSqlite(other, { pageCacheMiB: 8, mmapMiB: 0 });
    try {
      assert.equal(small.pragma("cache_size", { simple: true }), -8 * 1024);
      assert.equal(small.pragma("mmap_size", { simple: true }), 0);
    } finally {
      small.close();
      rmSync(other, { recursive: true, force: true });
    }
  });

  it("supersede marks a record of the tenant, and a replay keeps it", async () => {
    const seg = makeSegment("A", "c9", "seg-9", [
      makeTurn("t1", "Old news about the moon.", "2023-01-01T00:00:00.000Z"),
    ]);
    const rec = makeRecord("A", "c9", "seg-9", {
      text: "Old news about the moon.",
      type: "fact",
      entities: ["Moon"],
      topics: ["space"],
      saidAt: "2023-01-01T00:00:00.000Z",
      turnIds: ["t1"],
    });
    const batch = { tenant: "A", conversation: "c9", segment: seg, records: [rec], eventFrames: [] };
    await store.writeBatch(batch);
    assert.equal(await store.supersede("A", rec.id, "newer-id", "2023-02-01T00:00:00.000Z"), true);
    assert.equal(await store.supersede("B", rec.id, "newer-id"), false);
    await store.writeBatch(batch);
    const [got] = await store.getRecords("A", [rec.id]);
    assert.deepEqual(got?.valid, {
      from: "2023-01-01T00:00:00.000Z",
      to: "2023-02-01T00:00:00.000Z",
      supersededBy: "newer-id",
    });
  });

  it("lists candidates with their status (tools)", async () => {
    const c = {
      tenant: "A",
      recordId: R1("A"),
      candidateId: R4("A"),
      similarity: 0.8,
      sharedEntities: ["Paris"],
      sharedTopics: ["travel"],
      reason: "similarity" as const,
    };
    await store.putUpdateCandidates([c, { ...c, candidateId: R3("A") }]);
    await store.putUpdateCandidates([c]);
    assert.equal((await store.listUpdateCandidates("A")).length, 2);
    assert.deepEqual(await store.listUpdateCandidates("B"), []);
    assert.deepEqual(
      (await store.listCandidateStatus("A")).map((s) => s.status),
      ["pending", "pending"],
    );
  });
});

/** Every statement the store prepares from now on, as its SQL text. */
const recordPrepared = (s: SqliteGraphStore): Set<string> => {
  const prepared = new Set<string>();
  const prepare = s.db.prepare.bind(s.db);
  s.db.prepare = ((sql: string) => {
    prepared.add(sql);
    return prepare(sql);
  }) as typeof s.db.prepare;
  return prepared;
};

/** The steps of a statement's query plan (its parameters bound to NULL). */
const queryPlan = (s: SqliteGraphStore, sql: string): string[] => {
  const params = Array((sql.match(/\?/g) ?? []).length).fill(null);
  return (s.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]).map((r) => r.detail);
};

describe("SqliteGraphStore kept counts and erasure", () => {
  it("an erased conversation leaves no term of its own and no score bound derived from it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-erase-"));
    try {
      const store = SqliteGraphStore.open(dir);
      for (const b of batchesFor("A")) await store.writeBatch(b);
      const terms = () =>
        new Map(
          store.db
            .prepare("SELECT kind, term, max_tf AS maxTf FROM lexical_terms WHERE tenant = 'A'")
            .all()
            .map((r) => {
              const row = r as { kind: string; term: string; maxTf: number | null };
              return [`${row.kind} ${row.term}`, row.maxTf];
            }),
        );
      const before = terms();
      assert.ok([...before.values()].every((v) => v !== null));
      await eraseConversation(store, "A", "c2");
      const after = terms();
      assert.ok(after.size > 0 && after.size < before.size, `${before.size} → ${after.size}`);
      // A term c2 shared with c1 keeps its count but no bound (c2's items had a say in it).
      assert.ok(
        [...after.values()].some((v) => v === null),
        "some term of c2 is also in c1",
      );
      assert.ok(
        [...after.values()].some((v) => v !== null),
        "c1's other terms keep their bounds",
      );
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /**
   * Each full-text row's rowid and each stored-terms row, side by side, and whether FTS5 finds every
   * stored-terms row by its conversation's scope token and all its terms under its tenant's prefix
   * (the FTS5 tables keep no content since migration 13: the index is all there is to read).
   */
  type TermsRow = { seq: number; tenant: string; conversation: string; lex: string };
  const fullTextRows = (s: SqliteGraphStore) =>
    (["records", "turns"] as const).map((kind) => {
      const terms = s.db
        .prepare<[], TermsRow>(`SELECT seq, tenant, conversation, lex FROM ${kind}_terms ORDER BY seq`)
        .all();
      const finds = s.db.prepare<[string, number], { seq: number }>(
        `SELECT rowid AS seq FROM ${kind}_fts WHERE ${kind}_fts MATCH ? AND rowid = ?`,
      );
      return {
        fts: s.db
          .prepare<[], { seq: number }>(`SELECT rowid AS seq FROM ${kind}_fts ORDER BY rowid`)
          .all()
          .map((r) => r.seq),
        terms,
        indexed: terms.every((t) => {
          const all = [...new Set(t.lex.split(" ").filter(Boolean))];
          const match =
            all.length === 0
              ? scopeMatch(t.tenant, t.conversation)
              : `${scopeMatch(t.tenant, t.conversation)} AND lex : (${tenantTermsQuery(t.tenant, all, true)})`;
          return finds.all(match, t.seq).length === 1;
        }),
      };
    });

  it("keeps the stored terms (migration 11) row for row with the full-text rows through writes and deletes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-terms-"));
    try {
      const s = SqliteGraphStore.open(dir);
      // The FTS5 row indexes the stored terms under the tenant's prefix (migration 13).
      const same = (when: string) => {
        for (const { fts, terms, indexed } of fullTextRows(s)) {
          assert.deepEqual(
            terms.map((t) => t.seq),
            fts,
            when,
          );
          assert.ok(indexed, when);
        }
      };
      for (const t of ["A", "B"]) for (const b of batchesFor(t)) await s.writeBatch(b);
      assert.ok(fullTextRows(s).every((k) => k.fts.length > 0));
      same("after the writes");
      for (const b of batchesFor("A")) await s.writeBatch(b);
      same("after a replay");
      await s.transact("A", {}, () => ({ writes: { deleteRecords: [R3("A")] }, result: undefined }));
      same("after a record deleted");
      await eraseConversation(s, "A", "c2");
      same("after a conversation erased");
      await s.deleteRawTurns("B", "c1");
      same("after a conversation's raw turns deleted");
      await s.deleteTenant("B");
      same("after a tenant deleted");
      assert.ok(
        fullTextRows(s).every((k) => k.fts.length > 0),
        "tenant A's c1 is left",
      );
      await s.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("migrates a version-10 store (no stored-terms tables): the backfill equals the rows the writes keep, reads the same", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-v10-"));
    try {
      const a = SqliteGraphStore.open(dir);
      for (const t of ["A", "B"]) for (const b of batchesFor(t)) await a.writeBatch(b);
      const questions = ["Caroline painting Paris tea", "coffee plans trip sunrise", "Melanie Paris"];
      const read = async (s: SqliteGraphStore) => {
        const out: unknown[] = [];
        for (const conversation of [undefined, "c1", "c2"])
          for (const q of questions) {
            out.push(await s.searchRecordsLexical("A", q, 5, conversation));
            out.push(await s.searchTurnsLexical("A", q, 5, conversation));
          }
        return out;
      };
      const expected = await read(a);
      assert.ok(expected.some((hits) => (hits as unknown[]).length > 0));
      const written = fullTextRows(a);
      undoMigration13(a.db);
      a.db.exec(`${UNDO_MIGRATION_11} DELETE FROM migrations WHERE component = 'graph' AND version >= 11;`);
      await a.close();
      const b = SqliteGraphStore.open(dir);
      assert.equal(schemaVersion(b.db, "graph"), GRAPH_MIGRATIONS.length);
      assert.deepEqual(fullTextRows(b), written);
      assert.deepEqual(await read(b), expected);
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("indexes a term once per tenant: a tenant's match reads no other tenant's full-text rows (migration 13)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-tenant-terms-"));
    try {
      const s = SqliteGraphStore.open(dir);
      // Names with separators, and one that is the other's prefix: the prefixes are hashes.
      const tenants = ["acme", "acme/eu", "B"];
      for (const t of tenants) for (const b of batchesFor(t)) await s.writeBatch(b);
      for (const kind of ["records", "turns"] as const) {
        // The matched rows' tenants from their stored-terms rows (the FTS5 rows keep no columns).
        const rowsOf = (tenant: string, term: string) =>
          s.db
            .prepare(
              `SELECT s.tenant FROM ${kind}_fts f JOIN ${kind}_terms s ON s.seq = f.rowid WHERE ${kind}_fts MATCH ?`,
            )
            .all(scopedMatch([term], tenant)) as { tenant: string }[];
        // The index's own term list (fts5vocab): no term shared by the tenants, one list each.
        s.db.exec(`CREATE VIRTUAL TABLE temp.vocab_${kind} USING fts5vocab(main, ${kind}_fts, 'row')`);
        const listed = (term: string) =>
          (s.db.prepare(`SELECT doc FROM temp.vocab_${kind} WHERE term = ?`).get(term) as { doc: number } | undefined)
            ?.doc ?? 0;
        assert.equal(listed("pari"), 0, `${kind}: no list across tenants`);
        for (const t of tenants) {
          const rows = rowsOf(t, "pari");
          assert.ok(rows.length > 0, `${kind}: ${t} holds "pari"`);
          assert.deepEqual(new Set(rows.map((r) => r.tenant)), new Set([t]), `${kind}: ${t}'s list is its own`);
          assert.equal(listed(ftsTermsText(t, "pari")), rows.length, `${kind}: ${t}'s list holds its rows only`);
        }
        // The conversation scope narrows the tenant's list.
        const c1 = s.db
          .prepare(
            `SELECT DISTINCT s.tenant, s.conversation FROM ${kind}_fts f JOIN ${kind}_terms s ON s.seq = f.rowid WHERE ${kind}_fts MATCH ?`,
          )
          .all(scopedMatch(["pari", "tea", "sunris"], "acme/eu", "c1"));
        assert.deepEqual(c1, [{ tenant: "acme/eu", conversation: "c1" }]);
      }
      // Every tenant finds its own records for the same question, none of another's.
      for (const t of tenants) {
        const own = new Set((await s.listRecords(t, { limit: 100 })).records.map((r) => r.id));
        const hits = await s.searchRecordsLexical(t, "Caroline Paris tea", 10);
        assert.ok(hits.length > 0 && hits.every((h) => own.has(h.id)), t);
      }
      await s.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("migrates a version-12 store (terms indexed across tenants): the rebuilt full-text rows equal the writes', reads the same", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-v12-"));
    try {
      const a = SqliteGraphStore.open(dir);
      for (const t of ["A", "B"]) for (const b of batchesFor(t)) await a.writeBatch(b);
      const read = async (s: SqliteGraphStore) => {
        const out: unknown[] = [];
        for (const conversation of [undefined, "c1", "c2"])
          for (const q of ["Caroline painting Paris tea", "coffee plans trip sunrise", "Melanie Paris"]) {
            out.push(await s.searchRecordsLexical("A", q, 5, conversation));
            out.push(await s.searchTurnsLexical("A", q, 5, conversation));
          }
        // A misspelling's correction is checked in the scope by a MATCH (vocabulary.ts).
        out.push(await s.lexicalNeighbours("A", "carolyne", 2));
        return out;
      };
      const expected = await read(a);
      assert.ok(expected.some((hits) => Array.isArray(hits) && hits.length > 0));
      const written = fullTextRows(a);
      undoMigration13(a.db);
      a.db.exec(`DELETE FROM migrations WHERE component = 'graph' AND version >= 13;`);
      for (const kind of ["records", "turns"] as const)
        assert.deepEqual(
          a.db.prepare(`SELECT rowid AS seq, tenant, conversation, lex FROM ${kind}_fts ORDER BY rowid`).all(),
          a.db.prepare(`SELECT seq, tenant, conversation, lex FROM ${kind}_terms ORDER BY seq`).all(),
          "version 12 indexed (and kept) the stored terms as they are",
        );
      await a.close();
      const b = SqliteGraphStore.open(dir);
      assert.equal(schemaVersion(b.db, "graph"), GRAPH_MIGRATIONS.length);
      assert.deepEqual(fullTextRows(b), written);
      assert.deepEqual(await read(b), expected);
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("answers which record ids are valid from the records_validity index, after migrating a version-11 store", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-v11-"));
    try {
      const a = SqliteGraphStore.open(dir);
      for (const t of ["A", "B"]) for (const b of batchesFor(t)) await a.writeBatch(b);
      const ids = JSON.stringify([R1("A"), R3("A"), R4("A"), R1("B"), "no-such-record"]);
      const validIds = (s: SqliteGraphStore, validAt?: number): string[] => {
        const v = validity(validAt);
        const rows = s.db.prepare(validIdsSql(v.sql)).all(ids, "A", ...v.params) as { id: string }[];
        return rows.map((r) => r.id).sort();
      };
      const plan = (s: SqliteGraphStore, validAt?: number): string => {
        const v = validity(validAt);
        const rows = s.db.prepare(`EXPLAIN QUERY PLAN ${validIdsSql(v.sql)}`).all(ids, "A", ...v.params) as {
          detail: string;
        }[];
        return rows.map((r) => r.detail).join("; ");
      };
      const later = Date.parse("2030-01-01T00:00:00Z");
      const expected = {
        current: validIds(a),
        asOf: validIds(a, later),
        entities: await a.recordsByEntities("A", ["Caroline", "Melanie"], 5, "c1"),
      };
      // The tenant's own records only, never B's, and every one of the three (none is superseded).
      assert.deepEqual(expected.current, [R1("A"), R3("A"), R4("A")].sort());
      undoMigration13(a.db);
      a.db.exec(`${UNDO_MIGRATION_12} DELETE FROM migrations WHERE component = 'graph' AND version >= 12;`);
      assert.throws(() => plan(a), /no such index: records_validity/);
      await a.close();
      const b = SqliteGraphStore.open(dir);
      assert.equal(schemaVersion(b.db, "graph"), GRAPH_MIGRATIONS.length);
      // Index pages only: the table rows (text, JSON) are not read.
      assert.match(plan(b), /COVERING INDEX records_validity/);
      assert.match(plan(b, later), /COVERING INDEX records_validity/);
      assert.deepEqual(
        {
          current: validIds(b),
          asOf: validIds(b, later),
          entities: await b.recordsByEntities("A", ["Caroline", "Melanie"], 5, "c1"),
        },
        expected,
      );
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("reads records through records_validity by id only: the entity and topic reads start from their key rows", async () => {
    // The index leads with (tenant, id): a planner that could scan a tenant's records in id order
    // through it (no table rows to read) took that for a GROUP BY r.id, reading every record of
    // the tenant for a conversation-scoped topic lookup (issue 18: 10 → 27 ms per query at 100K).
    const dir = mkdtempSync(join(tmpdir(), "graph-store-plans-"));
    try {
      const s = SqliteGraphStore.open(dir);
      for (const t of ["A", "B"]) for (const b of batchesFor(t)) await s.writeBatch(b);
      const prepared = recordPrepared(s);
      const later = Date.parse("2030-01-01T00:00:00Z");
      for (const conversation of [undefined, "c1"])
        for (const validAt of [undefined, later]) {
          assert.ok(
            (await s.recordsByEntities("A", ["Caroline", "Melanie", "Paris"], 5, conversation, validAt)).length > 0,
          );
          assert.ok(
            (await s.recordsByTopics("A", ["travel", "painting", "moving"], 5, conversation, validAt)).length > 0,
          );
        }
      const plans = [...prepared].filter((sql) => /\brecords r\b/.test(sql)).map((sql) => queryPlan(s, sql));
      assert.ok(plans.length >= 4, `${plans.length} statements joined records`);
      for (const plan of plans)
        assert.ok(!plan.some((step) => /records_validity \(tenant=\?\)/.test(step)), plan.join("; "));
      await s.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("walks a tenant's entity and topic key lists from their indexes alone (migration 14)", async () => {
    // The walk (keys-walk.ts) pages through each key's list with the row's name; before the name was
    // in record_entities_entity, every row read its table row as well.
    const dir = mkdtempSync(join(tmpdir(), "graph-store-walk-"));
    try {
      const s = SqliteGraphStore.open(dir);
      for (const t of ["A", "B"]) for (const b of batchesFor(t)) await s.writeBatch(b);
      const prepared = recordPrepared(s);
      assert.ok((await s.recordsByEntities("A", ["Caroline", "Melanie", "Paris"], 2)).length > 0);
      assert.ok((await s.recordsByTopics("A", ["travel", "painting", "moving"], 2)).length > 0);
      const walks = [...prepared].filter((sql) => /AS saidAt FROM record_(entities|topics) e/.test(sql));
      assert.ok(walks.length >= 2, `${walks.length} walk statements`);
      for (const sql of walks) {
        const plan = queryPlan(s, sql);
        assert.ok(
          plan.some((step) => /COVERING INDEX record_(entities_entity|topics_topic)/.test(step)),
          plan.join("; "),
        );
      }
      await s.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("keeps a tenant's superseded ids for the key walks only while nothing changes, on this connection or another", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-superseded-"));
    try {
      const s = SqliteGraphStore.open(dir);
      const other = SqliteGraphStore.open(dir);
      for (const t of ["A", "B"]) for (const b of batchesFor(t)) await s.writeBatch(b);
      const keys = ["Caroline", "Melanie", "Paris"];
      const walk = async (tenant = "A", validAt?: number) =>
        (await s.recordsByEntities(tenant, keys, 10, undefined, validAt)).map((h) => h.id);
      const [first, second] = await walk();
      assert.ok(first !== undefined && second !== undefined);
      const by = (await s.listRecords("A", { limit: 100 })).records.find((r) => r.id !== first && r.id !== second);
      assert.ok(by);
      // Superseded on this connection: the next walk leaves it out.
      assert.equal(await s.supersede("A", first, by.id, "2030-01-01T00:00:00.000Z"), true);
      assert.ok(!(await walk()).includes(first));
      // Superseded through another connection (another process, in production): the same.
      assert.equal(await other.supersede("A", second, by.id, "2030-01-02T00:00:00.000Z"), true);
      const after = await walk();
      assert.ok(!after.includes(first) && !after.includes(second), after.join());
      // As of a moment before, both are valid (the as-of check reads the index, not the memo).
      const asOf = await walk("A", Date.parse("2029-12-31T00:00:00.000Z"));
      assert.ok(asOf.includes(first) && asOf.includes(second), asOf.join());
      // Another tenant's walk is its own: its copies of the records stay current.
      assert.ok((await walk("B")).length >= 2);
      await other.close();
      await s.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("proposes a tenant's own terms for a misspelling, however many terms other tenants hold", async () => {
    // Candidates come from the tenant's kept terms: read from the whole store's term list (FTS5's,
    // every tenant's), a bucket's first VOCABULARY_SCAN_LIMIT terms could all be another tenant's.
    const dir = mkdtempSync(join(tmpdir(), "graph-store-vocab-"));
    try {
      const s = SqliteGraphStore.open(dir);
      // Another tenant's words that sort before "carolin" in the first letter's bucket ("c").
      const letters = "bcdfghklmnp";
      const words: string[] = [];
      for (let i = 0; words.length <= VOCABULARY_SCAN_LIMIT; i++)
        words.push(
          `cab${[...i.toString(letters.length).padStart(4, "0")].map((d) => letters[Number.parseInt(d, letters.length)]).join("")}`,
        );
      const terms = new Set(lexicalTerms(words.join(" ")));
      assert.ok(
        terms.size > VOCABULARY_SCAN_LIMIT && [...terms].every((t) => t < "carolin"),
        "the other tenant fills the bucket",
      );
      await s.writeTurns("B", "c1", [makeTurn("t1", words.join(" "), "2024-01-01T00:00:00.000Z")]);
      await s.writeTurns("A", "c1", [makeTurn("t1", "Caroline went to Seattle.", "2024-01-02T00:00:00.000Z")]);
      assert.deepEqual(await s.lexicalNeighbours("A", "carolyn", 1), [{ term: "carolin", distance: 1 }]);
      assert.deepEqual(await s.lexicalNeighbours("A", "carolyn", 1, "c1"), [{ term: "carolin", distance: 1 }]);
      assert.deepEqual(await s.lexicalNeighbours("B", "carolyn", 1), []);
      await s.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("SqliteGraphStore persistence", () => {
  it("keeps everything across close and reopen", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-"));
    try {
      const a = SqliteGraphStore.open(dir);
      for (const b of batchesFor("A")) await a.writeBatch(b);
      await a.putDeadLetter({ stage: "x", key: "A/c", error: "e", payload: "p", at: "2024-01-01T00:00:00.000Z" });
      const expected = {
        list: await a.listRecords("A", { limit: 10 }),
        lex: await a.searchRecordsLexical("A", "Caroline Paris", 5),
        turns: await a.searchTurnsLexical("A", "tea coffee", 5),
        ents: await a.recordsByEntities("A", ["Caroline"], 5),
        frames: await a.eventFrameNeighbours("A", [R1("A")], 5),
      };
      await a.close();
      assert.equal(a.db.open, false);
      const b = SqliteGraphStore.open(dir);
      assert.deepEqual(await b.listRecords("A", { limit: 10 }), expected.list);
      assert.deepEqual(await b.searchRecordsLexical("A", "Caroline Paris", 5), expected.lex);
      assert.deepEqual(await b.searchTurnsLexical("A", "tea coffee", 5), expected.turns);
      assert.deepEqual(await b.recordsByEntities("A", ["Caroline"], 5), expected.ents);
      assert.deepEqual(await b.eventFrameNeighbours("A", [R1("A")], 5), expected.frames);
      assert.equal(await b.countSegments("A"), 2);
      assert.equal((await b.listDeadLetters(5)).length, 1);
      assert.equal(schemaVersion(b.db, "graph"), GRAPH_MIGRATIONS.length);
      await b.close();
      await assert.rejects(b.countRecords("A"), /closed/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("migrates a version-6 store (no conversation on index rows, unscoped FTS) and reads the same", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-v6-"));
    try {
      const a = SqliteGraphStore.open(dir);
      for (const t of ["A", "B"]) for (const b of batchesFor(t)) await a.writeBatch(b);
      const read = async (s: SqliteGraphStore) => ({
        entities: await s.knownEntities("A"),
        entitiesC1: await s.knownEntities("A", "c1"),
        topics: await s.knownTopics("A"),
        topicsC2: await s.knownTopics("A", "c2"),
        byEntityC1: await s.recordsByEntities("A", ["Caroline", "Melanie"], 10, "c1"),
        byTopicC2: await s.recordsByTopics("A", ["travel", "Paris"], 10, "c2"),
        lex: await s.searchRecordsLexical("A", "Caroline painting Paris tea", 5),
        lexC2: await s.searchRecordsLexical("A", "Caroline painting Paris trip", 5, "c2"),
        turnsC1: await s.searchTurnsLexical("A", "tea coffee sunrise Paris", 5, "c1"),
      });
      const expected = await read(a);
      // Back to what version 6 wrote.
      undoMigration13(a.db);
      a.db.exec(`
        ${UNDO_MIGRATION_11} ${UNDO_MIGRATION_10}
        ${UNDO_MIGRATION_9}
        ${UNDO_MIGRATION_7}
        CREATE VIRTUAL TABLE r6 USING fts5(lex, tenant UNINDEXED, conversation UNINDEXED, tokenize = 'unicode61 remove_diacritics 0');
        CREATE VIRTUAL TABLE t6 USING fts5(lex, tenant UNINDEXED, conversation UNINDEXED, tokenize = 'unicode61 remove_diacritics 0');
        INSERT INTO r6 (rowid, lex, tenant, conversation) SELECT rowid, lex, tenant, conversation FROM records_fts;
        INSERT INTO t6 (rowid, lex, tenant, conversation) SELECT rowid, lex, tenant, conversation FROM turns_fts;
        DROP TABLE records_fts;
        DROP TABLE turns_fts;
        ALTER TABLE r6 RENAME TO records_fts;
        ALTER TABLE t6 RENAME TO turns_fts;
        DELETE FROM migrations WHERE component = 'graph' AND version >= 7;
      `);
      await a.close();
      const b = SqliteGraphStore.open(dir);
      assert.equal(schemaVersion(b.db, "graph"), GRAPH_MIGRATIONS.length);
      const got = await read(b);
      assert.ok(expected.entitiesC1.length > 0 && expected.byEntityC1.length > 0 && expected.lexC2.length > 0);
      assert.ok(expected.turnsC1.length > 0 && expected.topicsC2.length > 0);
      assert.deepEqual(got, expected);
      // The backfilled rows keep their conversation: nothing of c2 in a c1 lookup.
      const c1 = new Set((await b.listRecords("A", { limit: 100, conversation: "c1" })).records.map((r) => r.id));
      assert.ok(got.byEntityC1.every((h) => c1.has(h.id)));
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("migrates a version-8 store (no kept counts): the backfill equals the counts kept by the writes, reads the same", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-v8-"));
    try {
      const a = SqliteGraphStore.open(dir);
      for (const t of ["A", "B"]) for (const b of batchesFor(t, t === "B")) await a.writeBatch(b);
      assert.equal(await a.supersede("A", R3("A"), R1("A"), "2023-06-01T00:00:00.000Z"), true);
      const questions = ["Caroline painting Paris tea", "coffee plans trip sunrise", "Melanie Paris"];
      const read = async (s: SqliteGraphStore) => {
        const out: unknown[] = [];
        for (const conversation of [undefined, "c1", "c2"]) {
          for (const q of questions) {
            out.push(await s.searchRecordsLexical("A", q, 5, conversation));
            out.push(await s.searchTurnsLexical("A", q, 5, conversation));
          }
          for (const key of ["Caroline", "Caro", "Paris", "Melanie"])
            out.push(await s.countRecordsByKey("A", "entity", key, 10, conversation));
          for (const key of ["travel", "moving", "painting", "tea"])
            out.push(await s.countRecordsByKey("A", "topic", key, 10, conversation));
        }
        return out;
      };
      const kept = (s: SqliteGraphStore) =>
        ["lexical_terms", "lexical_scopes", "key_counts"].map((t) =>
          s.db.prepare(`SELECT * FROM ${t} ORDER BY 1, 2, 3, 4`).all(),
        );
      const expected = await read(a);
      const keptByWrites = kept(a);
      assert.ok((keptByWrites[0] as unknown[]).length > 0 && (keptByWrites[2] as unknown[]).length > 0);
      // Back to what version 8 wrote.
      undoMigration13(a.db);
      a.db.exec(
        `${UNDO_MIGRATION_11} ${UNDO_MIGRATION_10} ${UNDO_MIGRATION_9} DELETE FROM migrations WHERE component = 'graph' AND version >= 9;`,
      );
      await a.close();
      const b = SqliteGraphStore.open(dir);
      assert.equal(schemaVersion(b.db, "graph"), GRAPH_MIGRATIONS.length);
      assert.deepEqual(kept(b), keptByWrites);
      assert.deepEqual(await read(b), expected);
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("migrates a version-2 store (FTS over raw text) to the shared lexical terms", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-v2-"));
    try {
      const a = SqliteGraphStore.open(dir);
      for (const b of batchesFor("A")) await a.writeBatch(b);
      const expected = {
        lex: await a.searchRecordsLexical("A", "Caroline painting Paris", 5),
        turns: await a.searchTurnsLexical("A", "tea coffee sunrise", 5),
      };
      // Back to what version 2 wrote: no term counts, FTS5 (porter) over the raw text, no
      // conversation on the entity and topic rows (version 7).
      undoMigration13(a.db);
      a.db.exec(`
        ${UNDO_MIGRATION_11} ${UNDO_MIGRATION_10}
        ${UNDO_MIGRATION_9}
        ${UNDO_MIGRATION_7}
        DROP INDEX records_lex_scope;
        DROP INDEX turns_lex_scope;
        ALTER TABLE records DROP COLUMN lex_len;
        ALTER TABLE turns DROP COLUMN lex_len;
        DROP TABLE records_fts;
        DROP TABLE turns_fts;
        CREATE VIRTUAL TABLE records_fts USING fts5(text, tenant UNINDEXED, conversation UNINDEXED, tokenize = 'porter unicode61');
        CREATE VIRTUAL TABLE turns_fts USING fts5(text, tenant UNINDEXED, conversation UNINDEXED, tokenize = 'porter unicode61');
        INSERT INTO records_fts (rowid, text, tenant, conversation) SELECT seq, text, tenant, conversation FROM records;
        INSERT INTO turns_fts (rowid, text, tenant, conversation) SELECT seq, text, tenant, conversation FROM turns;
        DELETE FROM migrations WHERE component = 'graph' AND version >= 3;
      `);
      await a.close();
      const b = SqliteGraphStore.open(dir);
      assert.equal(schemaVersion(b.db, "graph"), GRAPH_MIGRATIONS.length);
      assert.ok(expected.lex.length > 0 && expected.turns.length > 0);
      assert.deepEqual(await b.searchRecordsLexical("A", "Caroline painting Paris", 5), expected.lex);
      assert.deepEqual(await b.searchTurnsLexical("A", "tea coffee sunrise", 5), expected.turns);
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
