/**
 * Counts the SQLite graph store keeps per tenant and per conversation, updated in the same
 * transaction as the writes that change them, so that a query reads them with one indexed lookup
 * instead of counting the tenant's rows (issue 18):
 *
 * - `lexical_terms` / `lexical_scopes`: for the tenant-wide lexical routes' BM25 (core/lexical.ts
 *   rankBm25TopK), each term's document frequency in the tenant, largest count in one item and smallest item
 *   length per count (the score bounds; when a record is superseded these two stay as they were:
 *   still valid bounds, only looser; when an item is erased they become NULL, "not known", so
 *   that nothing derived from erased text stays behind, and stay NULL: MAX / MIN with NULL is NULL), and the items and total length of the items a route admits: current records (not
 *   superseded) and raw turns.
 * - `key_counts`: how many current records hold each entity / topic key, for the planner's
 *   selectivity test (countRecordsByKey without validAt).
 *
 * Scope column: TENANT_SCOPE for the whole tenant, conversationScope(c) for one conversation.
 * Every writer that changes what these count (insert, supersede, a rewrite of the validity,
 * erasure) calls the adjust functions below; rows that reach zero are deleted, so an erased term
 * leaves no row behind.
 */
import type { LexicalScope, LexicalStatistics } from "../../lexical.ts";
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

/**
 * The scopes whose lexical counts are kept: the tenant only. A conversation is small enough for
 * the exhaustive ranking (measured on a 30K store: conversation-scoped top-k no faster), and its
 * own rows would double the pages each write dirties.
 */
const LEXICAL_SCOPES = [TENANT_SCOPE] as const;
export type KeyKind = "entity" | "topic";

