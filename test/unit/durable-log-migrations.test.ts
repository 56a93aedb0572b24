// The durable log's tables come from migrations (durable-log-schema.ts), like the stores' tables,
// and a data folder written before that (when the log ran its own CREATE TABLE statements, in two
// historical shapes) opens with its rows intact and gets only the tables it lacks.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import Database from "better-sqlite3";
import { openSqlite, SQLITE_FILE, type SqliteDatabase, schemaVersion } from "../../services/core/adapters/sqlite-db.ts";
import type { Turn } from "../../services/core/types.ts";
import { DurableLog } from "../../services/embedded/durable-log.ts";
import { DURABLE_LOG_COMPONENT, DURABLE_LOG_MIGRATIONS } from "../../services/embedded/durable-log-schema.ts";

/** The log's own DDL of the first release (inbox, pending segments, cursors). */
const FIRST_DDL = `
      CREATE TABLE IF NOT EXISTS inbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant TEXT NOT NULL, conversation TEXT NOT NULL, kind TEXT NOT NULL,
        turn_id TEXT, json TEXT NOT NULL,
        UNIQUE (tenant, conversation, turn_id)
      );
      CREATE TABLE IF NOT EXISTS pending_segments (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant TEXT NOT NULL, conversation TEXT NOT NULL,
        segment_id TEXT NOT NULL UNIQUE, json TEXT NOT NULL,
        done INTEGER NOT NULL DEFAULT 0
      );
      CREATE TABLE IF NOT EXISTS runtime_cursor (name TEXT PRIMARY KEY, seq INTEGER NOT NULL);
`;

/** The log's own DDL just before migrations: the first release's plus attempts and turn id counters. */
const LAST_DDL = `${FIRST_DDL}
      CREATE TABLE IF NOT EXISTS runtime_attempts (
        name TEXT PRIMARY KEY, first INTEGER NOT NULL, last INTEGER NOT NULL, attempts INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS turn_id_counters (
        tenant TEXT NOT NULL, conversation TEXT NOT NULL, last INTEGER NOT NULL,
        PRIMARY KEY (tenant, conversation)
      );
`;

/** The tables of version 1, the log's own DDL before migrations. */
const V1_TABLES = ["inbox", "pending_segments", "runtime_attempts", "runtime_cursor", "turn_id_counters"];
/** Every table of the log now (version 2 added the marks of entries done ahead of the cursor). */
const LOG_TABLES = [
  "inbox",
  "inbox_done",
  "pending_segments",
  "runtime_attempts",
  "runtime_cursor",
  "turn_id_counters",
];
const LATEST = DURABLE_LOG_MIGRATIONS.at(-1)?.version;

const turn = (turnId: string, text: string): Turn => ({
  tenant: "acme",
  conversation: "c1",
  turnId,
  speaker: "Ana",
  role: "user",
  text,
  timestamp: "2024-05-06T10:15:00.000Z",
  sessionId: "s1",
});

