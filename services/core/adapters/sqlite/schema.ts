import { lexicalText } from "../../lexical.ts";
import type { Migration, SqliteDatabase } from "../sqlite-db.ts";
import { ftsScopeText, ftsTermsText } from "./fts-scope.ts";
import { rekeyDeadLetters, rekeyStageState } from "./rekey.ts";
import { backfillScopeCounts, SCOPE_COUNTS_SQL } from "./scope-counts.ts";

/** Re-indexes every record and raw turn under the shared lexical terms (services/core/lexical.ts). */
const backfillLexical = (db: SqliteDatabase): void => {
  for (const [table, fts] of [
    ["records", "records_fts"],
    ["turns", "turns_fts"],
  ] as const) {
    const setLength = db.prepare<[number, number]>(`UPDATE ${table} SET lex_len = ? WHERE seq = ?`);
    const index = db.prepare<[number, string, string, string]>(
      `INSERT INTO ${fts} (rowid, lex, tenant, conversation) VALUES (?, ?, ?, ?)`,
    );
    // all(), not iterate(): better-sqlite3 runs no other statement while an iterator is open.
    const rows = db
      .prepare<[], { seq: number; text: string; tenant: string; conversation: string }>(
        `SELECT seq, text, tenant, conversation FROM ${table}`,
      )
      .all();
    for (const row of rows) {
      const lex = lexicalText(row.text);
      setLength.run(lex.length, row.seq);
      index.run(row.seq, lex.lex, row.tenant, row.conversation);
    }
  }
};

/**
 * Rebuilds both FTS5 tables with the indexed `scope` column (fts-scope.ts), copying every row's
 * terms: a new table is filled, the old one dropped and the new one renamed (FTS5 cannot add a
 * column). secure-delete is set on the new tables as migration 4 set it on the old ones.
 */
const addLexicalScope = (db: SqliteDatabase): void => {
  for (const fts of ["records_fts", "turns_fts"] as const) {
    const next = `${fts}_next`;
    db.exec(`
CREATE VIRTUAL TABLE ${next} USING fts5(
  lex, tenant UNINDEXED, conversation UNINDEXED, scope, tokenize = 'unicode61 remove_diacritics 0'
);
INSERT INTO ${next} (${next}, rank) VALUES ('secure-delete', 1);
`);
    const insert = db.prepare<[number, string, string, string, string]>(
      `INSERT INTO ${next} (rowid, lex, tenant, conversation, scope) VALUES (?, ?, ?, ?, ?)`,
    );
    const rows = db
      .prepare<[], { rowid: number; lex: string; tenant: string; conversation: string }>(
        `SELECT rowid, lex, tenant, conversation FROM ${fts}`,
      )
      .all();
    for (const r of rows) insert.run(r.rowid, r.lex, r.tenant, r.conversation, ftsScopeText(r.tenant, r.conversation));
    db.exec(`DROP TABLE ${fts}; ALTER TABLE ${next} RENAME TO ${fts};`);
  }
};

/**
 * Migration 13: rebuilds both FTS5 tables with every row's terms under its tenant's prefix
 * (fts-scope.ts ftsTermsText), from the stored terms (migration 11), in rowid order and in pages
 * (better-sqlite3 runs no other statement while an iterator is open, and a whole table in memory
 * is large at a million rows). The stored terms are the source: the old table is dropped first.
 *
 * The new tables keep no content (contentless_delete: rows are still deleted, by rowid, or by
 * tenant or conversation through their scope tokens) and no tenant and conversation columns
 * (the stored-terms rows have them): every read takes an item's terms from the stored-terms
 * table, and FTS5's copy of the prefixed terms would have cost ~0.9 KB a record (the 100K-record
 * scale store: 19 + 17 MB of content before, 51 + 41 MB prefixed).
 */