export const SCOPE_COUNTS_SQL = `
CREATE TABLE lexical_terms (
  tenant TEXT NOT NULL,
  kind TEXT NOT NULL,
  scope TEXT NOT NULL,
  term TEXT NOT NULL,
  df INTEGER NOT NULL,
  max_tf INTEGER,
  min_len_per_tf REAL,
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

/** The distinct terms of a stored term string with their counts. */
const termCounts = (lex: string): Map<string, number> => {
  const tf = new Map<string, number>();
  if (lex.length > 0) for (const t of lex.split(" ")) tf.set(t, (tf.get(t) ?? 0) + 1);
  return tf;
};

const UPSERT_TERMS = `INSERT INTO lexical_terms (tenant, kind, scope, term, df, max_tf, min_len_per_tf)
  VALUES (?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (tenant, kind, scope, term) DO UPDATE SET df = df + excluded.df,
    max_tf = MAX(max_tf, excluded.max_tf), min_len_per_tf = MIN(min_len_per_tf, excluded.min_len_per_tf)`;
const UPSERT_SCOPES = `INSERT INTO lexical_scopes (tenant, kind, scope, items, total_length) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (tenant, kind, scope) DO UPDATE SET items = items + excluded.items,
    total_length = total_length + excluded.total_length`;
const UPSERT_KEYS = `INSERT INTO key_counts (tenant, kind, scope, key, n) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (tenant, kind, scope, key) DO UPDATE SET n = n + excluded.n`;

/**
 * Additions to the kept counts gathered over one write transaction (new raw turns, new current
 * records) and written at its end, one upsert per row: the rows a write per item would give, in
 * fewer statements (a segment's items share many terms and their scopes).
 */
export class CountAdditions {
  private readonly terms = new Map<string, [string, string, string, string, number, number, number]>();
  private readonly scopes = new Map<string, [string, string, string, number, number]>();
  private readonly keys = new Map<string, [string, string, string, string, number]>();

  /** A raw turn or current record entering its lexical route's counts (its stored terms and length). */
  item(tenant: string, kind: LexicalKind, lex: string, length: number): void {
    const tf = termCounts(lex);
    for (const scope of LEXICAL_SCOPES) {
      for (const [term, f] of tf) {
        const id = `${tenant}\u0000${kind}\u0000${scope}\u0000${term}`;
        const row = this.terms.get(id);
        if (row) {
          row[4] += 1;
          row[5] = Math.max(row[5], f);
          row[6] = Math.min(row[6], length / f);
        } else this.terms.set(id, [tenant, kind, scope, term, 1, f, length / f]);
      }
      const id = `${tenant}\u0000${kind}\u0000${scope}`;
      const row = this.scopes.get(id);
      if (row) {
        row[3] += 1;
        row[4] += length;
      } else this.scopes.set(id, [tenant, kind, scope, 1, length]);
    }
  }

  /** A current record's distinct entity / topic keys (as its index rows hold them). */
  recordKeys(tenant: string, conversation: string, keys: readonly { kind: KeyKind; key: string }[]): void {
    for (const { kind, key } of keys) {
      for (const scope of [TENANT_SCOPE, conversationScope(conversation)]) {
        const id = `${tenant}\u0000${kind}\u0000${scope}\u0000${key}`;
        const row = this.keys.get(id);
        if (row) row[4] += 1;
        else this.keys.set(id, [tenant, kind, scope, key, 1]);
      }
    }
  }

  /** Writes what was gathered (in the caller's transaction) and starts over. */
  write(sql: SqlRunner): void {
    for (const row of this.terms.values()) sql.run(UPSERT_TERMS, ...row);
    for (const row of this.scopes.values()) sql.run(UPSERT_SCOPES, ...row);
    for (const row of this.keys.values()) sql.run(UPSERT_KEYS, ...row);
    this.terms.clear();
    this.scopes.clear();
    this.keys.clear();
  }
}

/**
 * One item entering (+1) or leaving (-1) what a lexical route admits in its tenant: its distinct
 * terms' statistics, the scope's items and total length.
 */
export const adjustLexical = (
  sql: SqlRunner,
  tenant: string,
  kind: LexicalKind,
  lex: string,
  length: number,
  sign: 1 | -1,
  erased = false,
): void => {
  const tf = termCounts(lex);
  for (const scope of LEXICAL_SCOPES) {
    for (const [term, f] of tf) {
      if (sign > 0) {
        sql.run(
          `INSERT INTO lexical_terms (tenant, kind, scope, term, df, max_tf, min_len_per_tf) VALUES (?, ?, ?, ?, 1, ?, ?)
           ON CONFLICT (tenant, kind, scope, term) DO UPDATE SET df = df + 1,
             max_tf = MAX(max_tf, excluded.max_tf), min_len_per_tf = MIN(min_len_per_tf, excluded.min_len_per_tf)`,
          tenant,
          kind,
          scope,
          term,
          f,
          length / f,
        );
      } else {
        sql.run(
          erased
            ? `UPDATE lexical_terms SET df = df - 1, max_tf = NULL, min_len_per_tf = NULL
               WHERE tenant = ? AND kind = ? AND scope = ? AND term = ?`
            : "UPDATE lexical_terms SET df = df - 1 WHERE tenant = ? AND kind = ? AND scope = ? AND term = ?",
          tenant,
          kind,
          scope,
          term,
        );
      }
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
      if (tf.size > 0) {
        sql.run(
          `DELETE FROM lexical_terms WHERE tenant = ? AND kind = ? AND scope = ?
           AND term IN (SELECT value FROM json_each(?)) AND df <= 0`,
          tenant,
          kind,
          scope,
          JSON.stringify([...tf.keys()]),
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
export const adjustCurrentRecord = (
  sql: SqlRunner,
  tenant: string,
  recordId: string,
  sign: 1 | -1,
  erased = false,
): void => {
  const row = sql.all<{ conversation: string; lex: string | null; lex_len: number }>(
    `SELECT r.conversation AS conversation, f.lex AS lex, r.lex_len AS lex_len
     FROM records r LEFT JOIN records_terms f ON f.seq = r.seq WHERE r.tenant = ? AND r.id = ?`,
    tenant,
    recordId,
  )[0];
  if (!row) return;
  if (row.lex !== null) adjustLexical(sql, tenant, "record", row.lex, row.lex_len, sign, erased);
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

/** The kept statistics a tenant-wide lexical search reads: the tenant's counts and its terms' statistics. */
export const readLexicalStatistics = (
  sql: SqlRunner,
  tenant: string,
  kind: LexicalKind,
  terms: readonly string[],
): LexicalStatistics => {
  const scope = TENANT_SCOPE;
  const counts = sql.all<LexicalScope>(
    "SELECT items, total_length AS totalLength FROM lexical_scopes WHERE tenant = ? AND kind = ? AND scope = ?",
    tenant,
    kind,
    scope,
  )[0] ?? { items: 0, totalLength: 0 };
  const rows = sql.all<{ term: string; df: number; maxTf: number | null; minLengthPerTf: number | null }>(
    `SELECT term, df, max_tf AS maxTf, min_len_per_tf AS minLengthPerTf FROM lexical_terms
     WHERE tenant = ? AND kind = ? AND scope = ? AND term IN (SELECT value FROM json_each(?))`,
    tenant,
    kind,
    scope,
    JSON.stringify(terms),
  );
  return { scope: counts, terms: new Map(rows.map(({ term, ...stats }) => [term, stats])) };
};

/**
 * The tenant's kept terms of one kind from `from` (inclusive) to `to` (exclusive), the first
 * `limit` in term order, of those whose length is within `lengths`: the candidates of the
 * misspelling tolerance (vocabulary.ts). A range of the primary key; no full-text index is read.
 */
export const readLexicalTermsInRange = (
  sql: SqlRunner,
  tenant: string,
  kind: LexicalKind,
  range: { from: string; to: string; limit: number },
  lengths: { min: number; max: number },
): string[] =>
  sql
    .all<{ term: string }>(
      `SELECT term FROM (SELECT term FROM lexical_terms
         WHERE tenant = ? AND kind = ? AND scope = ? AND term >= ? AND term < ? LIMIT ?)
       WHERE length(term) BETWEEN ? AND ?`,
      tenant,
      kind,
      TENANT_SCOPE,
      range.from,
      range.to,
      range.limit,
      lengths.min,
      lengths.max,
    )
    .map((r) => r.term);

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
 * Migration 9's backfill: the counts of every existing store, from its rows: the lexical ones from
 * the full-text rows' terms (what the search finds) as the writes gather them (CountAdditions),
 * the key counts in SQL.
 */
export const backfillScopeCounts = (db: SqliteDatabase): void => {
  for (const kind of ["record", "turn"] as const) {
    const read =
      kind === "record"
        ? `SELECT r.tenant AS tenant, r.conversation AS conversation, f.lex AS lex, r.lex_len AS length
           FROM records r JOIN records_fts f ON f.rowid = r.seq WHERE r.superseded_by IS NULL`
        : `SELECT t.tenant AS tenant, t.conversation AS conversation, f.lex AS lex, t.lex_len AS length
           FROM turns t JOIN turns_fts f ON f.rowid = t.seq`;
    const additions = new CountAdditions();
    for (const row of db
      .prepare<[], { tenant: string; conversation: string; lex: string; length: number }>(read)
      .iterate()) {
      additions.item(row.tenant, kind, row.lex, row.length);
    }
    const statements = new Map<string, ReturnType<typeof db.prepare<Param[]>>>();
    additions.write({
      all: () => [],
      run: (text, ...params) => {
        let statement = statements.get(text);
        if (!statement) {
          statement = db.prepare<Param[]>(text);
          statements.set(text, statement);
        }
        return statement.run(...params);
      },
    });
  }
  const conv = (c: string): string => `'${conversationScope("")}' || ${c}`;
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
