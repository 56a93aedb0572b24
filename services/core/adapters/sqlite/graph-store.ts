import { setImmediate as nextTurn } from "node:timers/promises";
import type BetterSqlite3 from "better-sqlite3";
import { CursorCodec } from "../../cursor.ts";
import type { ConversationSummary, SegmentKey } from "../../explorer.ts";
import { turnRowId } from "../../ids.ts";
import { parseConversationKey } from "../../keys.ts";
import {
  type ItemIdentity,
  LEXICAL_POOL_LIMIT,
  type LexicalFind,
  type LexicalHit,
  type LexicalScope,
  lexicalText,
  type PostedItem,
  searchLexical,
  searchLexicalTopK,
} from "../../lexical.ts";
import type {
  ApplyHooks,
  GraphStore,
  IndexBatch,
  RecordPage,
  RecordQuery,
  RecordRelation,
  RecordRelationKind,
  ScoredId,
  StoredTurn,
  TimeWindow,
  TransactionReads,
  TransactionView,
  TransactionWrites,
} from "../../ports.ts";
import { OPEN_SEGMENT_ID } from "../../ports.ts";
import { DAY_MS, entityKeys, normaliseKey, recordSpan, spanBuckets, topicKeys } from "../../record-index.ts";
import type { Neighbour } from "../../text/fuzzy-terms.ts";
import { inAskedOrder } from "../../turn-order.ts";
import type { DeadLetter, MemoryRecord, Segment, SegmentTurn, UpdateCandidate } from "../../types.ts";
import { walCheckpointerOf } from "../sqlite-checkpoints.ts";
import { migrate, openSqlite, type SqliteDatabase, truncateWal } from "../sqlite-db.ts";
import { ftsScopeText, lexRank, scopedMatch, tenantTermsQuery } from "./fts-scope.ts";
import { FTS_TABLES, mergeIntoOne, mergeSegmentsStep, prepareSegmentMerge } from "./fts-segments.ts";
import { deleteFullTextRowsIn, deleteFullTextRowsOf, insertFullTextRow, postingsSql } from "./full-text-rows.ts";
import { applyWrites, deleteRawTurnRows, type Param, readView, type SqlRunner } from "./graph-transaction.ts";
import { type KeyRow, rankByMergedWalkWithin } from "./keys-walk.ts";
import { GRAPH_MIGRATIONS } from "./schema.ts";
import {
  adjustCurrentRecord,
  CountAdditions,
  deleteTenantCounts,
  isCurrent,
  readKeyCount,
  readLexicalStatistics,
} from "./scope-counts.ts";
import { UnchangedDataMemo } from "./unchanged-data-memo.ts";
import { SqliteVocabulary } from "./vocabulary.ts";

type Statement = BetterSqlite3.Statement<Param[], unknown>;

interface JsonRow {
  id: string;
  json: string;
}
interface PageRow extends JsonRow {
  said_at: number;
}
interface ScoreRow {
  id: string;
  score: number;
}
interface TurnRow {
  tenant: string;
  conversation: string;
  turn_id: string;
  segment_id: string;
  speaker: string;
  role: string;
  text: string;
  compressed: string;
  timestamp: string;
  session_id: string;
}
interface RelationRow {
  from_id: string;
  to_id: string;
  relation: string;
  at: string;
  reason: string | null;
}

export interface SqliteGraphStoreOptions {
  /** Close the database in close() (default false: whoever opened the shared handle closes it). */
  ownsDb?: boolean;
  /** HMAC secret of listing cursors (default: UNCONFIGURED_CURSOR_SECRET; servers pass cursorSecretOf(config)). */
  cursorSecret?: string;
  /** Results each read memo keeps (config cache.sqliteReadMemoEntries; default DEFAULT_READ_MEMO_ENTRIES). */
  readMemoEntries?: number;
}

/** Results each of the store's read memos keeps by default (the configuration's default too). */
export const DEFAULT_READ_MEMO_ENTRIES = 1024;

const ms = (iso: string): number => {
  const v = Date.parse(iso);
  if (Number.isNaN(v)) throw new Error(`not a timestamp: ${iso}`);
  return v;
};

/** A JSON array parameter for `IN (SELECT value FROM json_each(?))`: any number of values, one statement. */
const jsonList = (values: readonly string[]): string => JSON.stringify(values);

const uniq = (values: readonly string[]): string[] => [...new Set(values)];

/**
 * recordsByKeys, tenant-wide with one dominant key: the merged walk may read this many times the
 * rows the candidate read reads before it is given up (a row read in index order costs a fraction
 * of a candidate ranked by seeks).
 */
const MERGED_WALK_BUDGET = 4;

/**
 * Which versions a route reads: the current ones (not superseded), or for an as-of query those
 * valid at `validAt` (epoch ms; valid_from and valid_to are stored as epoch ms).
 */
export const validity = (validAt: number | undefined): { sql: string; params: Param[] } =>
  validAt === undefined
    ? { sql: " AND r.superseded_by IS NULL", params: [] }
    : { sql: " AND r.valid_from <= ? AND (r.valid_to IS NULL OR r.valid_to > ?)", params: [validAt, validAt] };

/**
 * Which of some record ids (a JSON array) of a tenant are valid by `validSql` (validity's sql):
 * answered from the records_validity index's pages, not the table rows (schema.ts, version 12).
 * The index is named: on a small store the planner takes the unique (tenant, id) index, which
 * reads each row.
 */
export const validIdsSql = (validSql: string): string =>
  `SELECT r.id AS id FROM json_each(?) j CROSS JOIN records r INDEXED BY records_validity
   ON r.tenant = ? AND r.id = j.value WHERE 1 = 1${validSql}`;

/**
 * The most superseded ids of a tenant kept in memory for the key walks' validity checks
 * (supersededOf); a tenant with more has each batch checked in the index, as before.
 */
const SUPERSEDED_IDS_KEPT = 4096;

/**
 * The lexical pool of a search (core/lexical.ts): every hit in scope when they number at most
 * LEXICAL_POOL_LIMIT, else the index's best LEXICAL_POOL_LIMIT. The shared scorer ranks the pool
 * itself, so the index's order only matters when the hits overflow it: they are read unordered
 * first (FTS5's BM25 and the sort of every hit were most of a search's cost) and read again in
 * rank order only on overflow.
 */
const poolOf = <T>(read: (ordered: boolean, limit: number) => T[]): T[] => {
  const all = read(false, LEXICAL_POOL_LIMIT + 1);
  return all.length <= LEXICAL_POOL_LIMIT ? all : read(true, LEXICAL_POOL_LIMIT);
};

/**
 * The MATCH of some terms' postings in a tenant, without the items holding any term in `without`
 * (read already by the top-k ranking), and, when `along` (LexicalPostings.postings) is one set of
 * terms, only the items also holding all of them: FTS5 intersects the term lists, so an item that
 * cannot enter the top k is never read from the full-text table. With several sets every item of
 * the term is read (allowed: the ranking scores them and they cannot enter): on a 100K-record
 * store a union of common terms' lists cost FTS5 more than reading the items it saved, while one
 * intersection cost less (issue 18).
 */
const termMatch = (
  terms: readonly string[],
  without: readonly string[],
  tenant: string,
  along: readonly (readonly string[])[] | undefined,
): string => {
  const scoped = scopedMatch(terms, tenant);
  const all = along?.length === 1 ? (along[0] as readonly string[]) : [];
  const companions = all.length === 0 ? scoped : `(${scoped}) AND lex : (${tenantTermsQuery(tenant, all, true)})`;
  return without.length === 0 ? companions : `(${companions}) NOT lex : (${tenantTermsQuery(tenant, without)})`;
};

/** Tenant of a dead letter from its partition key (keys.conversationKey; null when the key names no tenant). */
const tenantOfKey = (key: string): string | null => parseConversationKey(key)?.tenant ?? null;

