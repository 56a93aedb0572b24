/**
 * The SQLite side of the transactional port (GraphTransactions): the primitive reads and writes the
 * consolidation and erasure rules (services/consolidator/apply.ts, erasure.ts) run over, inside
 * the graph store's synchronous better-sqlite3 transaction. No rule lives here: only how a read or
 * a write is done in SQL (deletes also clear the FTS5 and index rows derived from a record).
 */
import type { TransactionReads, TransactionView, TransactionWrites } from "../../ports.ts";
import type { MemoryRecord } from "../../types.ts";
import { deleteFullTextRowsIn, deleteFullTextRowsOf } from "./full-text-rows.ts";
import { adjustCurrentRecord, adjustLexical, isCurrent } from "./scope-counts.ts";

export type Param = string | number | bigint | null;

/** Runs cached statements on the store's handle. */
export interface SqlRunner {
  all<T>(sql: string, ...params: Param[]): T[];
  run(sql: string, ...params: Param[]): { changes: number; lastInsertRowid: number | bigint };
}

interface JsonRow {
  id: string;
  json: string;
}

const ms = (iso: string): number => {
  const v = Date.parse(iso);
  if (Number.isNaN(v)) throw new Error(`not a timestamp: ${iso}`);
  return v;
};

/** A JSON array parameter for `IN (SELECT value FROM json_each(?))`: any number of values, one statement. */
const jsonList = (values: readonly string[]): string => JSON.stringify(values);

const uniq = (values: readonly string[]): string[] => [...new Set(values)];

/** Tables keyed by (tenant, record id) that hold a record's derived index rows. */
const RECORD_INDEX_TABLES = ["record_entities", "record_topics", "record_days", "event_frames"] as const;

/**
 * Rewrites a stored record's JSON and the columns derived from its validity; a record that becomes
 * superseded (or current again) leaves (or re-enters) the kept counts (scope-counts.ts).
 */
export const writeRecordJson = (sql: SqlRunner, tenant: string, record: MemoryRecord): void => {
  const wasCurrent = isCurrent(sql, tenant, record.id);
  const nowCurrent = (record.valid.supersededBy ?? null) === null;
  if (wasCurrent !== undefined && wasCurrent !== nowCurrent)
    adjustCurrentRecord(sql, tenant, record.id, nowCurrent ? 1 : -1);
  sql.run(
    "UPDATE records SET json = ?, valid_to = ?, superseded_by = ? WHERE tenant = ? AND id = ?",
    JSON.stringify(record),
    record.valid.to ? ms(record.valid.to) : null,
    record.valid.supersededBy ?? null,
    tenant,
    record.id,
  );
};

/** What the rule asked to read, in the transaction. */
export const readView = (sql: SqlRunner, tenant: string, reads: TransactionReads): TransactionView => {
  const records = new Map<string, MemoryRecord>();
  if (reads.records && reads.records.length > 0) {
    for (const row of sql.all<JsonRow>(
      "SELECT id, json FROM records WHERE tenant = ? AND id IN (SELECT value FROM json_each(?))",
      tenant,
      jsonList(uniq(reads.records)),
    )) {
      records.set(row.id, JSON.parse(row.json) as MemoryRecord);
    }
  }
  const conversation = reads.conversation;
  if (conversation === undefined) {
    return { records, conversation: { recordIds: [], turnIds: [], complete: true, dependants: [] } };
  }
  const limit = reads.limit;
  const limited = (query: string, room: number | undefined): string[] =>
    room === undefined
      ? sql.all<{ id: string }>(query, tenant, conversation).map((r) => r.id)
      : room > 0
        ? sql.all<{ id: string }>(`${query} LIMIT ?`, tenant, conversation, room).map((r) => r.id)
        : [];
  const recordIds = limited("SELECT id FROM records WHERE tenant = ? AND conversation = ?", limit);
  const turnIds = limited(
    "SELECT turn_id AS id FROM turns WHERE tenant = ? AND conversation = ?",
    limit === undefined ? undefined : limit - recordIds.length,
  );
  const complete = limit === undefined || recordIds.length + turnIds.length < limit;
  // Every step reads the records its own records supersede (by index); the last also reads the
  // records carrying merged sources (by the partial index records_merged, migration 16). Two
  // statements: under an OR, or merged in a UNION, SQLite read the tenant's records in id order.
  const dependants = new Map<string, MemoryRecord>();
  if (reads.dependants !== false) {
    const rows = sql.all<JsonRow>(
      `SELECT id, json FROM records WHERE tenant = ? AND conversation <> ?
       AND superseded_by IN (SELECT value FROM json_each(?))`,
      tenant,
      conversation,
      jsonList(recordIds),
    );
    if (complete) {
      rows.push(
        ...sql.all<JsonRow>(
          `SELECT id, json FROM records WHERE tenant = ? AND conversation <> ?
           AND json_extract(json, '$.mergedSources') IS NOT NULL`,
          tenant,
          conversation,
        ),
      );
    }
    for (const r of rows) if (!dependants.has(r.id)) dependants.set(r.id, JSON.parse(r.json) as MemoryRecord);
  }
  return { records, conversation: { recordIds, turnIds, complete, dependants: [...dependants.values()] } };
};