const tables = (db: SqliteDatabase): string[] =>
  (db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").all() as { name: string }[])
    .map((t) => t.name)
    .filter((n) => LOG_TABLES.includes(n));

/** The CREATE statement SQLite keeps for each log table (whitespace-normalised). */
const shapes = (db: SqliteDatabase): Record<string, string> =>
  Object.fromEntries(
    (db.prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'table'").all() as { name: string; sql: string }[])
      .filter((t) => LOG_TABLES.includes(t.name))
      .map((t) => [t.name, t.sql.replace(/\s+/g, " ").replace("IF NOT EXISTS ", "")]),
  );

/** A data folder as the old code left it: its DDL, a turn, a flush, a pending segment and a cursor. */
const writeOldFolder = (ddl: string): string => {
  const dir = mkdtempSync(join(tmpdir(), "durable-log-old-"));
  const db = new Database(join(dir, SQLITE_FILE));
  try {
    db.exec(ddl);
    const insert = db.prepare("INSERT INTO inbox (tenant, conversation, kind, turn_id, json) VALUES (?, ?, ?, ?, ?)");
    insert.run("acme", "c1", "turn", "t1", JSON.stringify(turn("t1", "hello")));
    insert.run("acme", "c1", "flush", null, JSON.stringify({ reason: "session-end" }));
    db.prepare("INSERT INTO pending_segments (tenant, conversation, segment_id, json) VALUES (?, ?, ?, ?)").run(
      "acme",
      "c1",
      "seg-1",
      JSON.stringify({ id: "seg-1", tenant: "acme", conversation: "c1", sessionId: "s1", turns: [] }),
    );
    db.prepare("INSERT INTO runtime_cursor (name, seq) VALUES (?, ?)").run("sensory", 1);
  } finally {
    db.close();
  }
  return dir;
};

describe("durable log migrations", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("creates the log's tables through migrations on a new data folder", () => {
    const dir = mkdtempSync(join(tmpdir(), "durable-log-new-"));
    dirs.push(dir);
    const db = openSqlite(dir);
    try {
      new DurableLog(db);
      assert.equal(schemaVersion(db, DURABLE_LOG_COMPONENT), LATEST);
      assert.deepEqual(tables(db), LOG_TABLES);
      // Opening again applies nothing twice.
      new DurableLog(db);
      const rows = db.prepare("SELECT version FROM migrations WHERE component = ?").all(DURABLE_LOG_COMPONENT);
      assert.deepEqual(
        rows,
        DURABLE_LOG_MIGRATIONS.map((m) => ({ version: m.version })),
      );
    } finally {
      db.close();
    }
  });

  it("version 1 is exactly the schema the log created before migrations", () => {
    const fresh = mkdtempSync(join(tmpdir(), "durable-log-v1-"));
    const old = writeOldFolder(LAST_DDL);
    dirs.push(fresh, old);
    const a = openSqlite(fresh);
    const b = new Database(join(old, SQLITE_FILE));
    try {
      new DurableLog(a);
      // The tables of version 1 (later versions add their own).
      const v1 = Object.fromEntries(Object.entries(shapes(a)).filter(([name]) => V1_TABLES.includes(name)));
      assert.deepEqual(v1, shapes(b));
    } finally {
      a.close();
      b.close();
    }
  });

  for (const [label, ddl, before] of [
    ["just before migrations", LAST_DDL, V1_TABLES],
    ["of the first release", FIRST_DDL, ["inbox", "pending_segments", "runtime_cursor"]],
  ] as const) {
    it(`opens a data folder written by the log ${label}: rows kept, missing tables added`, () => {
      const dir = writeOldFolder(ddl);
      dirs.push(dir);
      const db = openSqlite(dir);
      try {
        assert.deepEqual(tables(db), before);
        const oldShapes = shapes(db);
        const log = new DurableLog(db);
        assert.equal(schemaVersion(db, DURABLE_LOG_COMPONENT), LATEST);
        assert.deepEqual(tables(db), LOG_TABLES);
        // The tables that existed are untouched.
        for (const [name, sql] of Object.entries(oldShapes)) assert.equal(shapes(db)[name], sql, name);
        const inbox = log.readInbox(0, 10);
        assert.equal(inbox.length, 2);
        assert.deepEqual(inbox[0], {
          seq: 1,
          kind: "turn",
          tenant: "acme",
          conversation: "c1",
          turn: turn("t1", "hello"),
        });
        assert.deepEqual(inbox[1], {
          seq: 2,
          kind: "flush",
          tenant: "acme",
          conversation: "c1",
          reason: "session-end",
        });
        assert.equal(log.cursor("sensory"), 1);
        assert.deepEqual(
          log.pending().map((p) => p.segment.id),
          ["seg-1"],
        );
        // It goes on working: a retried turn is accepted once, a server id comes from the counter.
        assert.deepEqual(log.appendTurns([turn("t1", "hello")]), [false]);
        const [assigned] = log.appendConversationTurns("acme", "c1", [turn("x", "again")], [true]);
        assert.equal(assigned?.turnId, "@1");
        assert.equal(log.beginAttempt("encoder", 1, 3), 1);
        assert.equal(log.beginAttempt("encoder", 1, 3), 2);
        const appended = log.readInbox(2, 10);
        assert.equal(appended.length, 1);
        assert.equal(appended[0]?.kind === "turn" ? appended[0].turn.turnId : undefined, "@1");
      } finally {
        db.close();
      }
    });
  }
});