const toStoredTurn = (r: TurnRow): StoredTurn => ({
  tenant: r.tenant,
  conversation: r.conversation,
  segmentId: r.segment_id,
  turnId: r.turn_id,
  speaker: r.speaker,
  role: r.role as SegmentTurn["role"],
  text: r.text,
  compressed: r.compressed,
  timestamp: r.timestamp,
  sessionId: r.session_id,
});

const toRelation = (r: RelationRow): RecordRelation => ({
  from: r.from_id,
  to: r.to_id,
  relation: r.relation as RecordRelationKind,
  at: r.at,
  ...(r.reason !== null ? { reason: r.reason } : {}),
});

const TURN_COLUMNS =
  "tenant, conversation, turn_id, segment_id, speaker, role, text, compressed, timestamp, session_id";

/** A result or failure nobody needs (checkpointsCaughtUp). */
const ignore = (): void => undefined;

/**
 * GraphStore over SQLite (better-sqlite3): records with entity/topic/day/event-frame index tables,
 * segments with their raw turns, FTS5 over the shared lexical terms of record and turn text (BM25
 * from services/core/lexical.ts, as every graph store ranks). Every statement is scoped
 * by tenant. Build it on a handle from `openSqlite(dataDir)` (shared with the state and vector
 * stores), or with `SqliteGraphStore.open(dataDir)`, which owns its handle.
 */
export class SqliteGraphStore implements GraphStore {
  readonly db: SqliteDatabase;
  private readonly ownsDb: boolean;
  private readonly cursors: CursorCodec;
  private readonly statements = new Map<string, Statement>();
  /** Results each read memo below keeps (SqliteGraphStoreOptions.readMemoEntries). */
  readonly readMemoEntries: number;
  /**
   * knownEntities / knownTopics by tenant and conversation, until any write (unchanged-data-memo.ts):
   * a tenant-wide read is a seek per distinct name (hundreds of topics), about 1.5 ms each at
   * 10,000 records per tenant, and every query made both.
   */
  private readonly knownNames: UnchangedDataMemo<readonly string[]>;
  /** countRecords the same way: tenant-wide, a count over the tenant's index (0.5–1 ms at 10,000 records). */
  private readonly recordCounts: UnchangedDataMemo<number>;
  /**
   * A tenant's superseded record ids the same way (null: more than SUPERSEDED_IDS_KEPT, then each
   * check reads the index): the tenant-wide key walks ask, batch after batch, which candidates are
   * current, a seek per candidate (1–3 ms over ~400 candidates on slow questions at 100K records),
   * where a key row's record exists by construction (written and deleted together) and is current
   * unless superseded.
   */
  private readonly supersededIds: UnchangedDataMemo<ReadonlySet<string> | null>;
  /** The cached-statement runner the transactional primitives (graph-transaction.ts) use. */
  private readonly sql: SqlRunner = {
    all: (sql, ...params) => this.all(sql, ...params),
    run: (sql, ...params) => this.run(sql, ...params),
  };
  private closed = false;
  /** The FTS tables' usermerge is set (mergeIndexSegments, once per store). */
  private mergePrepared = false;
  /** The lexical vocabulary reads (vocabulary.ts) on this store's cached statements. */
  private readonly vocabulary = new SqliteVocabulary(this.sql);

  constructor(db: SqliteDatabase, options: SqliteGraphStoreOptions = {}) {
    this.db = db;
    this.ownsDb = options.ownsDb ?? false;
    this.cursors = new CursorCodec(options.cursorSecret);
    this.readMemoEntries = options.readMemoEntries ?? DEFAULT_READ_MEMO_ENTRIES;
    this.knownNames = new UnchangedDataMemo(() => this.dataStamp(), this.readMemoEntries);
    this.recordCounts = new UnchangedDataMemo(() => this.dataStamp(), this.readMemoEntries);
    this.supersededIds = new UnchangedDataMemo(() => this.dataStamp(), this.readMemoEntries);
    migrate(db, "graph", GRAPH_MIGRATIONS);
  }

  /** A store with its own handle on `<dataDir>/memory.db`, closed by close(). */
  static open(dataDir: string): SqliteGraphStore {
    return new SqliteGraphStore(openSqlite(dataDir), { ownsDb: true });
  }

  private stmt(sql: string): Statement {
    if (this.closed) throw new Error("SqliteGraphStore is closed");
    let s = this.statements.get(sql);
    if (!s) {
      s = this.db.prepare<Param[], unknown>(sql);
      this.statements.set(sql, s);
    }
    return s;
  }

  /** Changes whenever the database does (another connection's commit, or a row this one changed). */
  private dataStamp(): string {
    const row = this.all<{ changes: number; version: number }>(
      "SELECT total_changes() AS changes, (SELECT data_version FROM pragma_data_version) AS version",
    )[0];
    return `${row?.version}:${row?.changes}`;
  }

  private all<T>(sql: string, ...params: Param[]): T[] {
    return this.stmt(sql).all(...params) as T[];
  }

  private run(sql: string, ...params: Param[]): { changes: number; lastInsertRowid: number | bigint } {
    return this.stmt(sql).run(...params);
  }

  private count(sql: string, ...params: Param[]): number {
    const row = this.stmt(sql).get(...params) as { n: number } | undefined;
    return row?.n ?? 0;
  }

  // ---------------------------------------------------------------------------------------------
  // Writes

  /**
   * Before a write transaction: when the checkpoint worker reported the log behind, the write
   * waits for one more copy first, the event loop free (sqlite-checkpoints.ts). Without a worker,
   * or with the log short, nothing (no await at all). A copy that fails (the worker died: its
   * owner logs that) does not fail the write: the main connection's own checkpoint bounds the log.
   */
  private checkpointsCaughtUp(): Promise<void> | undefined {
    const worker = walCheckpointerOf(this.db);
    return worker?.behind ? worker.catchUp().then(ignore, ignore) : undefined;
  }

  async writeBatch(batch: IndexBatch): Promise<void> {
    await this.checkpointsCaughtUp();
    const { tenant, segment } = batch;
    if (segment.tenant !== tenant) {
      throw new Error(
        `writeBatch: segment ${segment.id} belongs to tenant "${segment.tenant}", batch is for "${tenant}"`,
      );
    }
    for (const r of batch.records) {
      if (r.source.tenant !== tenant) {
        throw new Error(`writeBatch: record ${r.id} belongs to tenant "${r.source.tenant}", batch is for "${tenant}"`);
      }
    }
    const additions = new CountAdditions();
    this.db.transaction(() => {
      for (const record of batch.records) this.insertRecord(tenant, record, additions);
      for (const frame of batch.eventFrames) {
        for (const recordId of uniq(frame.recordIds)) {
          this.run(
            "INSERT INTO event_frames (tenant, frame_id, record_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            tenant,
            frame.id,
            recordId,
          );
        }
      }
      this.run(
        "INSERT INTO segments (tenant, conversation, id, json) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        tenant,
        segment.conversation,
        segment.id,
        JSON.stringify(segment),
      );
      for (const turn of segment.turns) {
        if (this.insertTurn(tenant, segment.conversation, segment.id, turn, additions)) continue;
        // Written ahead of its segment (writeTurns): the segment closed, the row now names it.
        this.run(
          "UPDATE turns SET segment_id = ? WHERE tenant = ? AND conversation = ? AND turn_id = ? AND segment_id = ?",
          segment.id,
          tenant,
          segment.conversation,
          turn.turnId,
          OPEN_SEGMENT_ID,
        );
      }
      additions.write(this.sql);
    })();
  }

  async writeTurns(tenant: string, conversation: string, turns: readonly SegmentTurn[]): Promise<void> {
    await this.checkpointsCaughtUp();
    const additions = new CountAdditions();
    this.db.transaction(() => {
      for (const turn of turns) this.insertTurn(tenant, conversation, OPEN_SEGMENT_ID, turn, additions);
      additions.write(this.sql);
    })();
  }