const prefixTenantTerms = (db: SqliteDatabase): void => {
  const PAGE = 10_000;
  for (const kind of ["records", "turns"] as const) {
    const fts = `${kind}_fts`;
    db.exec(`
DROP TABLE ${fts};
CREATE VIRTUAL TABLE ${fts} USING fts5(
  lex, scope, tokenize = 'unicode61 remove_diacritics 0', content = '', contentless_delete = 1
);
INSERT INTO ${fts} (${fts}, rank) VALUES ('secure-delete', 1);
`);
    const insert = db.prepare<[number, string, string]>(`INSERT INTO ${fts} (rowid, lex, scope) VALUES (?, ?, ?)`);
    const page = db.prepare<[number, number], { seq: number; tenant: string; conversation: string; lex: string }>(
      `SELECT seq, tenant, conversation, lex FROM ${kind}_terms WHERE seq > ? ORDER BY seq LIMIT ?`,
    );
    for (let after = -1; ; ) {
      const rows = page.all(after, PAGE);
      for (const r of rows) insert.run(r.seq, ftsTermsText(r.tenant, r.lex), ftsScopeText(r.tenant, r.conversation));
      if (rows.length < PAGE) break;
      after = (rows[rows.length - 1] as { seq: number }).seq;
    }
  }
};

/**
 * Graph/record store schema. Every table is keyed by tenant first. Times are epoch milliseconds.
 * The FTS5 tables' rowid is the `seq` of the row they index; since migration 13 they hold only the
 * indexed terms and scope tokens, the tenant and conversation being the stored-terms rows'.
 */
