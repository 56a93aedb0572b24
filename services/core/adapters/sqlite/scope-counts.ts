/**
 * Counts the SQLite graph store keeps per tenant and per conversation, updated in the same
 * transaction as the writes that change them, so that a query reads them with one indexed lookup
 * instead of counting the tenant's rows (issue 18):
 *
 * - `lexical_terms` / `lexical_scopes`: for the lexical routes' BM25 (core/lexical.ts
 *   rankBm25TopK), each term's document frequency and the items and total length of the items a
 *   route admits: current records (not superseded) and raw turns.
 * - `key_counts`: how many current records hold each entity / topic key, for the planner's
 *   selectivity test (countRecordsByKey without validAt).
 *
 * Scope column: TENANT_SCOPE for the whole tenant, conversationScope(c) for one conversation.
 * Every writer that changes what these count (insert, supersede, a rewrite of the validity,
 * erasure) calls the adjust functions below; rows that reach zero are deleted, so an erased term
 * leaves no row behind.
 */
import type { SqliteDatabase } from "../sqlite-db.ts";

type Param = string | number | bigint | null;

/** The store's cached-statement runner (graph-transaction.ts SqlRunner; declared here, no import cycle). */
interface SqlRunner {
  all<T>(sql: string, ...params: Param[]): T[];
  run(sql: string, ...params: Param[]): unknown;
}

export const TENANT_SCOPE = "*";
export const conversationScope = (conversation: string): string => `=${conversation}`;
export const scopeOf = (conversation: string | undefined): string =>
  conversation === undefined ? TENANT_SCOPE : conversationScope(conversation);

export type LexicalKind = "record" | "turn";
export type KeyKind = "entity" | "topic";

export const SCOPE_COUNTS_SQL = `
CREATE TABLE lexical_terms (
  tenant TEXT NOT NULL,
  kind TEXT NOT NULL,
  scope TEXT NOT NULL,
  term TEXT NOT NULL,
  df INTEGER NOT NULL,
  PRIMARY KEY (tenant, kind, scope, term)
) WITHOUT ROWID;
CREATE TABLE lexical_scopes (
  tenant TEXT NOT NULL,
  kind TEXT NOT NULL,
  scope TEXT NOT NULL,
  items INTEGER NOT NULL,
  total_length INTEGER NOT NULL,
  PRIMARY KEY (tenant, kind, scope)
) WITHOUT ROWID;
CREATE TABLE key_counts (
  tenant TEXT NOT NULL,
  kind TEXT NOT NULL,
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (tenant, kind, scope, key)
) WITHOUT ROWID;
`;

const distinctTerms = (lex: string): string[] => (lex.length === 0 ? [] : [...new Set(lex.split(" "))]);

/**
 * One item entering (+1) or leaving (-1) what a lexical route admits in its tenant and its
 * conversation: its distinct terms' document frequencies, the scope's items and total length.
 */
export const adjustLexical = (
  sql: SqlRunner,
  tenant: string,
  kind: LexicalKind,
  conversation: string,
  lex: string,
  length: number,
  sign: 1 | -1,
): void => {
  const terms = distinctTerms(lex);
  for (const scope of [TENANT_SCOPE, conversationScope(conversation)]) {
    for (const term of terms) {
      sql.run(
        `INSERT INTO lexical_terms (tenant, kind, scope, term, df) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (tenant, kind, scope, term) DO UPDATE SET df = df + excluded.df`,
        tenant,
        kind,
        scope,
        term,
        sign,
      );
    }
    sql.run(
      `INSERT INTO lexical_scopes (tenant, kind, scope, items, total_length) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (tenant, kind, scope) DO UPDATE SET items = items + excluded.items,
         total_length = total_length + excluded.total_length`,
      tenant,
      kind,
      scope,
      sign,
      sign * length,
    );
    if (sign < 0) {
      if (terms.length > 0) {
        sql.run(
          `DELETE FROM lexical_terms WHERE tenant = ? AND kind = ? AND scope = ?
           AND term IN (SELECT value FROM json_each(?)) AND df <= 0`,
          tenant,
          kind,
          scope,
          JSON.stringify(terms),
        );
      }
      sql.run(
        "DELETE FROM lexical_scopes WHERE tenant = ? AND kind = ? AND scope = ? AND items <= 0",
        tenant,
        kind,
        scope,
      );
    }
  }
};