  /** Inserts a raw turn with its full-text row once (its counts into `additions`); false when it was there already. */
  private insertTurn(
    tenant: string,
    conversation: string,
    segmentId: string,
    turn: SegmentTurn,
    additions: CountAdditions,
  ): boolean {
    const info = this.run(
      `INSERT INTO turns (${TURN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      tenant,
      conversation,
      turn.turnId,
      segmentId,
      turn.speaker,
      turn.role,
      turn.text,
      turn.compressed,
      turn.timestamp,
      turn.sessionId,
    );
    if (info.changes !== 1) return false;
    const lex = lexicalText(turn.text);
    this.run("UPDATE turns SET lex_len = ? WHERE seq = ?", lex.length, info.lastInsertRowid);
    insertFullTextRow(
      this.sql,
      "turns",
      info.lastInsertRowid,
      tenant,
      conversation,
      lex.lex,
      ftsScopeText(tenant, conversation),
    );
    additions.item(tenant, "turn", lex.lex, lex.length);
    return true;
  }

  /**
   * Inserts a record and its index rows once (a current one's counts into `additions`); a replay
   * leaves the stored record (and any consolidation) as is.
   */
  private insertRecord(tenant: string, record: MemoryRecord, additions: CountAdditions): void {
    const span = recordSpan(record);
    const info = this.run(
      `INSERT INTO records (tenant, id, conversation, type, text, json, said_at, time_from, time_to, has_time,
         valid_from, valid_to, superseded_by, segment_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      tenant,
      record.id,
      record.source.conversation,
      record.type,
      record.text,
      JSON.stringify(record),
      ms(record.source.saidAt),
      span.from,
      span.to,
      span.explicit ? 1 : 0,
      ms(record.valid.from),
      record.valid.to ? ms(record.valid.to) : null,
      record.valid.supersededBy ?? null,
      record.source.segmentId,
    );
    if (info.changes !== 1) return;
    const lex = lexicalText(record.text);
    this.run("UPDATE records SET lex_len = ? WHERE seq = ?", lex.length, info.lastInsertRowid);
    insertFullTextRow(
      this.sql,
      "records",
      info.lastInsertRowid,
      tenant,
      record.source.conversation,
      lex.lex,
      ftsScopeText(tenant, record.source.conversation),
    );
    for (const e of entityKeys(record)) {
      this.run(
        "INSERT INTO record_entities (tenant, record_id, entity, name, is_alias, conversation, said_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        tenant,
        record.id,
        e.key,
        e.name,
        e.alias ? 1 : 0,
        record.source.conversation,
        ms(record.source.saidAt),
      );
    }
    for (const t of topicKeys(record)) {
      this.run(
        "INSERT INTO record_topics (tenant, record_id, topic, name, conversation, said_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        tenant,
        record.id,
        t.key,
        t.name,
        record.source.conversation,
        ms(record.source.saidAt),
      );
    }
    for (const b of spanBuckets(span)) {
      this.run(
        "INSERT INTO record_days (tenant, record_id, day, month) VALUES (?, ?, ?, ?)",
        tenant,
        record.id,
        b.day,
        b.month,
      );
    }
    if ((record.valid.supersededBy ?? null) === null) {
      additions.item(tenant, "record", lex.lex, lex.length);
      // One count per distinct key, as the index tables' primary keys keep them.
      const keys = [
        ...uniq(entityKeys(record).map((e) => e.key)).map((key) => ({ kind: "entity" as const, key })),
        ...uniq(topicKeys(record).map((t) => t.key)).map((key) => ({ kind: "topic" as const, key })),
      ];
      additions.recordKeys(tenant, record.source.conversation, keys);
    }
  }

  /**
   * Marks a record as superseded (consolidation; not part of the GraphStore port): sets
   * `valid.supersededBy` and `valid.to` (default now) in the stored record. Returns false when the
   * record is unknown for this tenant.
   */
  async supersede(tenant: string, recordId: string, supersededBy: string, validTo?: string): Promise<boolean> {
    return this.db.transaction(() => {
      const row = this.all<JsonRow>("SELECT id, json FROM records WHERE tenant = ? AND id = ?", tenant, recordId)[0];
      if (!row) return false;
      const record = JSON.parse(row.json) as MemoryRecord;
      if (isCurrent(this.sql, tenant, recordId)) adjustCurrentRecord(this.sql, tenant, recordId, -1);
      const to = validTo ?? record.valid.to ?? new Date().toISOString();
      record.valid = { ...record.valid, to, supersededBy };
      this.run(
        "UPDATE records SET json = ?, valid_to = ?, superseded_by = ? WHERE tenant = ? AND id = ?",
        JSON.stringify(record),
        ms(to),
        supersededBy,
        tenant,
        recordId,
      );
      return true;
    })();
  }

  /** Upserts candidates; a pair already settled by consolidation stays settled (its status is kept). */
  async putUpdateCandidates(candidates: readonly UpdateCandidate[]): Promise<void> {
    this.db.transaction(() => {
      for (const c of candidates) {
        this.run(
          `INSERT INTO update_candidates (tenant, record_id, candidate_id, json) VALUES (?, ?, ?, ?)
           ON CONFLICT (tenant, record_id, candidate_id) DO UPDATE SET json = excluded.json`,
          c.tenant,
          c.recordId,
          c.candidateId,
          JSON.stringify(c),
        );
      }
    })();
  }

  /** Update candidates of a tenant, pending and settled (not part of the port; for tests and tools). */
  async listUpdateCandidates(tenant: string, limit = 1000): Promise<UpdateCandidate[]> {
    return this.all<{ json: string }>(
      "SELECT json FROM update_candidates WHERE tenant = ? ORDER BY record_id, candidate_id LIMIT ?",
      tenant,
      Math.max(0, Math.floor(limit)),
    ).map((r) => JSON.parse(r.json) as UpdateCandidate);
  }

  /** Candidate rows with their consolidation status (not part of the port; for tests and tools). */
  async listCandidateStatus(
    tenant: string,
  ): Promise<{ recordId: string; candidateId: string; status: string; decision: string | null }[]> {
    return this.all<{ record_id: string; candidate_id: string; status: string; decision: string | null }>(
      "SELECT record_id, candidate_id, status, decision FROM update_candidates WHERE tenant = ? ORDER BY record_id, candidate_id",
      tenant,
    ).map((r) => ({ recordId: r.record_id, candidateId: r.candidate_id, status: r.status, decision: r.decision }));
  }

  async pendingUpdateCandidates(tenant: string, maxRecords: number): Promise<UpdateCandidate[]> {
    const limit = Math.floor(maxRecords);
    if (!(limit > 0)) return [];
    return this.all<{ json: string }>(
      `WITH picked AS (
         SELECT u.record_id AS record_id, COALESCE(MIN(r.said_at), 0) AS said_at
         FROM update_candidates u LEFT JOIN records r ON r.tenant = u.tenant AND r.id = u.record_id
         WHERE u.tenant = ? AND u.status = 'pending'
         GROUP BY u.record_id ORDER BY said_at, u.record_id LIMIT ?
       )
       SELECT u.json AS json FROM update_candidates u JOIN picked p ON p.record_id = u.record_id
       WHERE u.tenant = ? AND u.status = 'pending'
       ORDER BY p.said_at, u.record_id, u.candidate_id`,
      tenant,
      limit,
      tenant,
    ).map((r) => JSON.parse(r.json) as UpdateCandidate);
  }

  async tenantsWithPendingCandidates(): Promise<string[]> {
    return this.all<{ tenant: string }>(
      "SELECT DISTINCT tenant FROM update_candidates WHERE status = 'pending' ORDER BY tenant",
    ).map((r) => r.tenant);
  }

  async countPendingCandidates(tenant?: string): Promise<number> {
    return tenant === undefined
      ? this.count("SELECT COUNT(*) AS n FROM update_candidates WHERE status = 'pending'")
      : this.count("SELECT COUNT(*) AS n FROM update_candidates WHERE tenant = ? AND status = 'pending'", tenant);
  }

  /**
   * One write transaction for the consolidation and erasure rules (services/consolidator/apply.ts,
   * erasure.ts). better-sqlite3 transactions are synchronous, which is why `decide` is: nothing
   * else on the shared handle can run between the reads and the writes.
   */
  async transact<T>(
    tenant: string,
    reads: TransactionReads,
    decide: (view: TransactionView) => { writes: TransactionWrites; result: T },
    hooks: ApplyHooks = {},
  ): Promise<T> {
    await this.checkpointsCaughtUp();
    return this.db.transaction(() => {
      const { writes, result } = decide(readView(this.sql, tenant, reads));
      applyWrites(this.sql, tenant, writes);
      hooks.beforeCommit?.();
      return result;
    })();
  }

  async relationsOf(tenant: string, ids: readonly string[]): Promise<RecordRelation[]> {
    if (ids.length === 0) return [];
    const list = jsonList(uniq(ids));
    // Each side through its index (OR-ed in one WHERE, SQLite read every relation of the tenant);
    // a row found from both sides is one row (UNION: its key is among the columns).
    return this.all<RelationRow>(
      `SELECT from_id, to_id, relation, at, reason FROM record_relations
       WHERE tenant = ? AND from_id IN (SELECT value FROM json_each(?))
       UNION
       SELECT from_id, to_id, relation, at, reason FROM record_relations
       WHERE tenant = ? AND to_id IN (SELECT value FROM json_each(?))
       ORDER BY at, from_id, to_id, relation`,
      tenant,
      list,
      tenant,
      list,
    ).map(toRelation);
  }

  async putDeadLetter(letter: DeadLetter): Promise<void> {
    this.run(
      `INSERT INTO dead_letters (tenant, stage, key, error, payload, at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT DO NOTHING`,
      tenantOfKey(letter.key),
      letter.stage,
      letter.key,
      letter.error,
      letter.payload,
      letter.at,
    );
  }

  /** Newest first. */
  async listDeadLetters(limit: number): Promise<DeadLetter[]> {
    return this.all<DeadLetter>(
      "SELECT stage, key, error, payload, at FROM dead_letters ORDER BY seq DESC LIMIT ?",
      Math.max(0, Math.floor(limit)),
    ).map((r) => ({ stage: r.stage, key: r.key, error: r.error, payload: r.payload, at: r.at }));
  }

  /** In one transaction, so the ids returned are exactly the records deleted. */
  async deleteTenant(tenant: string): Promise<string[]> {
    return this.db.transaction(() => {
      const erased = this.all<{ id: string }>("SELECT id FROM records WHERE tenant = ?", tenant).map((r) => r.id);
      this.deleteTenantRows(tenant);
      return erased;
    })();
  }

  async tenantConversations(tenant: string): Promise<string[]> {
    return this.all<{ conversation: string }>(
      `SELECT conversation FROM records WHERE tenant = ?
       UNION SELECT conversation FROM segments WHERE tenant = ? ORDER BY conversation`,
      tenant,
      tenant,
    ).map((r) => r.conversation);
  }

  /** One transaction: the check and the deletes see the same rows (SQLite has one writer at a time). */
  async deleteTenantIfEmpty(tenant: string): Promise<boolean> {
    return this.db.transaction(() => {
      if (this.all("SELECT 1 FROM records WHERE tenant = ? LIMIT 1", tenant).length > 0) return false;
      this.deleteTenantRows(tenant);
      return true;
    })();
  }

  /** Every row of the tenant, whatever table; inside the caller's transaction. */
  private deleteTenantRows(tenant: string): void {
    deleteFullTextRowsOf(this.sql, "records", "SELECT seq FROM records WHERE tenant = ?", tenant);
    deleteFullTextRowsIn(this.sql, "records", tenant);
    deleteFullTextRowsOf(this.sql, "turns", "SELECT seq FROM turns WHERE tenant = ?", tenant);
    deleteFullTextRowsIn(this.sql, "turns", tenant);
    deleteTenantCounts(this.sql, tenant);
    for (const table of [
      "records",
      "record_entities",
      "record_topics",
      "record_days",
      "event_frames",
      "segments",
      "turns",
      "update_candidates",
      "record_relations",
      "dead_letters",
    ]) {
      this.run(`DELETE FROM ${table} WHERE tenant = ?`, tenant);
    }
  }

  async deleteRawTurns(tenant: string, conversation?: string): Promise<number> {
    return this.db.transaction(() => deleteRawTurnRows(this.sql, tenant, conversation))();
  }

  /**
   * After an erasure: no trace of the deleted rows in memory.db or its write-ahead log. Deleted
   * cells and pages are already zeroed (secure_delete, ../sqlite-db.ts) and FTS5 removes deleted terms at once
   * (secure-delete, schema v4); the FTS segments are also merged into one (mergeIntoOne), so no older segment
   * or segment-index entry keeps a term. Then the WAL, whose page images predate the delete, is
   * checkpointed and truncated. The handle is shared, so this covers the state store and the durable
   * log too: call it after every store's deletes. Cost: the FTS rewrite is linear in the index size
   * (about 0.2 s for 100k items of 20 terms), in steps of a few milliseconds with a turn of the event
   * loop between two; a single 'optimize' held the event loop that long.
   */
  async purgeDeleted(): Promise<void> {
    const between = async (): Promise<void> => {
      await nextTurn();
      if (this.closed) throw new Error("SqliteGraphStore is closed");
    };
    for (const table of FTS_TABLES) await mergeIntoOne(this.db, table, between);
    // With the checkpoint worker (sqlite-checkpoints.ts), the log is copied there first (the event
    // loop free), so the truncation below copies only what was written since. A failed worker
    // leaves it all to the truncation, as without one.
    const worker = walCheckpointerOf(this.db);
    if (!worker) return truncateWal(this.db);
    let truncated = false;
    try {
      await worker.truncateAfterCopy(() => {
        truncated = true;
        truncateWal(this.db);
      });
    } catch (err) {
      if (truncated) throw err;
      truncateWal(this.db);
    }
  }

  /**
   * One step of the full-text indexes' idle-time merge (fts-segments.ts): about `pages` pages of
   * records_fts's segments merged, then, once it has none left to merge, of turns_fts's. True
   * while either may hold more; false when neither has anything to merge. A step is one short
   * write transaction (64 pages: ~2-6 ms on a 40,000-record store), so writes wait at most that long.
   */
  async mergeIndexSegments(pages: number): Promise<boolean> {
    const budget = Math.floor(pages);
    if (this.closed) throw new Error("SqliteGraphStore is closed");
    if (!(budget > 0)) throw new RangeError(`mergeIndexSegments: pages must be >= 1, got ${pages}`);
    if (!this.mergePrepared) {
      for (const table of FTS_TABLES) prepareSegmentMerge(this.db, table);
      this.mergePrepared = true;
    }
    for (const table of FTS_TABLES) if (mergeSegmentsStep(this.db, table, budget)) return true;
    return false;
  }

  // ---------------------------------------------------------------------------------------------
  // Reads

  /** Records in the order of the ids asked (first occurrence), skipping unknown ids and other tenants' ids. */
  async getRecords(tenant: string, ids: readonly string[]): Promise<MemoryRecord[]> {
    if (ids.length === 0) return [];
    const wanted = uniq(ids);
    const rows = this.all<JsonRow>(
      "SELECT id, json FROM records WHERE tenant = ? AND id IN (SELECT value FROM json_each(?))",
      tenant,
      jsonList(wanted),
    );
    const byId = new Map(rows.map((r) => [r.id, r.json]));
    const out: MemoryRecord[] = [];
    for (const id of wanted) {
      const json = byId.get(id);
      if (json !== undefined) out.push(JSON.parse(json) as MemoryRecord);
    }
    return out;
  }

  async listRecords(tenant: string, query: RecordQuery): Promise<RecordPage> {
    const limit = Math.floor(query.limit);
    if (!(limit > 0)) return { records: [] };
    const where = ["r.tenant = ?"];
    const params: Param[] = [tenant];
    if (query.conversation !== undefined) {
      where.push("r.conversation = ?");
      params.push(query.conversation);
    }
    if (query.entity !== undefined) {
      where.push(
        "EXISTS (SELECT 1 FROM record_entities e WHERE e.tenant = r.tenant AND e.record_id = r.id AND e.entity = ?)",
      );
      params.push(normaliseKey(query.entity));
    }
    if (query.type !== undefined) {
      where.push("r.type = ?");
      params.push(query.type);
    }
    if (query.timeFrom !== undefined) {
      where.push("r.time_to >= ?");
      params.push(query.timeFrom);
    }
    if (query.timeTo !== undefined) {
      where.push("r.time_from <= ?");
      params.push(query.timeTo);
    }
    if (!query.includeSuperseded) where.push("r.superseded_by IS NULL");
    if (query.cursor) {
      const c = this.cursors.decode(tenant, query.cursor);
      where.push("(r.said_at > ? OR (r.said_at = ? AND r.id > ?))");
      params.push(c.saidAt, c.saidAt, c.id);
    }
    params.push(limit + 1);
    const rows = this.all<PageRow>(
      `SELECT r.id, r.json, r.said_at FROM records r WHERE ${where.join(" AND ")} ORDER BY r.said_at, r.id LIMIT ?`,
      ...params,
    );
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const records = page.map((r) => JSON.parse(r.json) as MemoryRecord);
    return rows.length > limit && last
      ? { records, nextCursor: this.cursors.encode(tenant, { saidAt: last.said_at, id: last.id }) }
      : { records };
  }

  /** All stored records of the tenant (superseded versions included). */
  async countRecords(tenant: string, conversation?: string): Promise<number> {
    return this.recordCounts.get(`${tenant}\u0000${conversation ?? ""}`, () =>
      conversation === undefined
        ? this.count("SELECT COUNT(*) AS n FROM records WHERE tenant = ?", tenant)
        : this.count("SELECT COUNT(*) AS n FROM records WHERE tenant = ? AND conversation = ?", tenant, conversation),
    );
  }

  async countSegments(tenant: string, conversation?: string): Promise<number> {
    return conversation === undefined
      ? this.count("SELECT COUNT(*) AS n FROM segments WHERE tenant = ?", tenant)
      : this.count("SELECT COUNT(*) AS n FROM segments WHERE tenant = ? AND conversation = ?", tenant, conversation);
  }

  // ---------------------------------------------------------------------------------------------
  // Segments for the explorer (SegmentStore)

  async listConversations(tenant: string, limit: number, after?: string): Promise<ConversationSummary[]> {
    const rows = this.all<{ conversation: string; segments: number; turns: number; first_at: string; last_at: string }>(
      `SELECT conversation, COUNT(*) AS segments, SUM(json_array_length(json, '$.turns')) AS turns,
         MIN(json_extract(json, '$.start')) AS first_at, MAX(json_extract(json, '$.end')) AS last_at
       FROM segments WHERE tenant = ? AND conversation > ?
       GROUP BY conversation ORDER BY conversation LIMIT ?`,
      tenant,
      after ?? "",
      Math.max(0, Math.floor(limit)),
    );
    return rows.map((r) => ({
      conversation: r.conversation,
      segments: r.segments,
      turns: r.turns,
      firstAt: r.first_at,
      lastAt: r.last_at,
    }));
  }

  async listSegments(tenant: string, conversation: string, limit: number, after?: SegmentKey): Promise<Segment[]> {
    const rows = this.all<{ json: string }>(
      `SELECT json FROM (SELECT id, json, json_extract(json, '$.start') AS start FROM segments
         WHERE tenant = ? AND conversation = ?)
       WHERE start > ? OR (start = ? AND id > ?)
       ORDER BY start, id LIMIT ?`,
      tenant,
      conversation,
      after?.start ?? "",
      after?.start ?? "",
      after?.id ?? "",
      Math.max(0, Math.floor(limit)),
    );
    return rows.map((r) => JSON.parse(r.json) as Segment);
  }

  async recordsOfSegments(tenant: string, segmentIds: readonly string[]): Promise<MemoryRecord[]> {
    if (segmentIds.length === 0) return [];
    const rows = this.all<{ json: string }>(
      `SELECT json FROM records WHERE tenant = ? AND segment_id IN (SELECT value FROM json_each(?))
       ORDER BY said_at, id`,
      tenant,
      jsonList(uniq(segmentIds)),
    );
    return rows.map((r) => JSON.parse(r.json) as MemoryRecord);
  }

  /**
   * BM25 (services/core/lexical.ts) over current records' terms, ties: newer said-at, then id.
   * Tenant-wide over current records: MaxScore top k (searchLexicalTopK) over the tenant's document
   * frequencies and counts kept with the writes (scope-counts.ts), FTS5 reading one term's records
   * of the tenant (fts-scope.ts) at a time: the cost follows the rare terms' lists, not every record
   * holding a query term. In one conversation (small: exhaustive is as fast) or as of `validAt`
   * (the kept counts are of current records): FTS5 finds every record of the scope holding any
   * query term and the shared scorer counts over them (searchLexical). Same scores either way.
   */
  async searchRecordsLexical(
    tenant: string,
    text: string,
    k: number,
    conversation?: string,
    validAt?: number,
  ): Promise<ScoredId[]> {
    const valid = validity(validAt);
    const conv = `${conversation === undefined ? "" : " AND r.conversation = ?"}${valid.sql}`;
    const scoped = (...head: Param[]): Param[] => [
      ...head,
      ...(conversation === undefined ? [] : [conversation]),
      ...valid.params,
    ];
    const read = (match: string, ordered: boolean, limit: number): LexicalHit[] =>
      this.all<LexicalHit>(
        `SELECT r.id AS id, s.lex AS lex, r.said_at AS time
         FROM records_fts JOIN records r ON r.seq = records_fts.rowid JOIN records_terms s ON s.seq = r.seq
         WHERE records_fts MATCH ? AND r.tenant = ?${conv}
         ${ordered ? `ORDER BY ${lexRank("records_fts")} ` : ""}LIMIT ?`,
        ...scoped(match, tenant),
        limit,
      );
    // A record's id and time, by full-text rowid, if it is in the scope searched.
    const identify = async (keys: readonly number[]): Promise<ReadonlyMap<number, ItemIdentity>> =>
      new Map(
        this.all<ItemIdentity & { key: number }>(
          // CROSS JOIN: from each key to its row (rowid), not through an index on the tenant.
          `SELECT r.seq AS key, r.id AS id, r.said_at AS time FROM json_each(?) j
           CROSS JOIN records r ON r.seq = j.value WHERE r.tenant = ?${conv}`,
          ...scoped(JSON.stringify(keys), tenant),
        ).map((r) => [r.key, { id: r.id, time: r.time }]),
      );
    if (validAt === undefined && conversation === undefined) {
      return searchLexicalTopK(text, k, {
        statistics: async (terms) => readLexicalStatistics(this.sql, tenant, "record", terms),
        // The full-text rows alone (terms and tenant); a record's id, time and validity only for
        // the few that may enter the top k.
        postings: async (read, without, along) =>
          along?.length === 0
            ? []
            : this.all<PostedItem>(postingsSql("records", false), termMatch(read, without, tenant, along), tenant),
        identify,
      });
    }
    const scope = (): LexicalScope =>
      this.all<LexicalScope>(
        `SELECT COUNT(*) AS items, COALESCE(SUM(r.lex_len), 0) AS totalLength
         FROM records r WHERE r.tenant = ?${conv}`,
        ...scoped(tenant),
      )[0] as LexicalScope;
    const exhaustive = (terms: readonly string[]): LexicalFind => ({
      hits: poolOf((ordered, limit) => read(scopedMatch(terms, tenant, conversation), ordered, limit)),
      scope: scope(),
    });
    if (conversation === undefined || validAt !== undefined)
      return searchLexical(text, k, async (_, terms) => exhaustive(terms));
    // Current records of one conversation: the full-text rows alone (terms, tenant and
    // conversation, which are the record's: the row is written and deleted with it), less the
    // conversation's superseded records (a covering index, records_lex_scope); every hit is scored
    // and only the few that may enter the top k are read from `records` (rankBm25Posted). Joining
    // every hit to its record was most of the search.
    return searchLexical(text, k, async (_, terms) => {
      const superseded = new Set(
        this.all<{ seq: number }>(
          "SELECT seq FROM records WHERE tenant = ? AND conversation = ? AND superseded_by IS NOT NULL",
          tenant,
          conversation,
        ).map((r) => r.seq),
      );
      const posted = this.all<PostedItem>(
        postingsSql("records", true),
        scopedMatch(terms, tenant, conversation),
        tenant,
        conversation,
        LEXICAL_POOL_LIMIT + 1 + superseded.size,
      ).filter((p) => !superseded.has(p.key));
      // Over the pool: the index's best hits, as before.
      return posted.length > LEXICAL_POOL_LIMIT ? exhaustive(terms) : { posted, scope: scope(), identify };
    });
  }

  /**
   * BM25 (services/core/lexical.ts) over raw turns' terms; ids are turnRowId(conversation, turnId).
   * Tenant-wide: MaxScore top k over the kept counts; in one conversation: exhaustive (as
   * searchRecordsLexical).
   */
  async searchTurnsLexical(tenant: string, text: string, k: number, conversation?: string): Promise<ScoredId[]> {
    const conv = conversation === undefined ? "" : " AND t.conversation = ?";
    const scoped = (...head: Param[]): Param[] => (conversation === undefined ? head : [...head, conversation]);
    const read = (match: string, ordered: boolean, limit: number): LexicalHit[] =>
      this.all<{ conversation: string; turn_id: string; lex: string; timestamp: string }>(
        `SELECT t.conversation AS conversation, t.turn_id AS turn_id, s.lex AS lex, t.timestamp AS timestamp
         FROM turns_fts JOIN turns t ON t.seq = turns_fts.rowid JOIN turns_terms s ON s.seq = t.seq
         WHERE turns_fts MATCH ? AND t.tenant = ?${conv}
         ${ordered ? `ORDER BY ${lexRank("turns_fts")} ` : ""}LIMIT ?`,
        ...scoped(match, tenant),
        limit,
      ).map((r) => ({ id: turnRowId(r.conversation, r.turn_id), lex: r.lex, time: Date.parse(r.timestamp) }));
    // A turn's id and time, by full-text rowid, if it is in the scope searched.
    const identify = async (keys: readonly number[]): Promise<ReadonlyMap<number, ItemIdentity>> =>
      new Map(
        this.all<{ key: number; conversation: string; turn_id: string; timestamp: string }>(
          // CROSS JOIN: from each key to its row (rowid); left to itself, the planner walked
          // every turn of the tenant through the tenant's index.
          `SELECT t.seq AS key, t.conversation AS conversation, t.turn_id AS turn_id, t.timestamp AS timestamp
           FROM json_each(?) j CROSS JOIN turns t ON t.seq = j.value WHERE t.tenant = ?${conv}`,
          ...scoped(JSON.stringify(keys), tenant),
        ).map((r) => [r.key, { id: turnRowId(r.conversation, r.turn_id), time: Date.parse(r.timestamp) }]),
      );
    if (conversation === undefined) {
      return searchLexicalTopK(text, k, {
        statistics: async (terms) => readLexicalStatistics(this.sql, tenant, "turn", terms),
        // As searchRecordsLexical: the full-text rows alone, a turn's key and time for the few
        // that may enter the top k.
        postings: async (read, without, along) =>
          along?.length === 0
            ? []
            : this.all<PostedItem>(postingsSql("turns", false), termMatch(read, without, tenant, along), tenant),
        identify,
      });
    }
    // As searchRecordsLexical in one conversation: the full-text rows alone (a turn's tenant and
    // conversation are its row's), every hit scored, the few that may enter the top k identified.
    return searchLexical(text, k, async (_, terms) => {
      const scope = this.all<LexicalScope>(
        `SELECT COUNT(*) AS items, COALESCE(SUM(t.lex_len), 0) AS totalLength FROM turns t WHERE t.tenant = ?${conv}`,
        ...scoped(tenant),
      )[0] as LexicalScope;
      const posted = this.all<PostedItem>(
        postingsSql("turns", true),
        scopedMatch(terms, tenant, conversation),
        tenant,
        conversation,
        LEXICAL_POOL_LIMIT + 1,
      );
      // Over the pool: the index's best hits, as before.
      if (posted.length > LEXICAL_POOL_LIMIT)
        return {
          hits: poolOf((ordered, limit) => read(scopedMatch(terms, tenant, conversation), ordered, limit)),
          scope,
        };
      return { posted, scope, identify };
    });
  }

  /** Current records mentioning any of the entities (name or alias, case-insensitive); score = distinct entities matched. */
  async recordsByEntities(
    tenant: string,
    entities: readonly string[],
    k: number,
    conversation?: string,
    validAt?: number,
  ): Promise<ScoredId[]> {
    return this.recordsByKeys("entity", tenant, entities, k, conversation, validAt);
  }

  /** Current records with any of the topics (case-insensitive); score = distinct topics matched. */
  async recordsByTopics(
    tenant: string,
    topics: readonly string[],
    k: number,
    conversation?: string,
    validAt?: number,
  ): Promise<ScoredId[]> {
    return this.recordsByKeys("topic", tenant, topics, k, conversation, validAt);
  }

  /**
   * The top k records by (distinct names matched DESC, said_at DESC, id). In one conversation
   * (small) every match is ranked. Tenant-wide the ranking reads a bounded candidate set instead:
   * every record of the keys other than the most frequent one (a record matching two or more keys
   * is in one of them), and the first k valid records of the most frequent key in (said_at DESC,
   * id) order, an index walk (migration 10) that stops at k. A record outside that set matches the
   * most frequent key alone (score 1) and has k valid records of that key before it in the rank
   * order, each scoring at least 1: it is not in the top k. So ranking the candidates alone gives
   * the same k records in the same order as ranking every match (test/unit/keys-top-k.test.ts).
   * Read only when the walk skips most of that key's matches (kept counts); one key needs no second
   * ranking (every match scores 1: the walk is the answer).
   */
  private recordsByKeys(
    index: "entity" | "topic",
    tenant: string,
    given: readonly string[],
    k: number,
    conversation: string | undefined,
    validAt: number | undefined,
  ): ScoredId[] {
    const keys = uniq(given.map(normaliseKey).filter(Boolean));
    const limit = Math.floor(k);
    if (keys.length === 0 || !(limit > 0)) return [];
    const [table, column, name] =
      index === "entity" ? ["record_entities", "entity", "e.name"] : ["record_topics", "topic", "e.topic"];
    const byKey = `${table}_${column}`;
    const valid = validity(validAt);
    // CROSS JOIN: from the key rows to their records. Left free, the planner could read every
    // record of the tenant in id order through records_validity (no table rows, and the GROUP BY's
    // order for free) and look their key rows up: a tenant's records for a few keys' matches.
    const rank = (from: string, head: Param[]): ScoreRow[] =>
      this.all<ScoreRow>(
        `SELECT r.id AS id, COUNT(DISTINCT ${name}) AS score
         FROM ${from} CROSS JOIN records r ON r.tenant = e.tenant AND r.id = e.record_id
         WHERE e.tenant = ? AND e.${column} IN (SELECT value FROM json_each(?))${valid.sql}
         GROUP BY r.id ORDER BY score DESC, MAX(r.said_at) DESC, r.id LIMIT ?`,
        ...head,
        tenant,
        jsonList(keys),
        ...valid.params,
        limit,
      );
    if (conversation !== undefined) {
      // (tenant, conversation, key, …): the conversation's matches only.
      return this.all<ScoreRow>(
        `SELECT r.id AS id, COUNT(DISTINCT ${name}) AS score
         FROM ${table} e CROSS JOIN records r ON r.tenant = e.tenant AND r.id = e.record_id
         WHERE e.tenant = ? AND e.${column} IN (SELECT value FROM json_each(?)) AND e.conversation = ?${valid.sql}
         GROUP BY r.id ORDER BY score DESC, MAX(r.said_at) DESC, r.id LIMIT ?`,
        tenant,
        jsonList(keys),
        conversation,
        ...valid.params,
        limit,
      );
    }
    // The most frequent key by the kept counts (of current records; as of a moment only a guess at
    // the list sizes, which costs time, never results: both reads below are exact for any key).
    const counts = keys.map((key) => readKeyCount(this.sql, tenant, index, key, undefined));
    const largest = Math.max(...counts);
    const walked = keys[counts.indexOf(largest)] as string;
    const others = keys.filter((key) => key !== walked);
    const rest = counts.reduce((sum, n) => sum + n, 0) - largest;
    // The candidates are read, then ranked again: worth it only when the walk skips most of the
    // most frequent key's matches. Otherwise every match is ranked in one read.
    if (largest <= 2 * (rest + limit))
      return this.rankByKeysWalk(index, tenant, keys, limit, validAt, Number.POSITIVE_INFINITY) as ScoreRow[];
    // The candidate ranking below seeks each candidate's rows and record (random reads: ~600
    // candidates of a 20,000-record tenant's topics took ~8 ms). The merged walk reads the lists
    // in order and stops early when k records hold enough of the keys (many records holding the
    // keys together): tried first, within a few times the rows the candidate read would read, and
    // given up past them (its answer is exact whenever it ends).
    const merged = this.rankByKeysWalk(index, tenant, keys, limit, validAt, MERGED_WALK_BUDGET * (rest + limit));
    if (merged) return merged;
    const walk = (): { id: string }[] =>
      this.all<{ id: string }>(
        `SELECT e.record_id AS id FROM ${table} e INDEXED BY ${byKey}
         JOIN records r ON r.tenant = e.tenant AND r.id = e.record_id
         WHERE e.tenant = ? AND e.${column} = ?${valid.sql}
         ORDER BY e.said_at DESC, e.record_id LIMIT ?`,
        tenant,
        walked,
        ...valid.params,
        limit,
      );
    // One key: its walk is the answer (each record matches it once: score 1).
    if (others.length === 0) return walk().map((row) => ({ id: row.id, score: 1 }));
    const candidates = new Set<string>(walk().map((row) => row.id));
    for (const row of this.all<{ id: string }>(
      `SELECT e.record_id AS id FROM ${table} e INDEXED BY ${byKey}
         WHERE e.tenant = ? AND e.${column} IN (SELECT value FROM json_each(?))`,
      tenant,
      jsonList(others),
    ))
      candidates.add(row.id);
    if (candidates.size === 0) return [];
    // From each candidate to its rows of the keys (primary key (tenant, record_id, key)): CROSS JOIN
    // keeps the planner from reading the keys' lists again.
    // INDEXED BY the primary key (tenant, record_id, key): record_entities_entity covers the name
    // too (migration 14), and without statistics the planner took it, reading every row of the
    // keys once per candidate (5 → 80 ms at 100K records).
    return rank(
      `json_each(?) c CROSS JOIN ${table} e INDEXED BY sqlite_autoindex_${table}_1 ON e.tenant = ? AND e.record_id = c.value`,
      [JSON.stringify([...candidates]), tenant],
    );
  }

  /** The tenant's superseded record ids while the data is unchanged; null when there are more than SUPERSEDED_IDS_KEPT. */
  private supersededOf(tenant: string): ReadonlySet<string> | null {
    return this.supersededIds.get(tenant, () => {
      const rows = this.all<{ id: string }>(
        "SELECT id FROM records INDEXED BY records_superseded WHERE tenant = ? AND superseded_by IS NOT NULL LIMIT ?",
        tenant,
        SUPERSEDED_IDS_KEPT + 1,
      );
      return rows.length > SUPERSEDED_IDS_KEPT ? null : new Set(rows.map((r) => r.id));
    });
  }

  /**
   * recordsByKeys' ranking when no key dominates: the keys' index lists merged in (said_at DESC,
   * id) order, a page at a time, until no record after the best k can enter (keys-walk.ts). A
   * list's rows come from its key index alone (record, name or topic, said_at); records are
   * checked for validity only when they may enter the top k. Same records in the same order as
   * ranking every match: a key row's said_at is its record's (written together by insertRecord,
   * never changed), names are counted distinct by exact equality as SQLite's BINARY collation does,
   * and ids are ordered by code point, which is BINARY's UTF-8 byte order.
   */
  private rankByKeysWalk(
    index: "entity" | "topic",
    tenant: string,
    keys: readonly string[],
    limit: number,
    validAt: number | undefined,
    maxRows: number,
  ): ScoreRow[] | undefined {
    const valid = validity(validAt);
    const [table, column, name] =
      index === "entity" ? ["record_entities", "entity", "e.name"] : ["record_topics", "topic", "e.topic"];
    const head = `SELECT e.record_id AS id, ${name} AS name, e.said_at AS saidAt FROM ${table} e INDEXED BY ${table}_${column}
       WHERE e.tenant = ? AND e.${column} = ?`;
    const order = "ORDER BY e.said_at DESC, e.record_id LIMIT ?";
    return rankByMergedWalkWithin(
      keys,
      limit,
      {
        page: (key, after, size) =>
          after === undefined
            ? this.all<KeyRow>(`${head} ${order}`, tenant, key, size)
            : this.all<KeyRow>(
                // said_at <= ?: a range of the index; the rest skips the rows read of that said_at.
                `${head} AND e.said_at <= ? AND (e.said_at < ? OR e.record_id > ?) ${order}`,
                tenant,
                key,
                after.saidAt,
                after.saidAt,
                after.id,
                size,
              ),
        current: (ids) => {
          const superseded = validAt === undefined ? this.supersededOf(tenant) : null;
          if (superseded) return new Set(ids.filter((id) => !superseded.has(id)));
          return new Set(
            this.all<{ id: string }>(validIdsSql(valid.sql), JSON.stringify(ids), tenant, ...valid.params).map(
              (r) => r.id,
            ),
          );
        },
      },
      maxRows,
    );
  }

  /**
   * Matches of one entity / topic key, counted up to the cap. Current records: the kept count. As
   * of `validAt`: the LIMIT inside stops the index
   * walk at `cap` valid rows (a record holds a key at most once: the tables' primary key), where
   * recordsBy* groups and sorts every match before its LIMIT. The key's index is named: without
   * statistics the planner walks the primary key's (tenant, record_id, …) prefix, every row of the
   * tenant, for a tenant-wide count.
   */
  async countRecordsByKey(
    tenant: string,
    index: "entity" | "topic",
    key: string,
    cap: number,
    conversation?: string,
    validAt?: number,
  ): Promise<number> {
    const k = normaliseKey(key);
    const limit = Math.floor(cap);
    if (!k || !(limit > 0)) return 0;
    // Current records: the count kept with the writes (scope-counts.ts), one indexed read. As of a
    // moment the kept counts (of current records) do not apply: the capped count below.
    if (validAt === undefined) return Math.min(readKeyCount(this.sql, tenant, index, k, conversation), limit);
    const [table, column] = index === "entity" ? ["record_entities", "entity"] : ["record_topics", "topic"];
    // (tenant, entity|topic) tenant-wide; (tenant, conversation, entity|topic, …) in a conversation.
    const byKey = `${table}_${conversation === undefined ? column : "conv"}`;
    const valid = validity(validAt);
    const params: Param[] = [tenant, k];
    if (conversation !== undefined) params.push(conversation);
    params.push(...valid.params, limit);
    return this.count(
      `SELECT COUNT(*) AS n FROM (
         SELECT 1 FROM ${table} x INDEXED BY ${byKey} JOIN records r ON r.tenant = x.tenant AND r.id = x.record_id
         WHERE x.tenant = ? AND x.${column} = ?${conversation === undefined ? "" : " AND x.conversation = ?"}${valid.sql}
         LIMIT ?)`,
      ...params,
    );
  }

  /**
   * Current records whose time overlaps the window (records without a time of their own use the
   * time they were said). score = w / (1 + span in days), w = 1 for a record's own time and 0.5 for
   * the said-at fallback: tighter, explicit times rank first.
   */
  async recordsInTime(
    tenant: string,
    window: TimeWindow,
    k: number,
    conversation?: string,
    validAt?: number,
  ): Promise<ScoredId[]> {
    const limit = Math.floor(k);
    if (!(limit > 0) || !(window.from <= window.to)) return [];
    const valid = validity(validAt);
    const conv = `${conversation === undefined ? "" : " AND r.conversation = ?"}${valid.sql}`;
    const params: Param[] = [tenant, window.to, window.from];
    if (conversation !== undefined) params.push(conversation);
    params.push(...valid.params, limit);
    return this.all<ScoreRow>(
      `SELECT r.id AS id,
         (CASE WHEN r.has_time = 1 THEN 1.0 ELSE 0.5 END) / (1.0 + (r.time_to - r.time_from) / ${DAY_MS}.0) AS score
       FROM records r
       WHERE r.tenant = ? AND r.time_from <= ? AND r.time_to >= ?${conv}
       ORDER BY score DESC, r.said_at DESC, r.id LIMIT ?`,
      ...params,
    );
  }

  /**
   * Current records sharing an event frame with any given record (given ones excluded); score =
   * shared frames. CROSS JOIN fixes the join order: from the given records' frames to their other
   * records (left to itself, SQLite's planner read every frame row of the tenant first).
   */
  async eventFrameNeighbours(
    tenant: string,
    recordIds: readonly string[],
    k: number,
    validAt?: number,
  ): Promise<ScoredId[]> {
    const limit = Math.floor(k);
    if (recordIds.length === 0 || !(limit > 0)) return [];
    const ids = jsonList(uniq(recordIds));
    const valid = validity(validAt);
    return this.all<ScoreRow>(
      `SELECT e2.record_id AS id, COUNT(DISTINCT e2.frame_id) AS score
       FROM event_frames e1
       CROSS JOIN event_frames e2 ON e2.tenant = e1.tenant AND e2.frame_id = e1.frame_id
       CROSS JOIN records r ON r.tenant = e2.tenant AND r.id = e2.record_id
       WHERE e1.tenant = ? AND e1.record_id IN (SELECT value FROM json_each(?))
         AND e2.record_id NOT IN (SELECT value FROM json_each(?))${valid.sql}
       GROUP BY e2.record_id ORDER BY score DESC, MAX(r.said_at) DESC, e2.record_id LIMIT ?`,
      tenant,
      ids,
      ids,
      ...valid.params,
      limit,
    );
  }

  /** Stored turns in the order asked, skipping unknown keys. */
  async getTurns(tenant: string, turnKeys: readonly { conversation: string; turnId: string }[]): Promise<StoredTurn[]> {
    if (turnKeys.length === 0) return [];
    const pairs = turnKeys.map((t) => [t.conversation, t.turnId]);
    const rows = this.all<TurnRow>(
      `SELECT ${TURN_COLUMNS} FROM turns WHERE tenant = ? AND (conversation, turn_id) IN
         (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))`,
      tenant,
      JSON.stringify(pairs),
    );
    return inAskedOrder(
      turnKeys,
      rows,
      (r) => ({ conversation: r.conversation, turnId: r.turn_id }),
      (r) => toStoredTurn(r),
    );
  }

  /**
   * Distinct canonical entity names (aliases excluded), sorted. Tenant-wide: a seek from each name
   * to the next in record_entities_names (distinctNames), not a read of every row; one
   * conversation: its rows only (record_entities_conv, named: without statistics the planner would
   * take the name index to skip the sort and read the whole tenant). Every query reads them, so
   * they are kept until the database changes (knownNames).
   */
  async knownEntities(tenant: string, conversation?: string): Promise<string[]> {
    return [
      ...this.knownNames.get(`e\u0000${tenant}\u0000${conversation ?? ""}`, () =>
        conversation === undefined
          ? this.distinctNames("record_entities", "tenant = ? AND is_alias = 0", tenant)
          : this.all<{ name: string }>(
              `SELECT DISTINCT name FROM record_entities INDEXED BY record_entities_conv
               WHERE tenant = ? AND conversation = ? AND is_alias = 0 ORDER BY name`,
              tenant,
              conversation,
            ).map((r) => r.name),
      ),
    ];
  }

  /** Distinct topic display names, sorted (read and kept as knownEntities' names are). */
  async knownTopics(tenant: string, conversation?: string): Promise<string[]> {
    return [
      ...this.knownNames.get(`t\u0000${tenant}\u0000${conversation ?? ""}`, () =>
        conversation === undefined
          ? this.distinctNames("record_topics", "tenant = ?", tenant)
          : this.all<{ name: string }>(
              `SELECT DISTINCT name FROM record_topics INDEXED BY record_topics_conv
               WHERE tenant = ? AND conversation = ? ORDER BY name`,
              tenant,
              conversation,
            ).map((r) => r.name),
      ),
    ];
  }

  /**
   * The distinct `name`s of a table's rows matching `where` (one tenant), ascending: a loose index
   * scan, each step the smallest name above the previous one (an index seek), so the cost follows
   * the number of distinct names, not of rows. Ends at the last name (MIN of nothing is NULL).
   */
  private distinctNames(table: "record_entities" | "record_topics", where: string, tenant: string): string[] {
    return this.all<{ name: string }>(
      `WITH RECURSIVE names(name) AS (
         SELECT (SELECT MIN(name) FROM ${table} WHERE ${where})
         UNION ALL
         SELECT (SELECT MIN(name) FROM ${table} WHERE ${where} AND name > names.name) FROM names WHERE names.name IS NOT NULL
       )
       SELECT name FROM names WHERE name IS NOT NULL`,
      tenant,
      tenant,
    ).map((r) => r.name);
  }

  /** LexicalVocabulary (core/ports.ts): which terms the scope holds (vocabulary.ts). */
  async lexicalTermsPresent(tenant: string, terms: readonly string[], conversation?: string): Promise<string[]> {
    return this.vocabulary.present(tenant, terms, conversation);
  }

  /** LexicalVocabulary (core/ports.ts): the scope's terms closest to a misspelled one (vocabulary.ts). */
  async lexicalNeighbours(
    tenant: string,
    term: string,
    maxDistance: number,
    conversation?: string,
  ): Promise<Neighbour[]> {
    return this.vocabulary.neighbours(tenant, term, maxDistance, conversation);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.statements.clear();
    if (this.ownsDb && this.db.open) this.db.close();
  }
}