export const GRAPH_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "records, indexes, segments, turns, fts, candidates, dead letters",
    sql: `
CREATE TABLE records (
  seq INTEGER PRIMARY KEY,
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  conversation TEXT NOT NULL,
  type TEXT NOT NULL,
  text TEXT NOT NULL,
  json TEXT NOT NULL,
  said_at INTEGER NOT NULL,
  time_from INTEGER NOT NULL,
  time_to INTEGER NOT NULL,
  has_time INTEGER NOT NULL,
  valid_from INTEGER NOT NULL,
  valid_to INTEGER,
  superseded_by TEXT,
  segment_id TEXT NOT NULL,
  UNIQUE (tenant, id)
);
CREATE INDEX records_said ON records (tenant, said_at, id);
CREATE INDEX records_conv_said ON records (tenant, conversation, said_at, id);
CREATE INDEX records_time ON records (tenant, time_from, time_to);
CREATE INDEX records_type ON records (tenant, type, said_at, id);

CREATE TABLE record_entities (
  tenant TEXT NOT NULL,
  record_id TEXT NOT NULL,
  entity TEXT NOT NULL,
  name TEXT NOT NULL,
  is_alias INTEGER NOT NULL,
  PRIMARY KEY (tenant, record_id, entity)
);
CREATE INDEX record_entities_entity ON record_entities (tenant, entity);

CREATE TABLE record_topics (
  tenant TEXT NOT NULL,
  record_id TEXT NOT NULL,
  topic TEXT NOT NULL,
  name TEXT NOT NULL,
  PRIMARY KEY (tenant, record_id, topic)
);
CREATE INDEX record_topics_topic ON record_topics (tenant, topic);

CREATE TABLE record_days (
  tenant TEXT NOT NULL,
  record_id TEXT NOT NULL,
  day TEXT,
  month TEXT NOT NULL
);
CREATE INDEX record_days_record ON record_days (tenant, record_id);
CREATE INDEX record_days_day ON record_days (tenant, day);
CREATE INDEX record_days_month ON record_days (tenant, month);

CREATE TABLE event_frames (
  tenant TEXT NOT NULL,
  frame_id TEXT NOT NULL,
  record_id TEXT NOT NULL,
  PRIMARY KEY (tenant, frame_id, record_id)
);
CREATE INDEX event_frames_record ON event_frames (tenant, record_id);

CREATE TABLE segments (
  tenant TEXT NOT NULL,
  conversation TEXT NOT NULL,
  id TEXT NOT NULL,
  json TEXT NOT NULL,
  PRIMARY KEY (tenant, id)
);
CREATE INDEX segments_conv ON segments (tenant, conversation);

CREATE TABLE turns (
  seq INTEGER PRIMARY KEY,
  tenant TEXT NOT NULL,
  conversation TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  segment_id TEXT NOT NULL,
  speaker TEXT NOT NULL,
  role TEXT NOT NULL,
  text TEXT NOT NULL,
  compressed TEXT NOT NULL,
  timestamp TEXT NOT NULL,
  session_id TEXT NOT NULL,
  UNIQUE (tenant, conversation, turn_id)
);
CREATE INDEX turns_segment ON turns (tenant, segment_id);

CREATE VIRTUAL TABLE records_fts USING fts5(
  text, tenant UNINDEXED, conversation UNINDEXED, tokenize = 'porter unicode61'
);
CREATE VIRTUAL TABLE turns_fts USING fts5(
  text, tenant UNINDEXED, conversation UNINDEXED, tokenize = 'porter unicode61'
);

CREATE TABLE update_candidates (
  tenant TEXT NOT NULL,
  record_id TEXT NOT NULL,
  candidate_id TEXT NOT NULL,
  json TEXT NOT NULL,
  PRIMARY KEY (tenant, record_id, candidate_id)
);

CREATE TABLE dead_letters (
  seq INTEGER PRIMARY KEY,
  tenant TEXT,
  stage TEXT NOT NULL,
  key TEXT NOT NULL,
  error TEXT NOT NULL,
  payload TEXT NOT NULL,
  at TEXT NOT NULL,
  UNIQUE (stage, key, at, error)
);
CREATE INDEX dead_letters_tenant ON dead_letters (tenant);
`,
  },
  {
    version: 2,
    name: "consolidation: candidate status, record relations",
    sql: `
ALTER TABLE update_candidates ADD COLUMN status TEXT NOT NULL DEFAULT 'pending';
ALTER TABLE update_candidates ADD COLUMN decision TEXT;
ALTER TABLE update_candidates ADD COLUMN decided_at TEXT;
CREATE INDEX update_candidates_status ON update_candidates (tenant, status, record_id);
CREATE INDEX update_candidates_candidate ON update_candidates (tenant, candidate_id);

CREATE TABLE record_relations (
  tenant TEXT NOT NULL,
  from_id TEXT NOT NULL,
  to_id TEXT NOT NULL,
  relation TEXT NOT NULL,
  at TEXT NOT NULL,
  reason TEXT,
  PRIMARY KEY (tenant, from_id, to_id, relation)
);
CREATE INDEX record_relations_to ON record_relations (tenant, to_id);

CREATE INDEX records_superseded_by ON records (tenant, superseded_by);
`,
  },
  {
    version: 3,
    name: "lexical: shared terms indexed, BM25 computed by the store-independent scorer",
    // The FTS tables now index the shared terms (already lower-cased and stemmed), split on spaces
    // only; the items' term counts give BM25 its length normalisation.
    sql: `
ALTER TABLE records ADD COLUMN lex_len INTEGER NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN lex_len INTEGER NOT NULL DEFAULT 0;
DROP TABLE records_fts;
DROP TABLE turns_fts;
CREATE VIRTUAL TABLE records_fts USING fts5(
  lex, tenant UNINDEXED, conversation UNINDEXED, tokenize = 'unicode61 remove_diacritics 0'
);
CREATE VIRTUAL TABLE turns_fts USING fts5(
  lex, tenant UNINDEXED, conversation UNINDEXED, tokenize = 'unicode61 remove_diacritics 0'
);
`,
    backfill: backfillLexical,
  },
  {
    version: 4,
    name: "erasure: FTS5 secure-delete, old segments merged",
    // FTS5 normally records a delete as a tombstone in a new segment and keeps the deleted terms in
    // the old segments until they are merged; with secure-delete it removes them from the index
    // b-tree at once. 'optimize' merges what older deletes left behind into one clean segment.
    sql: `
INSERT INTO records_fts (records_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO turns_fts (turns_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO records_fts (records_fts) VALUES ('optimize');
INSERT INTO turns_fts (turns_fts) VALUES ('optimize');
`,
  },
  {
    version: 5,
    name: "dead letters keyed by the unambiguous tenant/conversation key",
    sql: "",
    backfill: rekeyDeadLetters,
  },
  {
    version: 6,
    // The lexical routes' BM25 scope (items, total length) of a tenant or conversation on every
    // query: read from these covering indexes instead of the table rows (issue 18; the record rows
    // hold their JSON, so a scan of them reads many pages).
    name: "covering indexes for the lexical scope statistics",
    sql: `
CREATE INDEX IF NOT EXISTS records_lex_scope ON records (tenant, conversation, superseded_by, valid_from, valid_to, lex_len);
CREATE INDEX IF NOT EXISTS turns_lex_scope ON turns (tenant, conversation, lex_len);
`,
  },
  {
    version: 7,
    // Issue 18: the entity and topic routes and the planner's known names read a conversation's
    // rows or a tenant's distinct names on every query. With the record's conversation on its
    // index rows, a conversation-scoped lookup reads that conversation's rows only (it read every
    // row of the tenant with the key and joined the record to check its conversation), and the
    // name indexes let the distinct names of a tenant be read by seeking from one name to the next.
    name: "conversation on the entity and topic rows; name indexes",
    sql: `
ALTER TABLE record_entities ADD COLUMN conversation TEXT NOT NULL DEFAULT '';
ALTER TABLE record_topics ADD COLUMN conversation TEXT NOT NULL DEFAULT '';
UPDATE record_entities SET conversation = COALESCE(
  (SELECT r.conversation FROM records r WHERE r.tenant = record_entities.tenant AND r.id = record_entities.record_id), '');
UPDATE record_topics SET conversation = COALESCE(
  (SELECT r.conversation FROM records r WHERE r.tenant = record_topics.tenant AND r.id = record_topics.record_id), '');
CREATE INDEX record_entities_conv ON record_entities (tenant, conversation, entity, is_alias, name);
CREATE INDEX record_entities_names ON record_entities (tenant, is_alias, name);
CREATE INDEX record_topics_conv ON record_topics (tenant, conversation, topic, name);
CREATE INDEX record_topics_names ON record_topics (tenant, name);
`,
  },
  {
    version: 8,
    // Issue 18: a lexical search's MATCH is narrowed to the tenant or conversation by the index
    // (fts-scope.ts) instead of finding every tenant's rows and filtering them afterwards.
    name: "FTS5 scope tokens (tenant, conversation)",
    sql: "",
    backfill: addLexicalScope,
  },
  {
    version: 9,
    // Issue 18: the lexical routes' document frequencies and scope sizes and the planner's per-key
    // record counts, kept per tenant and conversation with the writes (scope-counts.ts), so that a
    // query reads them instead of counting every matching row of the tenant.
    name: "kept counts: lexical document frequencies, scope sizes, records per entity / topic key",
    sql: SCOPE_COUNTS_SQL,
    backfill: backfillScopeCounts,
  },
  {
    version: 10,
    // Issue 18: the tenant-wide entity and topic routes rank by distinct keys matched, then most
    // recent first. With the record's said_at on its index rows and in the key indexes' order, the
    // most recent matches of one key are an index walk that stops at the route's cut (graph-store.ts
    // recordsByKeys) instead of every match of the key joined, grouped and sorted. The key indexes
    // keep their names (named by INDEXED BY); (tenant, key) stays their prefix.
    name: "said_at on the entity and topic rows, in the key indexes' order",
    sql: `
ALTER TABLE record_entities ADD COLUMN said_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE record_topics ADD COLUMN said_at INTEGER NOT NULL DEFAULT 0;
UPDATE record_entities SET said_at = COALESCE(
  (SELECT r.said_at FROM records r WHERE r.tenant = record_entities.tenant AND r.id = record_entities.record_id), 0);
UPDATE record_topics SET said_at = COALESCE(
  (SELECT r.said_at FROM records r WHERE r.tenant = record_topics.tenant AND r.id = record_topics.record_id), 0);
DROP INDEX record_entities_entity;
CREATE INDEX record_entities_entity ON record_entities (tenant, entity, said_at DESC, record_id);
DROP INDEX record_topics_topic;
CREATE INDEX record_topics_topic ON record_topics (tenant, topic, said_at DESC, record_id);
`,
  },
  {
    version: 11,
    // Issue 18: the lexical reads take each posted item's stored terms from a plain table keyed by
    // the full-text rowid, joined in the same statement, instead of FTS5's content table, which
    // FTS5 reads through a statement of its own per row (full-text-rows.ts).
    name: "stored terms of records and raw turns by full-text rowid",
    sql: `
CREATE TABLE records_terms (
  seq INTEGER PRIMARY KEY,
  tenant TEXT NOT NULL,
  conversation TEXT NOT NULL,
  lex TEXT NOT NULL
);
CREATE TABLE turns_terms (
  seq INTEGER PRIMARY KEY,
  tenant TEXT NOT NULL,
  conversation TEXT NOT NULL,
  lex TEXT NOT NULL
);
INSERT INTO records_terms (seq, tenant, conversation, lex) SELECT rowid, tenant, conversation, lex FROM records_fts;
INSERT INTO turns_terms (seq, tenant, conversation, lex) SELECT rowid, tenant, conversation, lex FROM turns_fts;
`,
  },
  {
    version: 12,
    // Issue 18: the tenant-wide entity and topic walks ask, page after page, which of a list of
    // record ids are current (or valid at a moment), and the as-of and conversation-scoped key
    // reads join each key row to its record for the same columns and its said_at. Through the
    // unique (tenant, id) index each id also read its table row, where these columns sit after the
    // text and JSON; this index answers from its own pages, which stay cached where a large store's
    // rows do not (~1M records: tenant-wide query p50 −30–60%; 100K: no change; docs/benchmarks.md).
    name: "covering index for a record's validity by id",
    sql: `
CREATE INDEX IF NOT EXISTS records_validity ON records (tenant, id, superseded_by, valid_from, valid_to, said_at);
`,
  },
  {
    version: 13,
    // Issue 18: a common term's full-text list held every tenant's rows, and a tenant-wide search
    // read all of them to keep its tenant's (the tail of tenant-wide queries at 100K records).
    // Indexed under a per-tenant prefix, a term's list is one tenant's (fts-scope.ts).
    name: "full-text terms indexed per tenant",
    sql: "",
    backfill: prefixTenantTerms,
  },
  {
    version: 14,
    // Issue 18: the tenant-wide entity walk (keys-walk.ts) reads each key's list in (said_at DESC,
    // record_id) order with the row's display name, which the index did not hold: every row read
    // its table row too. With the name in the index the walk reads index pages only (about a third
    // less time a row on a 100K-record store; docs/benchmarks.md). record_topics needs no such
    // change: the name it reads is its key.
    name: "entity key index covering the walk's name",
    sql: `
DROP INDEX record_entities_entity;
CREATE INDEX record_entities_entity ON record_entities (tenant, entity, said_at DESC, record_id, name);
`,
  },
  {
    version: 15,
    // Issue 18: the tenant-wide key walks keep a tenant's superseded ids in memory while the data
    // is unchanged (graph-store.ts supersededOf); this partial index reads them without a walk over
    // the tenant's records. Empty where nothing was superseded.
    name: "index of superseded records",
    sql: `
CREATE INDEX IF NOT EXISTS records_superseded ON records (tenant, id) WHERE superseded_by IS NOT NULL;
`,
  },
  {
    version: 16,
    // Issue 18: an erasure runs in steps (core/erasure.ts), and a conversation's last step read
    // every stored-terms row of the store (SCAN, no index on the conversation: 8 ms each table on
    // the 100K scale store, 10x that at 1M) and every record of the tenant with its JSON, for the
    // few that carry merged sources. With these indexes both read only their own rows.
    name: "indexes for a conversation's erasure",
    sql: `
CREATE INDEX IF NOT EXISTS records_terms_scope ON records_terms (tenant, conversation);
CREATE INDEX IF NOT EXISTS turns_terms_scope ON turns_terms (tenant, conversation);
CREATE INDEX IF NOT EXISTS records_merged ON records (tenant) WHERE json_extract(json, '$.mergedSources') IS NOT NULL;
`,
  },
];

export const STATE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "stage_state",
    sql: `
CREATE TABLE stage_state (
  stage TEXT NOT NULL,
  key TEXT NOT NULL,
  json TEXT NOT NULL,
  PRIMARY KEY (stage, key)
);
`,
  },
  {
    version: 2,
    name: "stage state keyed by the unambiguous tenant/conversation key",
    sql: "",
    backfill: rekeyStageState,
  },
];
