/**
 * The full-text rows of records and raw turns: each item's FTS5 row (records_fts, turns_fts: its
 * terms under its tenant's prefix and its scope tokens, fts-scope.ts; indexed only, no content
 * kept since migration 13) and, with the same rowid, its stored terms, tenant and conversation in
 * a plain table (records_terms, turns_terms; migration 11), written and deleted together.
 * Whatever reads an item's terms reads the plain table.
 *
 * Why a plain table: the lexical routes score every posted item from its stored terms (core/
 * lexical.ts: exact BM25 needs each item's term counts and length), and FTS5 read a column of a
 * matched row through a statement of its own on its content table, once per row: about half of a
 * postings read's cost on a tenant of 20,000 records. Joined to a plain table in the same statement,
 * the same terms cost a rowid seek (issue 18), and FTS5 no longer keeps a copy (migration 13). FTS5
 * still decides which items match; the plain table gives their terms, tenant and conversation.
 */

import { ftsTermsText, scopeMatch } from "./fts-scope.ts";

type Param = string | number | bigint | null;

/** The store's cached-statement runner (graph-transaction.ts SqlRunner; declared here, no import cycle). */
interface SqlRunner {
  run(sql: string, ...params: Param[]): unknown;
}

export type FullTextKind = "records" | "turns";

/**
 * Writes an item's FTS5 row (its terms under the tenant's prefix) and its stored-terms row (the
 * terms as they are; a leftover terms row of a reused rowid is replaced).
 */
export const insertFullTextRow = (
  sql: SqlRunner,
  kind: FullTextKind,
  seq: number | bigint,
  tenant: string,
  conversation: string,
  lex: string,
  scope: string,
): void => {
  sql.run(`INSERT INTO ${kind}_fts (rowid, lex, scope) VALUES (?, ?, ?)`, seq, ftsTermsText(tenant, lex), scope);
  sql.run(
    `INSERT OR REPLACE INTO ${kind}_terms (seq, tenant, conversation, lex) VALUES (?, ?, ?, ?)`,
    seq,
    tenant,
    conversation,
    lex,
  );
};

/** Deletes the full-text rows (both tables) whose rowid the subquery `seqs` selects. */
export const deleteFullTextRowsOf = (sql: SqlRunner, kind: FullTextKind, seqs: string, ...params: Param[]): void => {
  sql.run(`DELETE FROM ${kind}_fts WHERE rowid IN (${seqs})`, ...params);
  sql.run(`DELETE FROM ${kind}_terms WHERE seq IN (${seqs})`, ...params);
};

/** Deletes the full-text rows (both tables) of a tenant, or of one of its conversations. */
export const deleteFullTextRowsIn = (
  sql: SqlRunner,
  kind: FullTextKind,
  tenant: string,
  conversation?: string,
): void => {
  const where = conversation === undefined ? "tenant = ?" : "tenant = ? AND conversation = ?";
  const params = conversation === undefined ? [tenant] : [tenant, conversation];
  // The FTS5 table keeps no content (migration 13): its rows of the scope are found by their scope
  // token, so a row whose stored-terms row is gone goes too.
  sql.run(
    `DELETE FROM ${kind}_fts WHERE rowid IN (SELECT rowid FROM ${kind}_fts WHERE ${kind}_fts MATCH ?)`,
    scopeMatch(tenant, conversation),
  );
  sql.run(`DELETE FROM ${kind}_terms WHERE ${where}`, ...params);
};

/**
 * The posted items of a MATCH (key = rowid, stored terms) in a tenant, or in one of its
 * conversations (then with a LIMIT parameter): FTS5 finds the rowids, the terms table gives the
 * terms and checks the tenant and conversation (CROSS JOIN: from each matched rowid to its row).
 */
export const postingsSql = (kind: FullTextKind, inConversation: boolean): string =>
  `SELECT ${kind}_fts.rowid AS key, s.lex AS lex FROM ${kind}_fts CROSS JOIN ${kind}_terms s ON s.seq = ${kind}_fts.rowid
   WHERE ${kind}_fts MATCH ? AND s.tenant = ?${inConversation ? " AND s.conversation = ? LIMIT ?" : ""}`;
