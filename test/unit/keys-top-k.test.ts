// The SQLite store's entity / topic lookups read a bounded candidate set tenant-wide (graph-store.ts
// recordsByKeys: the most frequent key walked in said_at order up to k, the other keys read
// whole). These tests compare them with the full read they replace (every match grouped and
// ranked, the pre-migration-10 SQL, then cut at k) on a seeded store: many keys shared by many
// records, said_at ties, aliases, superseded records, as-of reads, conversations, a second tenant.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { GRAPH_MIGRATIONS } from "../../services/core/adapters/sqlite/schema.ts";
import { schemaVersion } from "../../services/core/adapters/sqlite-db.ts";
import type { IndexBatch, ScoredId } from "../../services/core/ports.ts";
import { normaliseKey } from "../../services/core/record-index.ts";
import { seededRandom } from "../../services/core/seeded-random.ts";
import type { Entity } from "../../services/core/types.ts";
import { makeRecord, makeSegment, makeTurn } from "../contract/graph-store.contract.ts";
import { UNDO_MIGRATION_10, UNDO_MIGRATION_11, undoMigration13 } from "../helpers/sqlite-migration-undo.ts";

const ENTITIES: Entity[] = [
  { name: "Caroline", kind: "person", aliases: ["Caro"] },
  { name: "Melanie", kind: "person", aliases: ["Mel"] },
  { name: "Paris", kind: "place", aliases: [] },
  { name: "Oslo", kind: "place", aliases: [] },
  { name: "Acme", kind: "organisation", aliases: ["Acme Corp"] },
  { name: "Jon", kind: "person", aliases: [] },
];
const TOPICS = ["travel", "painting", "work", "family", "food", "music"];
/** Asked keys: names, aliases, other casing, one key no record holds. */
const ENTITY_KEYS = ["Caroline", "caro", "MELANIE", "Mel", "Paris", "oslo", "Acme Corp", "Acme", "Jon", "Nobody"];
const TOPIC_KEYS = [...TOPICS, "TRAVEL", "gardening"];
const CONVERSATIONS = ["c1", "c2", "c3"];
/** Few distinct times: many said_at ties, broken by id. */
const TIMES = Array.from({ length: 12 }, (_, i) => Date.UTC(2023, 0, 1 + i * 7));
const iso = (ms: number) => new Date(ms).toISOString();