/**
 * A stored record entering (+1) or leaving (-1) the current records: its lexical counts (from its
 * full-text row, as the search finds it) and its entity and topic keys' counts (from its index
 * rows, as countRecordsByKey joins them). Call it while the record's rows exist.
 */
export const adjustCurrentRecord = (sql: SqlRunner, tenant: string, recordId: string, sign: 1 | -1): void => {
  const row = sql.all<{ conversation: string; lex: string | null; lex_len: number }>(
    `SELECT r.conversation AS conversation, f.lex AS lex, r.lex_len AS lex_len
     FROM records r LEFT JOIN records_fts f ON f.rowid = r.seq WHERE r.tenant = ? AND r.id = ?`,
    tenant,
    recordId,
  )[0];
  if (!row) return;
  if (row.lex !== null) adjustLexical(sql, tenant, "record", row.conversation, row.lex, row.lex_len, sign);
  const keys = sql.all<{ kind: KeyKind; key: string; conversation: string }>(
    `SELECT 'entity' AS kind, entity AS key, conversation FROM record_entities WHERE tenant = ? AND record_id = ?
     UNION ALL
     SELECT 'topic' AS kind, topic AS key, conversation FROM record_topics WHERE tenant = ? AND record_id = ?`,
    tenant,
    recordId,
    tenant,
    recordId,
  );
  for (const k of keys) {
    for (const scope of [TENANT_SCOPE, conversationScope(k.conversation)]) {
      sql.run(
        `INSERT INTO key_counts (tenant, kind, scope, key, n) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (tenant, kind, scope, key) DO UPDATE SET n = n + excluded.n`,
        tenant,
        k.kind,
        scope,
        k.key,
        sign,
      );
      if (sign < 0) {
        sql.run(
          "DELETE FROM key_counts WHERE tenant = ? AND kind = ? AND scope = ? AND key = ? AND n <= 0",
          tenant,
          k.kind,
          scope,
          k.key,
        );
      }
    }
  }
};

/** Whether a stored record is current (not superseded); undefined when unknown. */
export const isCurrent = (sql: SqlRunner, tenant: string, recordId: string): boolean | undefined => {
  const row = sql.all<{ superseded_by: string | null }>(
    "SELECT superseded_by FROM records WHERE tenant = ? AND id = ?",
    tenant,
    recordId,
  )[0];
  return row === undefined ? undefined : row.superseded_by === null;
};

/** Every count of a tenant (the tenant's deletion). */
export const deleteTenantCounts = (sql: SqlRunner, tenant: string): void => {
  for (const table of ["lexical_terms", "lexical_scopes", "key_counts"]) {
    sql.run(`DELETE FROM ${table} WHERE tenant = ?`, tenant);
  }
};

/** The kept statistics a lexical search reads: its scope's counts and its terms' document frequencies. */
export const readLexicalStatistics = (
  sql: SqlRunner,
  tenant: string,
  kind: LexicalKind,
  conversation: string | undefined,
  terms: readonly string[],
): { scope: { items: number; totalLength: number }; df: Map<string, number> } => {
  const scope = scopeOf(conversation);
  const counts = sql.all<{ items: number; totalLength: number }>(
    "SELECT items, total_length AS totalLength FROM lexical_scopes WHERE tenant = ? AND kind = ? AND scope = ?",
    tenant,
    kind,
    scope,
  )[0] ?? { items: 0, totalLength: 0 };
  const df = new Map(
    sql
      .all<{ term: string; df: number }>(
        `SELECT term, df FROM lexical_terms WHERE tenant = ? AND kind = ? AND scope = ?
         AND term IN (SELECT value FROM json_each(?))`,
        tenant,
        kind,
        scope,
        JSON.stringify(terms),
      )
      .map((r) => [r.term, r.df]),
  );
  return { scope: counts, df };
};

