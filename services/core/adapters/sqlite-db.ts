/**
 * SQLite plumbing shared by the adapters that keep their rows in the one `memory.db` (the sqlite
 * graph and state stores, the HNSW vector store's metadata): opening, migrations, WAL truncation.
 * It sits beside the adapter folders, not inside one, so that no adapter imports another.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { SQLITE_DEFAULTS } from "../config.ts";

export type SqliteDatabase = Database.Database;

/** The one database file shared by the graph store, the state store and the HNSW vector store. */
export const SQLITE_FILE = "memory.db";

/** Page cache and memory map of a connection (config.cache.sqlitePageCacheMiB / sqliteMmapMiB). */
export interface SqliteMemory {
  pageCacheMiB: number;
  mmapMiB: number;
}

/** WAL pages after which a commit checkpoints (SQLite's default: 1,000). */
export const SQLITE_WAL_AUTOCHECKPOINT_PAGES = 10_000;

/**
 * Opens (creating the folder and the file if needed) `<dataDir>/memory.db` with WAL journaling,
 * synchronous=NORMAL, foreign keys on and secure_delete on, and makes sure the `migrations` table
 * exists.
 *
 * secure_delete: SQLite overwrites deleted content with zeros (freed cells inside a page, freed
 * pages), so an erased row's text does not linger in the file's free space. It is a per-connection
 * setting, hence here, where every connection of the runtime is opened. A file written before it was
 * on may still hold deleted content in free space: it is vacuumed once (recorded as "storage" v1).
 *
 * Page cache and checkpoints (issue 18; docs/benchmarks.md "Write rate at 100K"): SQLite's
 * defaults, a ~2 MiB page cache and a checkpoint every 1,000 WAL pages, are sized for small files.
 * Writes to a store of GBs land on random leaves of the (tenant, id) and key indexes, so each
 * segment's transactions dirty many distinct pages: the WAL reached 1,000 pages every few commits
 * (one commit in ten took > 5 ms, most of the commit time), and each checkpoint (two fsyncs with
 * synchronous=NORMAL, and a copy of every page, also of those rewritten many times since the last
 * checkpoint) stalled the commit that ran it. With 10,000 pages a hot page is copied once per
 * checkpoint instead of once per 1,000 pages, and the fsyncs are a tenth as many; the WAL file
 * grows to about 40 MiB instead of 4 (truncateWal still empties it after an erasure). The 64 MiB
 * cache keeps the indexes' upper levels and hot leaves in memory across transactions. Neither
 * changes what is stored or read, nor when a commit is durable.
 *
 * Memory-mapped reads (issue 18; docs/benchmarks.md "Query cost at 100K", third pass): a query
 * reads rows scattered over the whole file (a vector read of 200 ids touches ~200 pages), which the
 * page cache cannot hold at 100K records (1.7 GB); each miss was a pread and a copy into the cache.
 * Through the map a page already in the OS's file cache is read in place. Writes still go through
 * write() (SQLite writes through the map only when built to), and the WAL is not mapped. The pages
 * read count in the process's RSS as file-backed pages (shared with the OS file cache and
 * reclaimable, not heap); a file larger than the map is read past it as before.
 *
 * Ownership: stores built on this handle (`new SqliteGraphStore(db)`, `new SqliteStateStore(db)`,
 * `new HnswVectorStore(db, dataDir)`) never close it; whoever opened it closes it with `db.close()`
 * after closing the stores.
 */
export const openSqlite = (dataDir: string, memory: SqliteMemory = SQLITE_DEFAULTS): SqliteDatabase => {
  mkdirSync(dataDir, { recursive: true });
  const db = new Database(join(dataDir, SQLITE_FILE));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
  // cache_size takes KiB as a negative number; mmap_size takes bytes (SQLite caps it at 0x7fff0000).
  db.pragma(`cache_size = -${memory.pageCacheMiB * 1024}`);
  db.pragma(`mmap_size = ${Math.min(memory.mmapMiB * 1024 * 1024, 0x7fff_0000)}`);
  db.pragma(`wal_autocheckpoint = ${SQLITE_WAL_AUTOCHECKPOINT_PAGES}`);
  db.exec(`CREATE TABLE IF NOT EXISTS migrations (
    component TEXT NOT NULL,
    version INTEGER NOT NULL,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL,
    PRIMARY KEY (component, version)
  )`);
  db.pragma("secure_delete = ON");
  wipeOldFreeSpace(db);
  return db;
};

/** The one-time VACUUM of a file written before secure_delete was on (a new file needs none). */
const wipeOldFreeSpace = (db: SqliteDatabase): void => {
  if (schemaVersion(db, "storage") >= 1) return;
  const tables = db
    .prepare<[], { n: number }>("SELECT COUNT(*) AS n FROM sqlite_schema WHERE name <> 'migrations'")
    .get()?.n;
  // VACUUM rewrites the file from its live rows only; it cannot run inside a transaction.
  if ((tables ?? 0) > 0) db.exec("VACUUM");
  db.prepare("INSERT OR IGNORE INTO migrations (component, version, name, applied_at) VALUES ('storage', 1, ?, ?)").run(
    "secure_delete on; older free space vacuumed",
    new Date().toISOString(),
  );
};

/**
 * Copies every committed page from the write-ahead log into the database file and truncates the log
 * to zero bytes, so that page images written before an erasure (which hold the erased rows) are
 * gone from the -wal file. busy_timeout bounds the wait for a reader of another connection; if one
 * still holds an old snapshot the log cannot be reset, and this throws rather than report success.
 */
export const truncateWal = (db: SqliteDatabase): void => {
  const [r] = db.pragma("wal_checkpoint(TRUNCATE)") as { busy: number; log: number; checkpointed: number }[];
  if (r && r.busy !== 0) throw new Error(TRUNCATE_BUSY);
};

/** Why truncateWal failed (a reader of another connection keeps the log from being reset). */
export const TRUNCATE_BUSY =
  "SQLite: the write-ahead log could not be truncated (another connection is reading memory.db); " +
  "the erased rows are deleted, their old page images stay in memory.db-wal until the next checkpoint";

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