const pick = <T>(rand: () => number, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
const some = <T>(rand: () => number, xs: readonly T[], max: number): T[] => {
  const n = Math.floor(rand() * (max + 1));
  return [...new Set(Array.from({ length: n }, () => pick(rand, xs)))];
};
/** The first of xs in ~70% of the records, each other one in ~8%: one frequent key and rare ones, as in a tenant. */
const skewed = <T>(rand: () => number, xs: readonly T[]): T[] => xs.filter((_, i) => rand() < (i === 0 ? 0.7 : 0.08));

/** Writes ~240 records per tenant; supersedes about one in eight. */
const seed = async (store: SqliteGraphStore, tenant: string, rand: () => number): Promise<void> => {
  const ids: string[] = [];
  for (const conversation of CONVERSATIONS) {
    const records = Array.from({ length: 80 }, (_, i) => {
      const saidAt = iso(pick(rand, TIMES));
      return makeRecord(tenant, conversation, `seg-${conversation}`, {
        text: `${tenant} ${conversation} record ${i}`,
        type: "fact",
        entities: skewed(rand, ENTITIES),
        topics: skewed(rand, TOPICS),
        saidAt,
        turnIds: ["t1"],
      });
    });
    const segment = makeSegment(tenant, conversation, `seg-${conversation}`, [
      makeTurn("t1", "one turn", iso(TIMES[0] as number)),
    ]);
    const batch: IndexBatch = { tenant, conversation, segment, records, eventFrames: [] };
    await store.writeBatch(batch);
    ids.push(...records.map((r) => r.id));
  }
  for (const id of ids)
    if (rand() < 0.125) assert.ok(await store.supersede(tenant, id, pick(rand, ids), iso(pick(rand, TIMES) + 1)));
};

/** The full read: every match grouped and ranked (the SQL before migration 10), then the cut. */
const fullRead = (
  store: SqliteGraphStore,
  index: "entity" | "topic",
  tenant: string,
  given: readonly string[],
  k: number,
  conversation?: string,
  validAt?: number,
): ScoredId[] => {
  const keys = [...new Set(given.map(normaliseKey).filter(Boolean))];
  const [table, column, name] =
    index === "entity" ? ["record_entities", "entity", "e.name"] : ["record_topics", "topic", "e.topic"];
  const params: (string | number)[] = [tenant, JSON.stringify(keys)];
  if (conversation !== undefined) params.push(conversation);
  if (validAt !== undefined) params.push(validAt, validAt);
  const rows = store.db
    .prepare(
      `SELECT r.id AS id, COUNT(DISTINCT ${name}) AS score
       FROM ${table} e JOIN records r ON r.tenant = e.tenant AND r.id = e.record_id
       WHERE e.tenant = ? AND e.${column} IN (SELECT value FROM json_each(?))
       ${conversation === undefined ? "" : "AND e.conversation = ?"}
       ${validAt === undefined ? "AND r.superseded_by IS NULL" : "AND r.valid_from <= ? AND (r.valid_to IS NULL OR r.valid_to > ?)"}
       GROUP BY r.id ORDER BY score DESC, MAX(r.said_at) DESC, r.id`,
    )
    .all(...params) as ScoredId[];
  return rows.slice(0, Math.floor(k));
};

describe("SqliteGraphStore entity / topic lookups: bounded read = full read + cut", () => {
  let dir: string;
  let store: SqliteGraphStore;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "keys-top-k-"));
    store = SqliteGraphStore.open(dir);
    const rand = seededRandom(18);
    for (const tenant of ["A", "B"]) await seed(store, tenant, rand);
  });

  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps each record's said_at on its entity and topic rows", () => {
    for (const table of ["record_entities", "record_topics"]) {
      const rows = store.db
        .prepare(
          `SELECT COUNT(*) AS n, SUM(x.said_at = r.said_at) AS same FROM ${table} x
           JOIN records r ON r.tenant = x.tenant AND r.id = x.record_id`,
        )
        .get() as { n: number; same: number };
      assert.ok(rows.n > 500, `${table}: ${rows.n} rows`);
      assert.equal(rows.same, rows.n, table);
    }
  });

  it("returns the full read's first k, in its order, for every scope, moment, key set and k", async () => {
    const rand = seededRandom(1818);
    let compared = 0;
    let nonEmpty = 0;
    let cutShort = 0;
    for (let trial = 0; trial < 400; trial++) {
      const index = trial % 2 === 0 ? "entity" : "topic";
      const keys = some(rand, index === "entity" ? ENTITY_KEYS : TOPIC_KEYS, 4);
      const k = pick(rand, [1, 2, 3, 5, 8, 13, 40, 400]);
      const conversation = rand() < 0.25 ? pick(rand, CONVERSATIONS) : undefined;
      const validAt = rand() < 0.3 ? pick(rand, TIMES) + Math.floor(rand() * 2) : undefined;
      const tenant = rand() < 0.8 ? "A" : "B";
      const find = index === "entity" ? store.recordsByEntities.bind(store) : store.recordsByTopics.bind(store);
      const got = await find(tenant, keys, k, conversation, validAt);
      const expected = fullRead(store, index, tenant, keys, k, conversation, validAt);
      assert.deepEqual(got, expected, JSON.stringify({ index, keys, k, conversation, validAt, tenant }));
      compared++;
      if (expected.length > 0) nonEmpty++;
      if (fullRead(store, index, tenant, keys, 1e9, conversation, validAt).length > k) cutShort++;
    }
    // The comparisons are not vacuous: most find records, many are cut at k.
    assert.equal(compared, 400);
    assert.ok(nonEmpty > 300, `non-empty: ${nonEmpty}`);
    assert.ok(cutShort > 150, `cut at k: ${cutShort}`);
  });

  it("ranks records matching several keys above the most recent single matches", async () => {
    // Two frequent topics: the records holding both come first, however old.
    const both = fullRead(store, "topic", "A", ["travel", "work"], 1e9).filter((h) => h.score === 2);
    assert.ok(both.length > 0);
    const got = await store.recordsByTopics("A", ["travel", "work"], both.length + 1);
    assert.deepEqual(
      got.slice(0, both.length).map((h) => h.id),
      both.map((h) => h.id),
    );
    assert.equal(got[both.length]?.score, 1);
  });

  it("a version-9 store (no said_at on the rows) migrates and reads the same", async () => {
    const migrated = mkdtempSync(join(tmpdir(), "keys-top-k-v9-"));
    try {
      const a = SqliteGraphStore.open(migrated);
      await seed(a, "A", seededRandom(7));
      const read = async (s: SqliteGraphStore) => ({
        entities: await s.recordsByEntities("A", ["Caroline", "Paris", "Mel"], 7),
        topics: await s.recordsByTopics("A", ["travel"], 9),
        asOf: await s.recordsByTopics("A", ["food", "music"], 6, undefined, TIMES[6]),
      });
      const expected = await read(a);
      undoMigration13(a.db);
      a.db.exec(`${UNDO_MIGRATION_11} ${UNDO_MIGRATION_10}
        DELETE FROM migrations WHERE component = 'graph' AND version >= 10;
      `);
      await a.close();
      const b = SqliteGraphStore.open(migrated);
      assert.equal(schemaVersion(b.db, "graph"), GRAPH_MIGRATIONS.length);
      const backfilled = b.db
        .prepare(
          `SELECT COUNT(*) AS n FROM record_entities x JOIN records r ON r.tenant = x.tenant AND r.id = x.record_id
           WHERE x.said_at <> r.said_at`,
        )
        .get() as { n: number };
      assert.equal(backfilled.n, 0);
      const got = await read(b);
      assert.ok(expected.entities.length === 7 && expected.topics.length === 9 && expected.asOf.length > 0);
      assert.deepEqual(got, expected);
      await b.close();
    } finally {
      rmSync(migrated, { recursive: true, force: true });
    }
  });
});
