import type { StateStore } from "../../ports.ts";
import { migrate, openSqlite, type SqliteDatabase } from "../sqlite-db.ts";
import { STATE_MIGRATIONS } from "./schema.ts";

export interface SqliteStateStoreOptions {
  /** Close the database in close() (default false: whoever opened the shared handle closes it). */
  ownsDb?: boolean;
}

/** Durable JSON values per (stage, key) in the `stage_state` table. */
export class SqliteStateStore implements StateStore {
  readonly db: SqliteDatabase;
  private readonly ownsDb: boolean;
  private closed = false;
  private readonly getStmt;
  private readonly putStmt;
  private readonly deleteStmt;
  private readonly keysStmt;

  constructor(db: SqliteDatabase, options: SqliteStateStoreOptions = {}) {
    this.db = db;
    this.ownsDb = options.ownsDb ?? false;
    migrate(db, "state", STATE_MIGRATIONS);
    this.getStmt = db.prepare<[string, string], { json: string }>(
      "SELECT json FROM stage_state WHERE stage = ? AND key = ?",
    );
    this.putStmt = db.prepare<[string, string, string]>(
      "INSERT INTO stage_state (stage, key, json) VALUES (?, ?, ?) ON CONFLICT (stage, key) DO UPDATE SET json = excluded.json",
    );
    this.deleteStmt = db.prepare<[string, string]>("DELETE FROM stage_state WHERE stage = ? AND key = ?");
    this.keysStmt = db.prepare<[string], { key: string }>("SELECT key FROM stage_state WHERE stage = ? ORDER BY key");
  }

  /** A store with its own handle on `<dataDir>/memory.db`, closed by close(). */
  static open(dataDir: string): SqliteStateStore {
    return new SqliteStateStore(openSqlite(dataDir), { ownsDb: true });
  }

  private check(): void {
    if (this.closed) throw new Error("SqliteStateStore is closed");
  }

  async get<T>(stage: string, key: string): Promise<T | undefined> {
    this.check();
    const row = this.getStmt.get(stage, key);
    return row ? (JSON.parse(row.json) as T) : undefined;
  }

  /** Stores `value` as JSON (undefined is refused: delete the key instead). */
  async put<T>(stage: string, key: string, value: T): Promise<void> {
    this.check();
    const json = JSON.stringify(value);
    if (json === undefined) throw new Error(`state ${stage}/${key}: value is not JSON-serialisable`);
    this.putStmt.run(stage, key, json);
  }

  async delete(stage: string, key: string): Promise<void> {
    this.check();
    this.deleteStmt.run(stage, key);
  }

  /** Keys of a stage, sorted. */
  async keys(stage: string): Promise<string[]> {
    this.check();
    return this.keysStmt.all(stage).map((r) => r.key);
  }

  /** Not part of the port: releases the store (and the handle when it owns it). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsDb && this.db.open) this.db.close();
  }
}
