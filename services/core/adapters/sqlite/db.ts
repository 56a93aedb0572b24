import { mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";

export type SqliteDatabase = Database.Database;

/** The one database file shared by the graph store, the state store and the HNSW vector store. */
export const SQLITE_FILE = "memory.db";

/**
 * Opens (creating the folder and the file if needed) `<dataDir>/memory.db` with WAL journaling,
 * synchronous=NORMAL and foreign keys on, and makes sure the `migrations` table exists.
 *
 * Ownership: stores built on this handle (`new SqliteGraphStore(db)`, `new SqliteStateStore(db)`,
 * `new HnswVectorStore(db, dataDir)`) never close it; whoever opened it closes it with `db.close()`
 * after closing the stores.
 */
export const openSqlite = (dataDir: string): SqliteDatabase => {
  mkdirSync(dataDir, { recursive: true });
  const db = new Database(join(dataDir, SQLITE_FILE));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
  db.exec(`CREATE TABLE IF NOT EXISTS migrations (
    component TEXT NOT NULL,
    version INTEGER NOT NULL,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL,
    PRIMARY KEY (component, version)
  )`);
  return db;
};

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** Runs after `sql`, in the same transaction: data the schema change needs computed in code. */
  backfill?: (db: SqliteDatabase) => void;
}

/**
 * Applies, in one transaction each, the migrations of a component (e.g. "graph", "state",
 * "vectors") that are newer than its recorded schema version. Returns the schema version.
 */
export const migrate = (db: SqliteDatabase, component: string, migrations: readonly Migration[]): number => {
  const record = db.prepare<[string, number, string, string]>(
    "INSERT INTO migrations (component, version, name, applied_at) VALUES (?, ?, ?, ?)",
  );
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    // IMMEDIATE: a second process opening the same file waits, then sees the migration as applied.
    db.transaction(() => {
      if (schemaVersion(db, component) >= m.version) return;
      db.exec(m.sql);
      m.backfill?.(db);
      record.run(component, m.version, m.name, new Date().toISOString());
    }).immediate();
  }
  return schemaVersion(db, component);
};

/** Schema version of a component (0 when none applied). */
export const schemaVersion = (db: SqliteDatabase, component: string): number =>
  db
    .prepare<[string], { v: number | null }>("SELECT MAX(version) AS v FROM migrations WHERE component = ?")
    .get(component)?.v ?? 0;