/** The rule's writes, in the order TransactionWrites lists them. */
export const applyWrites = (sql: SqlRunner, tenant: string, writes: TransactionWrites): void => {
  for (const record of writes.records ?? []) writeRecordJson(sql, tenant, record);
  for (const r of writes.relations ?? []) {
    sql.run(
      `INSERT INTO record_relations (tenant, from_id, to_id, relation, at, reason) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT DO NOTHING`,
      tenant,
      r.from,
      r.to,
      r.relation,
      r.at,
      r.reason ?? null,
    );
  }
  for (const c of writes.settled?.rows ?? []) {
    sql.run(
      `UPDATE update_candidates SET status = 'done', decision = ?, decided_at = ?
       WHERE tenant = ? AND record_id = ? AND candidate_id = ?`,
      c.decision,
      writes.settled?.decidedAt ?? null,
      tenant,
      c.recordId,
      c.candidateId,
    );
  }
  if (writes.deleteRecords && writes.deleteRecords.length > 0) deleteRecords(sql, tenant, writes.deleteRecords);
  if (writes.deleteTurns && writes.deleteTurns.turnIds.length > 0) {
    deleteRawTurnRows(sql, tenant, writes.deleteTurns.conversation, writes.deleteTurns.turnIds);
  }
  if (writes.deleteConversation !== undefined) deleteConversationRows(sql, tenant, writes.deleteConversation);
  for (const key of writes.deleteDeadLetters ?? []) {
    sql.run("DELETE FROM dead_letters WHERE tenant = ? AND key = ?", tenant, key);
  }
};

/** Records with their full-text and index rows, and the candidates and edges touching them. */
const deleteRecords = (sql: SqlRunner, tenant: string, ids: readonly string[]): void => {
  for (const id of uniq(ids)) if (isCurrent(sql, tenant, id)) adjustCurrentRecord(sql, tenant, id, -1, true);
  const list = jsonList(uniq(ids));
  deleteFullTextRowsOf(
    sql,
    "records",
    "SELECT seq FROM records WHERE tenant = ? AND id IN (SELECT value FROM json_each(?))",
    tenant,
    list,
  );
  for (const table of RECORD_INDEX_TABLES) {
    sql.run(`DELETE FROM ${table} WHERE tenant = ? AND record_id IN (SELECT value FROM json_each(?))`, tenant, list);
  }
  // One statement per side, each through its index: with the two sides OR-ed in one, SQLite read
  // every candidate row of the tenant (60-70 ms for a tenant of ~70K candidates on the 100K scale
  // store, in an erasure's transaction, which holds the event loop).
  sql.run(
    "DELETE FROM update_candidates WHERE tenant = ? AND record_id IN (SELECT value FROM json_each(?))",
    tenant,
    list,
  );
  sql.run(
    "DELETE FROM update_candidates WHERE tenant = ? AND candidate_id IN (SELECT value FROM json_each(?))",
    tenant,
    list,
  );
  sql.run(
    "DELETE FROM record_relations WHERE tenant = ? AND from_id IN (SELECT value FROM json_each(?))",
    tenant,
    list,
  );
  sql.run("DELETE FROM record_relations WHERE tenant = ? AND to_id IN (SELECT value FROM json_each(?))", tenant, list);
  sql.run("DELETE FROM records WHERE tenant = ? AND id IN (SELECT value FROM json_each(?))", tenant, list);
};

/** A conversation's segments and raw turns with their full-text rows (and any full-text row left of its records). */
const deleteConversationRows = (sql: SqlRunner, tenant: string, conversation: string): void => {
  // The kept lexical counts lose every full-text row deleted here (records normally went first).
  for (const r of sql.all<{ lex: string; lex_len: number }>(
    `SELECT f.lex AS lex, r.lex_len AS lex_len FROM records r JOIN records_terms f ON f.seq = r.seq
     WHERE r.tenant = ? AND r.conversation = ? AND r.superseded_by IS NULL`,
    tenant,
    conversation,
  )) {
    adjustLexical(sql, tenant, "record", r.lex, r.lex_len, -1, true);
  }
  deleteFullTextRowsIn(sql, "records", tenant, conversation);
  deleteRawTurnRows(sql, tenant, conversation);
  sql.run("DELETE FROM segments WHERE tenant = ? AND conversation = ?", tenant, conversation);
};

/**
 * The raw turns of a conversation (or, with none, of the tenant; with `turnIds`, those of the
 * conversation only: a step of its erasure) with their full-text rows, the kept lexical counts
 * losing each; returns how many turn rows went. A conversation's erasure runs it (above); alone it
 * is GraphMaintenance.deleteRawTurns, what the indexer's raw-turn consumer erases (records and
 * segments are the records consumer's). Run inside a transaction.
 */
export const deleteRawTurnRows = (
  sql: SqlRunner,
  tenant: string,
  conversation: string | undefined,
  turnIds?: readonly string[],
): number => {
  const some = conversation !== undefined && turnIds !== undefined;
  const scope = (t: string) =>
    conversation === undefined
      ? `${t}tenant = ?`
      : `${t}tenant = ? AND ${t}conversation = ?${some ? ` AND ${t}turn_id IN (SELECT value FROM json_each(?))` : ""}`;
  const params =
    conversation === undefined ? [tenant] : [tenant, conversation, ...(some ? [jsonList(uniq(turnIds))] : [])];
  for (const t of sql.all<{ lex: string; lex_len: number }>(
    `SELECT f.lex AS lex, t.lex_len AS lex_len FROM turns t JOIN turns_terms f ON f.seq = t.seq
     WHERE ${scope("t.")}`,
    ...params,
  )) {
    adjustLexical(sql, tenant, "turn", t.lex, t.lex_len, -1, true);
  }
  // Both full-text tables (FTS5 and the stored terms, full-text-rows.ts), by the turns' rowids and,
  // for a whole scope, by their own columns too: a full-text row whose turn row is already gone.
  deleteFullTextRowsOf(sql, "turns", `SELECT seq FROM turns WHERE ${scope("")}`, ...params);
  if (!some) deleteFullTextRowsIn(sql, "turns", tenant, conversation);
  return sql.run(`DELETE FROM turns WHERE ${scope("")}`, ...params).changes;
};
