// The GraphStore contract against SQLite (the reference implementation), on a fresh memory.db.
// What only SQLite has (pragmas, schema version, persistence, migrations) is in
// test/unit/sqlite-graph-store.test.ts.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { scopeMatch } from "../../services/core/adapters/sqlite/fts-scope.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite, type SqliteDatabase } from "../../services/core/adapters/sqlite-db.ts";
import { runGraphStoreContract } from "./graph-store.contract.ts";

/** Every table keyed by tenant; the FTS5 tables (no content, migration 13) below, by the tenant's scope token. */
const TABLES = [
  "records",
  "record_entities",
  "record_topics",
  "record_days",
  "event_frames",
  "segments",
  "turns",
  "records_terms",
  "turns_terms",
  "update_candidates",
  "record_relations",
  "dead_letters",
  "lexical_terms",
  "lexical_scopes",
  "key_counts",
];

const tableCounts = (db: SqliteDatabase, tenant: string): Record<string, number> =>
  Object.fromEntries([
    ...TABLES.map((t) => [
      t,
      (db.prepare(`SELECT COUNT(*) AS n FROM ${t} WHERE tenant = ?`).get(tenant) as { n: number }).n,
    ]),
    ...["records_fts", "turns_fts"].map((t) => [
      t,
      (db.prepare(`SELECT COUNT(*) AS n FROM ${t} WHERE ${t} MATCH ?`).get(scopeMatch(tenant)) as { n: number }).n,
    ]),
  ]);

runGraphStoreContract("SqliteGraphStore", async () => {
  const dir = mkdtempSync(join(tmpdir(), "graph-store-"));
  const db = openSqlite(dir);
  const store = new SqliteGraphStore(db);
  return {
    store,
    counts: async (tenant) => tableCounts(db, tenant),
    cleanup: async () => {
      await store.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
