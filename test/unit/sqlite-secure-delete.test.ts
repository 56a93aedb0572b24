import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import Database from "better-sqlite3";
import { openSqlite, SQLITE_FILE, schemaVersion, truncateWal } from "../../services/core/adapters/sqlite-db.ts";

const MARKER = "qzvsecretmarker4711";

const onDisk = (dir: string): boolean =>
  ["", "-wal"].some((suffix) => {
    try {
      return readFileSync(join(dir, SQLITE_FILE + suffix)).includes(MARKER);
    } catch {
      return false;
    }
  });

describe("SQLite files keep no deleted content", () => {
  it("zeroes deleted rows (secure_delete) and truncates the WAL on request", () => {
    const dir = mkdtempSync(join(tmpdir(), "sqlite-secure-"));
    try {
      const db = openSqlite(dir);
      assert.equal(db.pragma("secure_delete", { simple: true }), 1);
      db.exec("CREATE TABLE t (x TEXT)");
      db.prepare("INSERT INTO t VALUES (?), (?)").run(`keep ${"k".repeat(50)}`, `${MARKER} ${"x".repeat(3000)}`);
      truncateWal(db);
      assert.ok(onDisk(dir));
      db.prepare("DELETE FROM t WHERE x LIKE ?").run(`${MARKER}%`);
      assert.ok(onDisk(dir), "the WAL still holds the page from before the delete");
      truncateWal(db);
      assert.ok(!onDisk(dir), "no copy in memory.db or its WAL");
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("vacuums once a file written before secure_delete was on", () => {
    const dir = mkdtempSync(join(tmpdir(), "sqlite-secure-"));
    try {
      // What an older version left: a deleted row's text in the file's free space.
      const old = new Database(join(dir, SQLITE_FILE));
      old.pragma("journal_mode = WAL");
      old.pragma("secure_delete = OFF");
      old.exec("CREATE TABLE t (x TEXT)");
      old.prepare("INSERT INTO t VALUES (?)").run(`${MARKER} ${"x".repeat(3000)}`);
      old.exec("DELETE FROM t");
      old.close();
      assert.ok(onDisk(dir), "the deleted text is in the old file");
      const db = openSqlite(dir);
      assert.equal(schemaVersion(db, "storage"), 1);
      truncateWal(db);
      assert.ok(!onDisk(dir), "the one-time VACUUM removed it");
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
