/**
 * Erasure of raw turns alone (GraphMaintenance.deleteRawTurns): what the indexer's raw-turn consumer
 * writes, so all it erases; records, segments and the rest are the records consumer's to erase.
 * The kept lexical counts lose each deleted turn's full-text row, as in a conversation's erasure.
 */
import { deleteFullTextRowsIn, deleteFullTextRowsOf } from "./full-text-rows.ts";
import type { SqlRunner } from "./graph-transaction.ts";
import { adjustLexical } from "./scope-counts.ts";

/** Deletes the raw turns of the conversation (or, with none, of the tenant); returns how many. Run inside a transaction. */
export const deleteRawTurnRows = (sql: SqlRunner, tenant: string, conversation: string | undefined): number => {
  const scope = (t: string) =>
    conversation === undefined ? `${t}tenant = ?` : `${t}tenant = ? AND ${t}conversation = ?`;
  const where = scope("");
  const params = conversation === undefined ? [tenant] : [tenant, conversation];
  for (const t of sql.all<{ lex: string; lex_len: number }>(
    `SELECT f.lex AS lex, t.lex_len AS lex_len FROM turns t JOIN turns_fts f ON f.rowid = t.seq
     WHERE ${scope("t.")}`,
    ...params,
  )) {
    adjustLexical(sql, tenant, "turn", t.lex, t.lex_len, -1, true);
  }
  // Both full-text tables (FTS5 and the stored terms, full-text-rows.ts), by the turns' rowids and
  // by their own columns too: a full-text row whose turn row is already gone.
  deleteFullTextRowsOf(sql, "turns", `SELECT seq FROM turns WHERE ${where}`, ...params);
  deleteFullTextRowsIn(sql, "turns", tenant, conversation);
  return sql.run(`DELETE FROM turns WHERE ${where}`, ...params).changes;
};