/** Current records holding one key in the scope (0 when none). */
export const readKeyCount = (
  sql: SqlRunner,
  tenant: string,
  kind: KeyKind,
  key: string,
  conversation: string | undefined,
): number =>
  sql.all<{ n: number }>(
    "SELECT n FROM key_counts WHERE tenant = ? AND kind = ? AND scope = ? AND key = ?",
    tenant,
    kind,
    scopeOf(conversation),
    key,
  )[0]?.n ?? 0;

/**
 * Migration 9's backfill: the counts of every existing store, from its rows. Document frequencies
 * are counted here from the full-text rows' terms (what the search finds), the scope sizes and
 * key counts in SQL.
 */
export const backfillScopeCounts = (db: SqliteDatabase): void => {
  for (const kind of ["record", "turn"] as const) {
    const read =
      kind === "record"
        ? `SELECT r.tenant AS tenant, r.conversation AS conversation, f.lex AS lex
           FROM records r JOIN records_fts f ON f.rowid = r.seq WHERE r.superseded_by IS NULL`
        : `SELECT t.tenant AS tenant, t.conversation AS conversation, f.lex AS lex
           FROM turns t JOIN turns_fts f ON f.rowid = t.seq`;
    const df = new Map<string, Map<string, number>>();
    const bump = (tenant: string, scope: string, term: string): void => {
      const key = `${tenant}\u0000${scope}`;
      let terms = df.get(key);
      if (!terms) {
        terms = new Map();
        df.set(key, terms);
      }
      terms.set(term, (terms.get(term) ?? 0) + 1);
    };
    for (const row of db.prepare<[], { tenant: string; conversation: string; lex: string }>(read).iterate()) {
      for (const term of distinctTerms(row.lex)) {
        bump(row.tenant, TENANT_SCOPE, term);
        bump(row.tenant, conversationScope(row.conversation), term);
      }
    }
    const insert = db.prepare<[string, string, string, string, number]>(
      "INSERT INTO lexical_terms (tenant, kind, scope, term, df) VALUES (?, ?, ?, ?, ?)",
    );
    for (const [key, terms] of df) {
      const [tenant, scope] = key.split("\u0000") as [string, string];
      for (const [term, n] of terms) insert.run(tenant, kind, scope, term, n);
    }
  }
  const conv = (c: string): string => `'${conversationScope("")}' || ${c}`;
  db.exec(`
INSERT INTO lexical_scopes (tenant, kind, scope, items, total_length)
  SELECT tenant, 'record', '${TENANT_SCOPE}', COUNT(*), SUM(lex_len) FROM records WHERE superseded_by IS NULL GROUP BY tenant;
INSERT INTO lexical_scopes (tenant, kind, scope, items, total_length)
  SELECT tenant, 'record', ${conv("conversation")}, COUNT(*), SUM(lex_len) FROM records WHERE superseded_by IS NULL
  GROUP BY tenant, conversation;
INSERT INTO lexical_scopes (tenant, kind, scope, items, total_length)
  SELECT tenant, 'turn', '${TENANT_SCOPE}', COUNT(*), SUM(lex_len) FROM turns GROUP BY tenant;
INSERT INTO lexical_scopes (tenant, kind, scope, items, total_length)
  SELECT tenant, 'turn', ${conv("conversation")}, COUNT(*), SUM(lex_len) FROM turns GROUP BY tenant, conversation;
`);
  for (const [kind, table, column] of [
    ["entity", "record_entities", "entity"],
    ["topic", "record_topics", "topic"],
  ] as const) {
    db.exec(`
INSERT INTO key_counts (tenant, kind, scope, key, n)
  SELECT x.tenant, '${kind}', '${TENANT_SCOPE}', x.${column}, COUNT(*)
  FROM ${table} x JOIN records r ON r.tenant = x.tenant AND r.id = x.record_id
  WHERE r.superseded_by IS NULL GROUP BY x.tenant, x.${column};
INSERT INTO key_counts (tenant, kind, scope, key, n)
  SELECT x.tenant, '${kind}', ${conv("x.conversation")}, x.${column}, COUNT(*)
  FROM ${table} x JOIN records r ON r.tenant = x.tenant AND r.id = x.record_id
  WHERE r.superseded_by IS NULL GROUP BY x.tenant, x.conversation, x.${column};
`);
  }
};
