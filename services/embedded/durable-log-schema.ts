import type { Migration } from "../core/adapters/sqlite-db.ts";

/** Component name of the durable log's tables in the `migrations` table. */
export const DURABLE_LOG_COMPONENT = "durable-log";

/**
 * The embedded runtime's durable log (durable-log.ts): the inbox, the pending segments, the stage
 * cursors and attempt counts, and the per-conversation counters of server-assigned turn ids.
 *
 * Version 1 is the schema the log created for itself before it had migrations, statement for
 * statement, with IF NOT EXISTS: a database written by that code already has these tables (all or,
 * from before runtime_attempts and turn_id_counters were added, the first three), so on such a
 * file version 1 creates only the missing ones and records itself; nothing is altered or copied.
 * Later changes are new versions without IF NOT EXISTS, like the other components' migrations.
 */
export const DURABLE_LOG_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "inbox, pending segments, cursors, attempts, turn id counters",
    sql: `
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
CREATE TABLE IF NOT EXISTS runtime_attempts (
  name TEXT PRIMARY KEY, first INTEGER NOT NULL, last INTEGER NOT NULL, attempts INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS turn_id_counters (
  tenant TEXT NOT NULL, conversation TEXT NOT NULL, last INTEGER NOT NULL,
  PRIMARY KEY (tenant, conversation)
);
`,
  },
  {
    version: 2,
    name: "inbox entries done ahead of the cursor",
    // An erasure holds only its own tenant's entries once it has drained up to its call: the other
    // tenants' entries after them are processed meanwhile, and marked here until the cursor passes them.
    sql: "CREATE TABLE inbox_done (seq INTEGER PRIMARY KEY);",
  },
];
