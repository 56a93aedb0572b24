import type { Driver, ManagedTransaction, Session } from "neo4j-driver";
import { CursorCodec } from "../../cursor.ts";
import type { ConversationSummary, SegmentKey } from "../../explorer.ts";
import { sha256, turnRowId } from "../../ids.ts";
import { parseConversationKey } from "../../keys.ts";
import { LEXICAL_POOL_LIMIT, type LexicalHit, type LexicalScope, lexicalText, searchLexical } from "../../lexical.ts";
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
import {
  applySchema,
  byBytes,
  int,
  type Neo4jConnectionOptions,
  nextSeq,
  num,
  openDriver,
  readRows,
  rows,
  runAutoCommitRetrying,
} from "./driver.ts";
import {
  entitySeek,
  GRAPH_LABELS,
  GRAPH_RELATIONSHIPS,
  GRAPH_SCHEMA,
  RECORD_KEY,
  RECORD_TEXT_INDEX,
  recordSeek,
  SEGMENT_KEY,
  TURN_KEY,
  TURN_TEXT_INDEX,
  topicSeek,
} from "./graph-schema.ts";
import { applyWrites, readView } from "./graph-transaction.ts";
import {
  STAMP_PROPERTY,
  type StampedData,
  stampCypher,
  TenantStampMemo,
  TenantStampReader,
  type TenantStamps,
} from "./tenant-stamp-memo.ts";
import { termNeighbours, termsPresent } from "./vocabulary.ts";

export type Neo4jGraphStoreOptions = Neo4jConnectionOptions & {
  /** HMAC secret of listing cursors (default: UNCONFIGURED_CURSOR_SECRET; servers pass cursorSecretOf(config)). */
  cursorSecret?: string;
  /** Results each read memo keeps (default DEFAULT_READ_MEMO_ENTRIES): names and counts by tenant and conversation. */
  readMemoEntries?: number;
};

/** Results each of the store's read memos keeps by default (as the SQLite store's default). */
export const DEFAULT_READ_MEMO_ENTRIES = 1024;

/** Records deleted per write transaction of a tenant's erasure (deleteTenantRecords). */
const TENANT_RECORDS_PER_DELETE = 5000;

type Tx = ManagedTransaction;

interface JsonRow {
  id: string;
  json: string;
}
interface ScoreRow {
  id: string;
  score: unknown;
}
interface TurnProps {
  tenant: string;
  conversation: string;
  turnId: string;
  segmentId: string;
  speaker: string;
  role: string;
  text: string;
  compressed: string;
  timestamp: string;
  sessionId: string;
}
interface RelationRow {
  from: string;
  to: string;
  relation: string;
  at: string;
  reason: string | null;
}

const ms = (iso: string): number => {
  const v = Date.parse(iso);
  if (Number.isNaN(v)) throw new Error(`not a timestamp: ${iso}`);
  return v;
};

const uniq = (values: readonly string[]): string[] => [...new Set(values)];

/**
 * A tenant-wide lookup by entity or topic name starts from the name's key (the hint); one scoped to
 * a conversation is left to the planner, which may start from the conversation's records instead
 * (fewer than a common name's in a large tenant).
 */
const keySeek = (hint: string, conversation: string | undefined): string =>
  conversation === undefined ? ` ${hint}` : "";

/** Tenant of a dead letter from its partition key (keys.conversationKey; "" when the key names no tenant). */
const tenantOfKey = (key: string): string => parseConversationKey(key)?.tenant ?? "";

const lexicalScope = (row: { items: unknown; totalLength: unknown } | undefined): LexicalScope => ({
  items: num(row?.items ?? 0),
  totalLength: num(row?.totalLength ?? 0),
});

const toStoredTurn = (t: TurnProps): StoredTurn => ({
  tenant: t.tenant,
  conversation: t.conversation,
  segmentId: t.segmentId,
  turnId: t.turnId,
  speaker: t.speaker,
  role: t.role as SegmentTurn["role"],
  text: t.text,
  compressed: t.compressed,
  timestamp: t.timestamp,
  sessionId: t.sessionId,
});

/** A raw turn's MERGE key and properties (seq: insertion order, as SQLite's rowid). */
const turnRow = (tenant: string, conversation: string, segmentId: string, t: SegmentTurn) => ({
  turnId: t.turnId,
  props: {
    tenant,
    conversation,
    turnId: t.turnId,
    segmentId,
    speaker: t.speaker,
    role: t.role,
    text: t.text,
    ...lexProps(t.text),
    compressed: t.compressed,
    timestamp: t.timestamp,
    sessionId: t.sessionId,
    seq: int(nextSeq()),
  },
});

const toRelation = (r: RelationRow): RecordRelation => ({
  from: r.from,
  to: r.to,
  relation: r.relation as RecordRelationKind,
  at: r.at,
  ...(r.reason !== null && r.reason !== undefined ? { reason: r.reason } : {}),
});

const toScored = (r: ScoreRow): ScoredId => ({ id: r.id, score: num(r.score) });

/** The shared lexical terms of a text and their count, as node properties. */
const lexProps = (text: string): { lex: string; lexLen: ReturnType<typeof int> } => {
  const l = lexicalText(text);
  return { lex: l.lex, lexLen: int(l.length) };
};

/** Stored properties of a record besides its JSON, for the filters, orderings and scores. */
const recordProps = (tenant: string, record: MemoryRecord): Record<string, unknown> => {
  const span = recordSpan(record);
  return {
    tenant,
    id: record.id,
    conversation: record.source.conversation,
    segmentId: record.source.segmentId,
    type: record.type,
    text: record.text,
    ...lexProps(record.text),
    json: JSON.stringify(record),
    saidAt: int(ms(record.source.saidAt)),
    timeFrom: int(span.from),
    timeTo: int(span.to),
    hasTime: span.explicit,
    validFrom: int(ms(record.valid.from)),
    validTo: record.valid.to ? int(ms(record.valid.to)) : null,
    supersededBy: record.valid.supersededBy ?? null,
    merged: (record.mergedSources?.length ?? 0) > 0,
  };
};

/**
 * Which versions a route reads: the current ones (not superseded), or for an as-of query those
 * valid at $validAt (epoch ms; validFrom and validTo are stored as epoch ms integers).
 */
const validity = (v: string, validAt: number | undefined): string =>
  validAt === undefined
    ? ` AND ${v}.supersededBy IS NULL`
    : ` AND ${v}.validFrom <= $validAt AND (${v}.validTo IS NULL OR ${v}.validTo > $validAt)`;

const validAtParam = (validAt: number | undefined) => (validAt === undefined ? null : int(validAt));

/**
 * GraphStore over Neo4j (neo4j-driver), with the graph model of docs/design.md §4. Every node carries
 * `tenant` and every query matches on it:
 *
 *   (:Tenant {tenant, stamp, turnStamp})   (write stamps of the read memos: tenant-stamp-memo.ts)
 *   (:Record {tenant, id, conversation, segmentId, type, text, lex, lexLen, json, saidAt, timeFrom, timeTo,
 *             hasTime, validFrom, validTo, supersededBy, merged})
 *   (:Entity {tenant, key, name})-[:MENTIONED_IN {name, alias}]->(:Record)
 *   (:Topic {tenant, key, name})-[:TAGS {name}]->(:Record)
 *   (:Record)-[:ON_DAY]->(:Day {tenant, day}), (:Record)-[:IN_MONTH]->(:Month {tenant, month}),
 *     (:Day)-[:IN_MONTH]->(:Month)
 *   (:EventFrame {tenant, id, conversation})-[:GROUPS]->(:Record), -[:COVERS]->(:Turn)
 *   (:Segment {tenant, id, conversation, json})-[:HAS_TURN]->(:Turn {tenant, conversation, turnId, ...}),
 *     (:Segment)-[:YIELDED]->(:Record)
 *   (:Record)-[:SUPERSEDES|DUPLICATE_OF|REFINES {at, reason}]->(:Record)   (consolidation)
 *   (:UpdateCandidate {tenant, recordId, candidateId, json, status, decision, decidedAt})
 *   (:DeadLetter {tenant, id, stage, key, error, payload, at, seq})   (tenant "" when the key has none)
 *
 * Semantics follow the SQLite store (the reference): insert-once records (ON CREATE SET only, so a
 * replay never clobbers consolidation), current-only reads, the same orderings, scores and cursor.
 * Lexical search: Lucene full-text indexes over the shared terms find the hits, BM25 from
 * services/core/lexical.ts ranks them, exactly as the SQLite store does (see searchRecordsLexical).
 * The schema is created before the first query (or up front by Neo4jGraphStore.open).
 */
export class Neo4jGraphStore implements GraphStore {
  /**
   * An erasure in one transaction per conversation and a tenant's through deleteTenant (ports.ts):
   * a transaction here holds no event loop, and steps cost round trips (1,000 records and turns
   * of 10 conversations: 1,058 ms in steps of 64 against 147 ms in one deleteTenant).
   */
  readonly erasureStep = Number.POSITIVE_INFINITY;
  readonly driver: Driver;
  private readonly owns: boolean;
  private readonly database: string | undefined;
  private readonly cursors: CursorCodec;
  private schemaReady: Promise<void> | undefined;
  private closed = false;
  /** Stamp reads of the memos below: the lookups of one query share one statement (tenant-stamp-memo.ts). */
  private readonly stamps = new TenantStampReader((tenants) => this.readStamps(tenants));
  /**
   * knownEntities / knownTopics by tenant and conversation, until the tenant's stamp changes: the
   * reads go over every MENTIONED_IN / TAGS relationship of the scope, and every query makes both.
   */
  private readonly knownNames: TenantStampMemo<readonly string[]>;
  /**
   * countRecords the same way (a count of the scope's Record nodes), and countRecordsByKey (the
   * planner's selectivity test of each asked name, up to its cap: the same few names come back
   * question after question).
   */
  private readonly recordCounts: TenantStampMemo<number>;
  /** The lexical routes' scope counts (every record or turn of the scope), under the records / turns stamp. */
  private readonly recordScopes: TenantStampMemo<LexicalScope>;
  private readonly turnScopes: TenantStampMemo<LexicalScope>;
  /** Results each read memo keeps (Neo4jGraphStoreOptions.readMemoEntries). */
  readonly readMemoEntries: number;

  constructor(options: Neo4jGraphStoreOptions) {
    const { driver, owns } = openDriver(options);
    this.driver = driver;
    this.owns = owns;
    this.database = options.database;
    this.cursors = new CursorCodec(options.cursorSecret);
    const entries = options.readMemoEntries ?? DEFAULT_READ_MEMO_ENTRIES;
    this.readMemoEntries = entries;
    this.knownNames = new TenantStampMemo(this.stamps, "records", entries);
    this.recordCounts = new TenantStampMemo(this.stamps, "records", entries);
    this.recordScopes = new TenantStampMemo(this.stamps, "records", entries);
    this.turnScopes = new TenantStampMemo(this.stamps, "turns", entries);
  }

  /** A store with its schema in place. */
  static async open(options: Neo4jGraphStoreOptions): Promise<Neo4jGraphStore> {
    const store = new Neo4jGraphStore(options);
    try {
      await store.ensureSchema();
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }

  /**
   * Constraints, range indexes and full-text indexes (idempotent); waits until they are online.
   * Runs once per store, before its first query (open() runs it up front).
   */
  async ensureSchema(): Promise<void> {
    this.check();
    this.schemaReady ??= applySchema(this.driver, this.database, GRAPH_SCHEMA)
      .then(() => this.backfillLexical())
      .then(() => this.backfillStamps())
      .catch((err: unknown) => {
        this.schemaReady = undefined;
        throw err;
      });
    await this.schemaReady;
  }

  /**
   * Gives records and turns written before the shared lexical terms their `lex` and `lexLen`.
   * Part of the schema step, so it uses its own session (read/write wait for the schema).
   */
  private async backfillLexical(): Promise<void> {
    const session = this.session();
    try {
      for (const label of ["Record", "Turn"]) {
        for (;;) {
          const todo = rows<{ element: string; text: string | null }>(
            await session.executeRead((tx) =>
              tx.run(
                `MATCH (n:${label}) WHERE n.lex IS NULL RETURN elementId(n) AS element, n.text AS text LIMIT 1000`,
              ),
            ),
          );
          if (todo.length === 0) break;
          const update = todo.map((t) => ({ element: t.element, ...lexProps(t.text ?? "") }));
          // The lexical scope counts other stores keep (tenant-stamp-memo.ts) change with lexLen.
          await session.executeWrite(async (tx) => {
            await tx.run(
              `UNWIND $rows AS row MATCH (n:${label}) WHERE elementId(n) = row.element
               SET n.lex = row.lex, n.lexLen = row.lexLen
               WITH DISTINCT n.tenant AS tenant
               MATCH (t:Tenant {tenant: tenant})
               SET t.${STAMP_PROPERTY[label === "Record" ? "records" : "turns"]} = randomUUID()`,
              { rows: update },
            );
          });
        }
      }
    } finally {
      await session.close();
    }
  }

  /**
   * Gives tenants written before write stamps (tenant-stamp-memo.ts) a stamp, so their reads are
   * kept from the first query on. Every writer of the store must stamp its writes from then on.
   */
  private async backfillStamps(): Promise<void> {
    const { records, turns } = STAMP_PROPERTY;
    await this.driver.executeQuery(
      `MATCH (t:Tenant) WHERE t.${records} IS NULL OR t.${turns} IS NULL
       SET t.${records} = coalesce(t.${records}, randomUUID()), t.${turns} = coalesce(t.${turns}, randomUUID())`,
      {},
      this.database ? { database: this.database } : {},
    );
  }

  /** The write stamps of tenants (null: no Tenant node or no stamp), one statement. */
  private async readStamps(tenants: readonly string[]): Promise<Map<string, TenantStamps>> {
    const found = await this.query<{ tenant: string; records: string | null; turns: string | null }>(
      `UNWIND $tenants AS tenant
       OPTIONAL MATCH (t:Tenant {tenant: tenant})
       RETURN tenant, t.${STAMP_PROPERTY.records} AS records, t.${STAMP_PROPERTY.turns} AS turns`,
      { tenants },
    );
    return new Map(found.map((r) => [r.tenant, { records: r.records ?? null, turns: r.turns ?? null }]));
  }

  private check(): void {
    if (this.closed) throw new Error("Neo4jGraphStore is closed");
  }

  private session(): Session {
    this.check();
    return this.driver.session(this.database ? { database: this.database } : {});
  }

  private async write<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    await this.ensureSchema();
    const session = this.session();
    try {
      return await session.executeWrite(work);
    } finally {
      await session.close();
    }
  }

  /** One read statement, auto-committed (driver.ts readRows: one round trip instead of a transaction's). */
  private async query<T>(cypher: string, params: Record<string, unknown>): Promise<T[]> {
    await this.ensureSchema();
    this.check();
    return readRows<T>(this.driver, this.database, cypher, params);
  }

  private async count(cypher: string, params: Record<string, unknown>): Promise<number> {
    const [row] = await this.query<{ n: unknown }>(cypher, params);
    return num(row?.n);
  }

  // ---------------------------------------------------------------------------------------------
  // Writes

  /** One write transaction of UNWIND + MERGE statements; a replayed batch changes nothing. */
  async writeBatch(batch: IndexBatch): Promise<void> {
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
    // Same id twice in one batch: the first one wins, as with INSERT ... ON CONFLICT DO NOTHING.
    const byId = new Map<string, MemoryRecord>();
    for (const r of batch.records) if (!byId.has(r.id)) byId.set(r.id, r);
    const conversation = segment.conversation;
    const turns = segment.turns.map((t) => turnRow(tenant, conversation, segment.id, t));

    const records = [...byId.values()];
    const mentions = records.flatMap((r) => entityKeys(r).map((e) => ({ id: r.id, ...e })));
    const tags = records.flatMap((r) => topicKeys(r).map((t) => ({ id: r.id, ...t })));
    const buckets = records.flatMap((r) => {
      const b = spanBuckets(recordSpan(r));
      return [
        ...b.filter((x) => x.day !== null).map((x) => ({ id: r.id, day: x.day, month: x.month })),
        ...uniq(b.map((x) => x.month)).map((month) => ({ id: r.id, day: null, month })),
      ];
    });

    // The statements are sent together, not one after another's answer: the driver pipelines the
    // runs of a transaction on its connection, and the server runs them in order. So no statement
    // waits on a client-side answer: the records created by this batch (insert-once: a replayed
    // record's index rows are not written again) carry `fresh` until the last statement, and the
    // index rows match only those. A segment's write was ten round trips, each 7–30 ms on the
    // loaded two-core machine; now it is one, and the commit.
    await this.write(async (tx) => {
      const statements = [
        tx.run("MERGE (:Tenant {tenant: $tenant})", { tenant }),
        tx.run(
          `UNWIND $records AS rec
           MERGE (r:Record {tenant: $tenant, id: rec.id})
           ON CREATE SET r += rec, r.fresh = true`,
          { tenant, records: records.map((r) => recordProps(tenant, r)) },
        ),
        tx.run(
          `UNWIND $rows AS m
           MATCH (r:Record {tenant: $tenant, id: m.id}) ${RECORD_KEY} WHERE r.fresh
           MERGE (e:Entity {tenant: $tenant, key: m.key}) ON CREATE SET e.name = m.name
           MERGE (e)-[x:MENTIONED_IN]->(r) ON CREATE SET x.name = m.name, x.alias = m.alias`,
          { tenant, rows: mentions },
        ),
        tx.run(
          `UNWIND $rows AS t
           MATCH (r:Record {tenant: $tenant, id: t.id}) ${RECORD_KEY} WHERE r.fresh
           MERGE (p:Topic {tenant: $tenant, key: t.key}) ON CREATE SET p.name = t.name
           MERGE (p)-[x:TAGS]->(r) ON CREATE SET x.name = t.name`,
          { tenant, rows: tags },
        ),
        tx.run(
          `UNWIND $rows AS b
           MATCH (r:Record {tenant: $tenant, id: b.id}) ${RECORD_KEY} WHERE r.fresh
           MERGE (m:Month {tenant: $tenant, month: b.month})
           FOREACH (_ IN CASE WHEN b.day IS NULL THEN [1] ELSE [] END | MERGE (r)-[:IN_MONTH]->(m))
           FOREACH (day IN CASE WHEN b.day IS NULL THEN [] ELSE [b.day] END |
             MERGE (d:Day {tenant: $tenant, day: day})
             MERGE (d)-[:IN_MONTH]->(m)
             MERGE (r)-[:ON_DAY]->(d))`,
          { tenant, rows: buckets },
        ),
        tx.run(
          `MERGE (s:Segment {tenant: $tenant, id: $id})
           ON CREATE SET s.conversation = $conversation, s.sessionId = $sessionId, s.start = $start, s.end = $end,
             s.json = $json`,
          {
            tenant,
            id: segment.id,
            conversation,
            sessionId: segment.sessionId,
            start: segment.start,
            end: segment.end,
            json: JSON.stringify(segment),
          },
        ),
        tx.run(
          `MATCH (s:Segment {tenant: $tenant, id: $segmentId}) ${SEGMENT_KEY}
           UNWIND $turns AS t
           MERGE (x:Turn {tenant: $tenant, conversation: $conversation, turnId: t.turnId})
           ON CREATE SET x += t.props
           ON MATCH SET x.segmentId = CASE WHEN x.segmentId = $open THEN s.id ELSE x.segmentId END
           WITH s, x WHERE x.segmentId = s.id
           MERGE (s)-[:HAS_TURN]->(x)`,
          { tenant, conversation, segmentId: segment.id, turns, open: OPEN_SEGMENT_ID },
        ),
        tx.run(
          `MATCH (s:Segment {tenant: $tenant, id: $segmentId}) ${SEGMENT_KEY}
           UNWIND $ids AS id
           MATCH (r:Record {tenant: $tenant, id: id}) ${RECORD_KEY} WHERE r.segmentId = s.id
           MERGE (s)-[:YIELDED]->(r)`,
          { tenant, segmentId: segment.id, ids: [...byId.keys()] },
        ),
        tx.run(
          `UNWIND $frames AS f
           MERGE (x:EventFrame {tenant: $tenant, id: f.id}) ON CREATE SET x.conversation = $conversation
           WITH x, f
           CALL (x, f) {
             UNWIND f.recordIds AS id
             MATCH (r:Record {tenant: $tenant, id: id}) ${RECORD_KEY}
             MERGE (x)-[:GROUPS]->(r)
           }
           CALL (x, f) {
             UNWIND f.turnIds AS turnId
             MATCH (t:Turn {tenant: $tenant, conversation: $conversation, turnId: turnId}) ${TURN_KEY}
             MERGE (x)-[:COVERS]->(t)
           }`,
          {
            tenant,
            conversation,
            frames: batch.eventFrames.map((f) => ({
              id: f.id,
              recordIds: uniq(f.recordIds),
              turnIds: uniq(f.turnIds),
            })),
          },
        ),
        tx.run(
          `UNWIND $ids AS id
           MATCH (r:Record {tenant: $tenant, id: id}) ${RECORD_KEY} WHERE r.fresh
           REMOVE r.fresh`,
          { tenant, ids: [...byId.keys()] },
        ),
        // Last, so the tenant node's lock is held only until the commit (tenant-stamp-memo.ts).
        tx.run(stampCypher(["records", "turns"]), { tenant }),
      ];
      await Promise.all(statements);
    });
    await this.restamp(tenant, ["records", "turns"]);
  }

  async writeTurns(tenant: string, conversation: string, turns: readonly SegmentTurn[]): Promise<void> {
    if (turns.length === 0) return;
    const rows = turns.map((t) => turnRow(tenant, conversation, OPEN_SEGMENT_ID, t));
    // Sent together, as writeBatch's: one round trip, the server runs them in order.
    await this.write(async (tx) => {
      await Promise.all([
        tx.run("MERGE (:Tenant {tenant: $tenant})", { tenant }),
        tx.run(
          `UNWIND $turns AS t
           MERGE (x:Turn {tenant: $tenant, conversation: $conversation, turnId: t.turnId})
           ON CREATE SET x += t.props`,
          { tenant, conversation, turns: rows },
        ),
        tx.run(stampCypher(["turns"]), { tenant }),
      ]);
    });
    await this.restamp(tenant, ["turns"]);
  }

  /** Upserts candidates; a pair already settled by consolidation stays settled (its status is kept). */
  async putUpdateCandidates(candidates: readonly UpdateCandidate[]): Promise<void> {
    if (candidates.length === 0) return;
    await this.write(async (tx) => {
      await tx.run(
        `UNWIND $rows AS c
         MERGE (u:UpdateCandidate {tenant: c.tenant, recordId: c.recordId, candidateId: c.candidateId})
         ON CREATE SET u.status = 'pending'
         SET u.json = c.json`,
        {
          rows: candidates.map((c) => ({
            tenant: c.tenant,
            recordId: c.recordId,
            candidateId: c.candidateId,
            json: JSON.stringify(c),
          })),
        },
      );
    });
  }

  /** Update candidates of a tenant, pending and settled (not part of the port; for tests and tools). */
  async listUpdateCandidates(tenant: string, limit = 1000): Promise<UpdateCandidate[]> {
    return (
      await this.query<{ json: string }>(
        `MATCH (u:UpdateCandidate {tenant: $tenant}) RETURN u.json AS json
         ORDER BY u.recordId, u.candidateId LIMIT $limit`,
        { tenant, limit: int(Math.max(0, Math.floor(limit))) },
      )
    ).map((r) => JSON.parse(r.json) as UpdateCandidate);
  }

  /** Candidate rows with their consolidation status (not part of the port; for tests and tools). */
  async listCandidateStatus(
    tenant: string,
  ): Promise<{ recordId: string; candidateId: string; status: string; decision: string | null }[]> {
    return this.query(
      `MATCH (u:UpdateCandidate {tenant: $tenant})
       RETURN u.recordId AS recordId, u.candidateId AS candidateId, u.status AS status, u.decision AS decision
       ORDER BY u.recordId, u.candidateId`,
      { tenant },
    );
  }

  async pendingUpdateCandidates(tenant: string, maxRecords: number): Promise<UpdateCandidate[]> {
    const limit = Math.floor(maxRecords);
    if (!(limit > 0)) return [];
    return (
      await this.query<{ json: string }>(
        `MATCH (u:UpdateCandidate {tenant: $tenant, status: 'pending'})
         OPTIONAL MATCH (r:Record {tenant: $tenant, id: u.recordId})
         WITH u.recordId AS recordId, coalesce(min(r.saidAt), 0) AS saidAt
         ORDER BY saidAt, recordId LIMIT $limit
         MATCH (u:UpdateCandidate {tenant: $tenant, status: 'pending', recordId: recordId})
         RETURN u.json AS json ORDER BY saidAt, recordId, u.candidateId`,
        { tenant, limit: int(limit) },
      )
    ).map((r) => JSON.parse(r.json) as UpdateCandidate);
  }

  async tenantsWithPendingCandidates(): Promise<string[]> {
    return (
      await this.query<{ tenant: string }>(
        "MATCH (u:UpdateCandidate {status: 'pending'}) RETURN DISTINCT u.tenant AS tenant",
        {},
      )
    )
      .map((r) => r.tenant)
      .sort(byBytes);
  }

  async countPendingCandidates(tenant?: string): Promise<number> {
    return tenant === undefined
      ? this.count("MATCH (u:UpdateCandidate {status: 'pending'}) RETURN count(u) AS n", {})
      : this.count("MATCH (u:UpdateCandidate {tenant: $tenant, status: 'pending'}) RETURN count(u) AS n", { tenant });
  }

  /**
   * One write transaction for the consolidation and erasure rules (services/consolidator/apply.ts,
   * erasure.ts). executeWrite may retry a transient failure: `decide` is pure, so a retry reads
   * again and decides the same way.
   */
  async transact<T>(
    tenant: string,
    reads: TransactionReads,
    decide: (view: TransactionView) => { writes: TransactionWrites; result: T },
    hooks: ApplyHooks = {},
  ): Promise<T> {
    let stamped: StampedData[] = [];
    const answer = await this.write(async (tx) => {
      const { writes, result } = decide(await readView(tx, tenant, reads));
      stamped = await applyWrites(tx, tenant, writes);
      // Throwing here rolls the transaction back (executeWrite does not retry a non-transient error).
      hooks.beforeCommit?.();
      return result;
    });
    await this.restamp(tenant, stamped);
    return answer;
  }

  /**
   * Sets the stamps of `data` again once a write transaction that set them has committed: a commit
   * is applied to the store in steps (property updates before deletes and index updates), and a
   * reader between the steps could keep a half-applied view under the transaction's own stamp.
   * Nothing is half-applied by now. The stamp set in the transaction stays for a writer that
   * stops between the two (tenant-stamp-memo.ts).
   */
  private async restamp(tenant: string, data: readonly StampedData[]): Promise<void> {
    if (data.length === 0) return;
    const session = this.session();
    try {
      await runAutoCommitRetrying(session, stampCypher(data), { tenant });
    } finally {
      await session.close();
    }
  }

  async relationsOf(tenant: string, ids: readonly string[]): Promise<RecordRelation[]> {
    if (ids.length === 0) return [];
    const found = await this.query<RelationRow>(
      `MATCH (x:Record {tenant: $tenant}) ${recordSeek("x")} WHERE x.id IN $ids
       MATCH (x)-[e:SUPERSEDES|DUPLICATE_OF|REFINES]-(y:Record {tenant: $tenant})
       WITH DISTINCT e
       RETURN startNode(e).id AS from, endNode(e).id AS to, type(e) AS relation, e.at AS at, e.reason AS reason`,
      { tenant, ids: uniq(ids) },
    );
    return found
      .map(toRelation)
      .sort(
        (a, b) =>
          byBytes(a.at, b.at) || byBytes(a.from, b.from) || byBytes(a.to, b.to) || byBytes(a.relation, b.relation),
      );
  }

  async putDeadLetter(letter: DeadLetter): Promise<void> {
    const tenant = tenantOfKey(letter.key);
    await this.write(async (tx) => {
      await tx.run(
        `MERGE (d:DeadLetter {tenant: $tenant, id: $id})
         ON CREATE SET d.stage = $stage, d.key = $key, d.error = $error, d.payload = $payload, d.at = $at, d.seq = $seq`,
        {
          tenant,
          // Unique like SQLite's UNIQUE (stage, key, at, error); the key determines the tenant.
          id: sha256(`${letter.stage}\u0000${letter.key}\u0000${letter.at}\u0000${letter.error}`),
          stage: letter.stage,
          key: letter.key,
          error: letter.error,
          payload: letter.payload,
          at: letter.at,
          seq: int(nextSeq()),
        },
      );
    });
  }

  /** Newest first (insertion order), across tenants (an operator's view, as in the SQLite store). */
  async listDeadLetters(limit: number): Promise<DeadLetter[]> {
    return this.query<DeadLetter>(
      `MATCH (d:DeadLetter) WHERE d.seq IS NOT NULL
       RETURN d.stage AS stage, d.key AS key, d.error AS error, d.payload AS payload, d.at AS at
       ORDER BY d.seq DESC LIMIT $limit`,
      { limit: int(Math.max(0, Math.floor(limit))) },
    );
  }

  /**
   * Removes every node of the tenant (with its relationships), label by label, in batches of
   * auto-committed transactions: a large tenant does not need one huge transaction, and a rerun
   * after an interruption finishes the job. The Tenant node goes first (GRAPH_LABELS' order): its
   * write stamp with it, so no read memo keeps what a reader saw while the rest was being deleted.
   * Returns the ids of the records it deleted (deleteTenantRecords).
   */
  async deleteTenant(tenant: string): Promise<string[]> {
    await this.ensureSchema();
    const erased: string[] = [];
    const session = this.session();
    try {
      for (const label of GRAPH_LABELS) {
        if (label === "Record") {
          erased.push(...(await this.deleteTenantRecords(tenant)));
          continue;
        }
        await runAutoCommitRetrying(
          session,
          `MATCH (n:${label} {tenant: $tenant})
           CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS`,
          { tenant },
        );
      }
    } finally {
      await session.close();
    }
    return erased;
  }

  /**
   * The tenant's records in batches, each its own write transaction that returns the ids it
   * deleted: a retried batch reports only what committed, and a record written while this runs
   * is either deleted and named here or still there after the last (empty) batch, for a later
   * erasure to find. CALL { } IN TRANSACTIONS could not say which ids an interrupted run had
   * already committed.
   */
  private async deleteTenantRecords(tenant: string): Promise<string[]> {
    const erased: string[] = [];
    for (;;) {
      const ids = await this.write(async (tx) => {
        const res = await tx.run(
          `MATCH (n:Record {tenant: $tenant}) WITH n LIMIT $batch
           WITH n, n.id AS id DETACH DELETE n RETURN id`,
          { tenant, batch: int(TENANT_RECORDS_PER_DELETE) },
        );
        return res.records.map((r) => String(r.get("id")));
      });
      if (ids.length === 0) return erased;
      erased.push(...ids);
    }
  }

  async tenantConversations(tenant: string): Promise<string[]> {
    const found = await this.query<{ conversation: string }>(
      `MATCH (r:Record {tenant: $tenant}) RETURN DISTINCT r.conversation AS conversation
       UNION MATCH (s:Segment {tenant: $tenant}) RETURN DISTINCT s.conversation AS conversation`,
      { tenant },
    );
    return [...new Set(found.map((r) => r.conversation))].sort(byBytes);
  }

  /**
   * One write transaction: no Record of the tenant, then every other node of it, label by label.
   * Records are never deleted here: one committed by another transaction after the check stays
   * (its links to names or days this removes go with them), for the erasure that owns it.
   * What it deletes is what an erasure leaves of a tenant once its conversations are gone: a
   * handful of nodes, so one transaction, unlike deleteTenant's batches.
   */
  async deleteTenantIfEmpty(tenant: string): Promise<boolean> {
    return this.write(async (tx) => {
      const held = await tx.run("MATCH (r:Record {tenant: $tenant}) RETURN r LIMIT 1", { tenant });
      if (held.records.length > 0) return false;
      for (const label of GRAPH_LABELS)
        if (label !== "Record") await tx.run(`MATCH (n:${label} {tenant: $tenant}) DETACH DELETE n`, { tenant });
      return true;
    });
  }

  /**
   * Through each label's tenant index (a prefix seek), every label: an erasure interrupted after
   * the Tenant node (deleteTenant's first) leaves the other labels' nodes without it.
   */
  async tenantsNamed(prefix: string): Promise<string[]> {
    const found = await this.query<{ tenant: string }>(
      GRAPH_LABELS.map(
        (label) => `MATCH (n:${label}) WHERE n.tenant STARTS WITH $prefix RETURN n.tenant AS tenant`,
      ).join(" UNION "),
      { prefix },
    );
    return [...new Set(found.map((r) => r.tenant))].sort(byBytes);
  }

  /**
   * A conversation's in one transaction, as its erasure; a tenant's in batches of auto-committed
   * transactions, as deleteTenant (a large tenant needs no huge transaction; a rerun finishes it).
   * The turns' write stamp changes once every batch has committed (tenant-stamp-memo.ts). The count
   * is read before the delete.
   */
  async deleteRawTurns(tenant: string, conversation?: string): Promise<number> {
    const scope = conversation === undefined ? "{tenant: $tenant}" : "{tenant: $tenant, conversation: $conversation}";
    const params = { tenant, ...(conversation !== undefined ? { conversation } : {}) };
    const n = await this.count(`MATCH (t:Turn ${scope}) RETURN count(t) AS n`, params);
    if (n === 0) return 0;
    const session = this.session();
    try {
      await runAutoCommitRetrying(
        session,
        `MATCH (t:Turn ${scope}) CALL (t) { DETACH DELETE t } IN TRANSACTIONS OF 5000 ROWS`,
        params,
      );
    } finally {
      await session.close();
    }
    // One stamp after the batches have committed: none of them is a transaction of its own to stamp.
    await this.restamp(tenant, ["turns"]);
    return n;
  }

  /**
   * After an erasure, what a client can do (docs/erasure.md says what remains on disk): wait until
   * the full-text indexes have applied the deletes, then, where the server has it (Enterprise
   * only), force a checkpoint, which writes the freed records to the store files and lets
   * transaction log files past db.tx_log.rotation.retention_policy be pruned. Community
   * checkpoints on its own schedule (db.checkpoint.interval.*). Deleted property values stay in
   * freed records and Lucene segments until reused or merged; no procedure removes them.
   */
  async purgeDeleted(): Promise<void> {
    await this.ensureSchema();
    const session = this.session();
    try {
      await session.run("CALL db.index.fulltext.awaitEventuallyConsistentIndexRefresh()");
      const found = await session.run("SHOW PROCEDURES YIELD name WHERE name = 'db.checkpoint' RETURN count(*) AS n");
      if (Number(found.records[0]?.get("n") ?? 0) > 0) await session.run("CALL db.checkpoint()");
    } finally {
      await session.close();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Reads

  /** Records in the order of the ids asked (first occurrence), skipping unknown ids and other tenants' ids. */
  async getRecords(tenant: string, ids: readonly string[]): Promise<MemoryRecord[]> {
    if (ids.length === 0) return [];
    const wanted = uniq(ids);
    const found = await this.query<JsonRow>(
      `UNWIND $ids AS id MATCH (r:Record {tenant: $tenant, id: id}) ${RECORD_KEY} RETURN r.id AS id, r.json AS json`,
      { tenant, ids: wanted },
    );
    const byId = new Map(found.map((r) => [r.id, r.json]));
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
    const where = ["r.tenant = $tenant"];
    const params: Record<string, unknown> = { tenant, limit: int(limit + 1) };
    if (query.conversation !== undefined) {
      where.push("r.conversation = $conversation");
      params.conversation = query.conversation;
    }
    if (query.entity !== undefined) {
      where.push("EXISTS { MATCH (:Entity {tenant: $tenant, key: $entity})-[:MENTIONED_IN]->(r) }");
      params.entity = normaliseKey(query.entity);
    }
    if (query.type !== undefined) {
      where.push("r.type = $type");
      params.type = query.type;
    }
    if (query.timeFrom !== undefined) {
      where.push("r.timeTo >= $timeFrom");
      params.timeFrom = query.timeFrom;
    }
    if (query.timeTo !== undefined) {
      where.push("r.timeFrom <= $timeTo");
      params.timeTo = query.timeTo;
    }
    if (!query.includeSuperseded) where.push("r.supersededBy IS NULL");
    if (query.cursor) {
      const c = this.cursors.decode(tenant, query.cursor);
      where.push("(r.saidAt > $cursorSaidAt OR (r.saidAt = $cursorSaidAt AND r.id > $cursorId))");
      params.cursorSaidAt = c.saidAt;
      params.cursorId = c.id;
    }
    const found = await this.query<JsonRow & { saidAt: unknown }>(
      `MATCH (r:Record) WHERE ${where.join(" AND ")}
       RETURN r.id AS id, r.json AS json, r.saidAt AS saidAt ORDER BY r.saidAt, r.id LIMIT $limit`,
      params,
    );
    const page = found.slice(0, limit);
    const last = page[page.length - 1];
    const records = page.map((r) => JSON.parse(r.json) as MemoryRecord);
    return found.length > limit && last
      ? { records, nextCursor: this.cursors.encode(tenant, { saidAt: num(last.saidAt), id: last.id }) }
      : { records };
  }

  /** All stored records of the tenant (superseded versions included). */
  async countRecords(tenant: string, conversation?: string): Promise<number> {
    return this.recordCounts.get(tenant, `all\u0000${tenant}\u0000${conversation ?? ""}`, () =>
      conversation === undefined
        ? this.count("MATCH (r:Record {tenant: $tenant}) RETURN count(r) AS n", { tenant })
        : this.count("MATCH (r:Record {tenant: $tenant, conversation: $conversation}) RETURN count(r) AS n", {
            tenant,
            conversation,
          }),
    );
  }

  async countSegments(tenant: string, conversation?: string): Promise<number> {
    return conversation === undefined
      ? this.count("MATCH (s:Segment {tenant: $tenant}) RETURN count(s) AS n", { tenant })
      : this.count("MATCH (s:Segment {tenant: $tenant, conversation: $conversation}) RETURN count(s) AS n", {
          tenant,
          conversation,
        });
  }

  // ---------------------------------------------------------------------------------------------
  // Segments for the explorer (SegmentStore)

  async listConversations(tenant: string, limit: number, after?: string): Promise<ConversationSummary[]> {
    const found = await this.query<{
      conversation: string;
      segments: unknown;
      turns: unknown;
      firstAt: string;
      lastAt: string;
    }>(
      `MATCH (s:Segment {tenant: $tenant}) WHERE s.conversation > $after
       WITH s.conversation AS conversation, count(s) AS segments, sum(COUNT { (s)-[:HAS_TURN]->(:Turn) }) AS turns,
         min(s.start) AS firstAt, max(s.end) AS lastAt
       RETURN conversation, segments, turns, firstAt, lastAt ORDER BY conversation LIMIT $limit`,
      { tenant, after: after ?? "", limit: int(Math.max(0, Math.floor(limit))) },
    );
    return found.map((r) => ({
      conversation: r.conversation,
      segments: num(r.segments),
      turns: num(r.turns),
      firstAt: r.firstAt,
      lastAt: r.lastAt,
    }));
  }

  async listSegments(tenant: string, conversation: string, limit: number, after?: SegmentKey): Promise<Segment[]> {
    const found = await this.query<{ json: string }>(
      `MATCH (s:Segment {tenant: $tenant, conversation: $conversation})
       WHERE s.start > $start OR (s.start = $start AND s.id > $id)
       RETURN s.json AS json ORDER BY s.start, s.id LIMIT $limit`,
      {
        tenant,
        conversation,
        start: after?.start ?? "",
        id: after?.id ?? "",
        limit: int(Math.max(0, Math.floor(limit))),
      },
    );
    return found.map((r) => JSON.parse(r.json) as Segment);
  }

  async recordsOfSegments(tenant: string, segmentIds: readonly string[]): Promise<MemoryRecord[]> {
    if (segmentIds.length === 0) return [];
    const found = await this.query<{ json: string }>(
      `UNWIND $ids AS id
       MATCH (:Segment {tenant: $tenant, id: id})-[:YIELDED]->(r:Record {tenant: $tenant})
       RETURN DISTINCT r.json AS json, r.saidAt AS saidAt, r.id AS rid ORDER BY saidAt, rid`,
      { tenant, ids: uniq(segmentIds) },
    );
    return found.map((r) => JSON.parse(r.json) as MemoryRecord);
  }

  /**
   * BM25 (services/core/lexical.ts) over current records' terms: the Lucene index over the terms
   * finds the records holding any query term, the shared scorer ranks them (ties: newer said-at,
   * then id), so the ranking equals the SQLite store's. The index is shared by all tenants: hits
   * are filtered by tenant (and conversation) before they are counted.
   */
  async searchRecordsLexical(
    tenant: string,
    text: string,
    k: number,
    conversation?: string,
    validAt?: number,
  ): Promise<ScoredId[]> {
    const conv = (v: string): string =>
      `${conversation === undefined ? "" : ` AND ${v}.conversation = $conversation`}${validity(v, validAt)}`;
    const params = { tenant, conversation: conversation ?? null, validAt: validAtParam(validAt) };
    return searchLexical(text, k, async (match) => {
      const [hits, scope] = await Promise.all([
        this.query<{ id: string; lex: string; time: unknown }>(
          `CALL db.index.fulltext.queryNodes($index, $match) YIELD node, score
           WHERE node.tenant = $tenant${conv("node")}
           RETURN node.id AS id, node.lex AS lex, node.saidAt AS time ORDER BY score DESC LIMIT $pool`,
          { ...params, index: RECORD_TEXT_INDEX, match, pool: int(LEXICAL_POOL_LIMIT) },
        ),
        this.scopeOf(
          this.recordScopes,
          tenant,
          `${tenant}\u0000${conversation ?? ""}\u0000${validAt ?? ""}`,
          `MATCH (r:Record {tenant: $tenant}) WHERE true${conv("r")}
           RETURN count(r) AS items, coalesce(sum(r.lexLen), 0) AS totalLength`,
          params,
        ),
      ]);
      return {
        hits: hits.map((h): LexicalHit => ({ id: h.id, lex: h.lex ?? "", time: num(h.time) })),
        scope,
      };
    });
  }

  /** A lexical scope's item count and total term length (`cypher` returns both), kept under `memo`'s stamp. */
  private scopeOf(
    memo: TenantStampMemo<LexicalScope>,
    tenant: string,
    key: string,
    cypher: string,
    params: Record<string, unknown>,
  ): Promise<LexicalScope> {
    return memo.get(tenant, key, async () =>
      lexicalScope((await this.query<{ items: unknown; totalLength: unknown }>(cypher, params))[0]),
    );
  }

  /** BM25 (services/core/lexical.ts) over raw turns' terms; ids are turnRowId(conversation, turnId). */
  async searchTurnsLexical(tenant: string, text: string, k: number, conversation?: string): Promise<ScoredId[]> {
    const conv = (v: string): string => (conversation === undefined ? "" : ` AND ${v}.conversation = $conversation`);
    const params = { tenant, conversation: conversation ?? null };
    return searchLexical(text, k, async (match) => {
      const [hits, scope] = await Promise.all([
        this.query<{ conversation: string; turnId: string; lex: string; timestamp: string }>(
          `CALL db.index.fulltext.queryNodes($index, $match) YIELD node, score
           WHERE node.tenant = $tenant${conv("node")}
           RETURN node.conversation AS conversation, node.turnId AS turnId, node.lex AS lex,
             node.timestamp AS timestamp ORDER BY score DESC LIMIT $pool`,
          { ...params, index: TURN_TEXT_INDEX, match, pool: int(LEXICAL_POOL_LIMIT) },
        ),
        this.scopeOf(
          this.turnScopes,
          tenant,
          `${tenant}\u0000${conversation ?? ""}`,
          `MATCH (t:Turn {tenant: $tenant}) WHERE true${conv("t")}
           RETURN count(t) AS items, coalesce(sum(t.lexLen), 0) AS totalLength`,
          params,
        ),
      ]);
      return {
        hits: hits.map(
          (h): LexicalHit => ({
            id: turnRowId(h.conversation, h.turnId),
            lex: h.lex ?? "",
            time: Date.parse(h.timestamp),
          }),
        ),
        scope,
      };
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
    const keys = uniq(entities.map(normaliseKey).filter(Boolean));
    const limit = Math.floor(k);
    if (keys.length === 0 || !(limit > 0)) return [];
    const conv = `${conversation === undefined ? "" : " AND r.conversation = $conversation"}${validity("r", validAt)}`;
    return (
      await this.query<ScoreRow>(
        `MATCH (e:Entity {tenant: $tenant})-[m:MENTIONED_IN]->(r:Record {tenant: $tenant})${keySeek(entitySeek("e"), conversation)}
         WHERE e.key IN $keys${conv}
         WITH r, count(DISTINCT m.name) AS score
         RETURN r.id AS id, score ORDER BY score DESC, r.saidAt DESC, r.id LIMIT $limit`,
        { tenant, keys, conversation: conversation ?? null, validAt: validAtParam(validAt), limit: int(limit) },
      )
    ).map(toScored);
  }

  /** Current records with any of the topics (case-insensitive); score = distinct topics matched. */
  async recordsByTopics(
    tenant: string,
    topics: readonly string[],
    k: number,
    conversation?: string,
    validAt?: number,
  ): Promise<ScoredId[]> {
    const keys = uniq(topics.map(normaliseKey).filter(Boolean));
    const limit = Math.floor(k);
    if (keys.length === 0 || !(limit > 0)) return [];
    const conv = `${conversation === undefined ? "" : " AND r.conversation = $conversation"}${validity("r", validAt)}`;
    return (
      await this.query<ScoreRow>(
        `MATCH (t:Topic {tenant: $tenant})-[:TAGS]->(r:Record {tenant: $tenant})${keySeek(topicSeek("t"), conversation)}
         WHERE t.key IN $keys${conv}
         WITH r, count(DISTINCT t.key) AS score
         RETURN r.id AS id, score ORDER BY score DESC, r.saidAt DESC, r.id LIMIT $limit`,
        { tenant, keys, conversation: conversation ?? null, validAt: validAtParam(validAt), limit: int(limit) },
      )
    ).map(toScored);
  }

  /**
   * Several tenant-wide lookups of recordsByTopics (the candidate lookups of a segment, one per
   * record) in one statement, each answered as recordsByTopics(tenant, topics, k) answers it: the
   * same match, score and order per lookup, in a subquery of one UNWIND.
   */
  async recordsByTopicsMany(
    tenant: string,
    lookups: readonly { topics: readonly string[]; k: number }[],
  ): Promise<ScoredId[][]> {
    const asked = lookups.map((l, i) => ({
      i,
      keys: uniq(l.topics.map(normaliseKey).filter(Boolean)),
      limit: Math.floor(l.k),
    }));
    const live = asked.filter((a) => a.keys.length > 0 && a.limit > 0);
    const out: ScoredId[][] = lookups.map(() => []);
    if (live.length === 0) return out;
    // Every lookup takes the largest k; each one's hits are the first of its own k in the same order.
    const found = await this.query<ScoreRow & { i: unknown }>(
      `UNWIND $lookups AS l
       CALL (l) {
         MATCH (t:Topic {tenant: $tenant})-[:TAGS]->(r:Record {tenant: $tenant}) ${topicSeek("t")}
         WHERE t.key IN l.keys${validity("r", undefined)}
         WITH r, count(DISTINCT t.key) AS score
         RETURN r.id AS id, score ORDER BY score DESC, r.saidAt DESC, r.id LIMIT $limit
       }
       RETURN l.i AS i, id, score`,
      {
        tenant,
        lookups: live.map((a) => ({ i: int(a.i), keys: a.keys })),
        limit: int(Math.max(...live.map((a) => a.limit))),
      },
    );
    const limitOf = new Map(live.map((a) => [a.i, a.limit]));
    for (const row of found) {
      const i = num(row.i);
      const list = out[i] as ScoredId[];
      if (list.length < (limitOf.get(i) ?? 0)) list.push(toScored(row));
    }
    return out;
  }

  /**
   * Matches of one entity / topic key, counted up to the cap: `WITH DISTINCT r LIMIT` stops the
   * expansion at `cap` records, where recordsBy* aggregates and sorts every match first.
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
    const pattern =
      index === "entity"
        ? `(x:Entity {tenant: $tenant, key: $key})-[:MENTIONED_IN]->(r:Record {tenant: $tenant})${keySeek(entitySeek("x"), conversation)}`
        : `(x:Topic {tenant: $tenant, key: $key})-[:TAGS]->(r:Record {tenant: $tenant})${keySeek(topicSeek("x"), conversation)}`;
    const conv = `${conversation === undefined ? "" : " AND r.conversation = $conversation"}${validity("r", validAt)}`;
    const memoKey = ["key", tenant, index, k, limit, conversation ?? "", validAt ?? ""].join("\u0000");
    return this.recordCounts.get(tenant, memoKey, () =>
      this.count(`MATCH ${pattern} WHERE true${conv} WITH DISTINCT r LIMIT $limit RETURN count(r) AS n`, {
        tenant,
        key: k,
        conversation: conversation ?? null,
        validAt: validAtParam(validAt),
        limit: int(limit),
      }),
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
    const conv = `${conversation === undefined ? "" : " AND r.conversation = $conversation"}${validity("r", validAt)}`;
    return (
      await this.query<ScoreRow>(
        `MATCH (r:Record {tenant: $tenant})
         WHERE r.timeFrom <= $to AND r.timeTo >= $from${conv}
         WITH r, (CASE WHEN r.hasTime THEN 1.0 ELSE 0.5 END) / (1.0 + toFloat(r.timeTo - r.timeFrom) / ${DAY_MS}.0) AS score
         RETURN r.id AS id, score ORDER BY score DESC, r.saidAt DESC, r.id LIMIT $limit`,
        {
          tenant,
          from: window.from,
          to: window.to,
          conversation: conversation ?? null,
          validAt: validAtParam(validAt),
          limit: int(limit),
        },
      )
    ).map(toScored);
  }

  /** Current records sharing an event frame with any given record (given ones excluded); score = shared frames. */
  async eventFrameNeighbours(
    tenant: string,
    recordIds: readonly string[],
    k: number,
    validAt?: number,
  ): Promise<ScoredId[]> {
    const limit = Math.floor(k);
    if (recordIds.length === 0 || !(limit > 0)) return [];
    const ids = uniq(recordIds);
    return (
      await this.query<ScoreRow>(
        `MATCH (r1:Record {tenant: $tenant}) ${recordSeek("r1")} WHERE r1.id IN $ids
         MATCH (r1)<-[:GROUPS]-(f:EventFrame {tenant: $tenant})-[:GROUPS]->(r2:Record {tenant: $tenant})
         WHERE NOT r2.id IN $ids${validity("r2", validAt)}
         WITH r2, count(DISTINCT f) AS score
         RETURN r2.id AS id, score ORDER BY score DESC, r2.saidAt DESC, r2.id LIMIT $limit`,
        { tenant, ids, validAt: validAtParam(validAt), limit: int(limit) },
      )
    ).map(toScored);
  }

  /** Stored turns in the order asked, skipping unknown keys. */
  async getTurns(tenant: string, turnKeys: readonly { conversation: string; turnId: string }[]): Promise<StoredTurn[]> {
    if (turnKeys.length === 0) return [];
    const found = await this.query<{ t: TurnProps }>(
      `UNWIND $keys AS k
       MATCH (t:Turn {tenant: $tenant, conversation: k.conversation, turnId: k.turnId}) ${TURN_KEY}
       RETURN t {.tenant, .conversation, .turnId, .segmentId, .speaker, .role, .text, .compressed, .timestamp,
         .sessionId} AS t`,
      { tenant, keys: turnKeys.map((t) => ({ conversation: t.conversation, turnId: t.turnId })) },
    );
    return inAskedOrder(
      turnKeys,
      found,
      (r) => ({ conversation: r.t.conversation, turnId: r.t.turnId }),
      (r) => toStoredTurn(r.t),
    );
  }

  /** Distinct canonical entity names (aliases excluded), sorted; kept until the tenant changes (knownNames). */
  async knownEntities(tenant: string, conversation?: string): Promise<string[]> {
    const conv = conversation === undefined ? "" : " AND r.conversation = $conversation";
    const names = await this.knownNames.get(tenant, `e\u0000${tenant}\u0000${conversation ?? ""}`, async () =>
      (
        await this.query<{ name: string }>(
          `MATCH (:Entity {tenant: $tenant})-[m:MENTIONED_IN]->(r:Record {tenant: $tenant})
           WHERE m.alias = false${conv}
           RETURN DISTINCT m.name AS name`,
          { tenant, conversation: conversation ?? null },
        )
      )
        .map((r) => r.name)
        .sort(byBytes),
    );
    return [...names];
  }

  /** Distinct topic display names, sorted; kept as knownEntities' names are. */
  async knownTopics(tenant: string, conversation?: string): Promise<string[]> {
    const conv = conversation === undefined ? "" : " WHERE r.conversation = $conversation";
    const names = await this.knownNames.get(tenant, `t\u0000${tenant}\u0000${conversation ?? ""}`, async () =>
      (
        await this.query<{ name: string }>(
          `MATCH (:Topic {tenant: $tenant})-[x:TAGS]->(r:Record {tenant: $tenant})${conv}
           RETURN DISTINCT x.name AS name`,
          { tenant, conversation: conversation ?? null },
        )
      )
        .map((r) => r.name)
        .sort(byBytes),
    );
    return [...names];
  }

  /** Node and relationship counts of a tenant by label and type (not part of the port; for tests and tools). */
  async countsByKind(tenant: string): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const label of GRAPH_LABELS) {
      out[label] = await this.count(`MATCH (n:${label} {tenant: $tenant}) RETURN count(n) AS n`, { tenant });
    }
    for (const type of GRAPH_RELATIONSHIPS) {
      out[type] = await this.count(
        `MATCH ()-[x:${type}]->() WHERE startNode(x).tenant = $tenant RETURN count(x) AS n`,
        { tenant },
      );
    }
    return out;
  }

  /** LexicalVocabulary (core/ports.ts): which terms the scope holds (vocabulary.ts). */
  async lexicalTermsPresent(tenant: string, terms: readonly string[], conversation?: string): Promise<string[]> {
    return termsPresent((c, p) => this.query(c, p), tenant, terms, conversation);
  }

  /** LexicalVocabulary (core/ports.ts): the scope's terms closest to a misspelled one, by Lucene fuzzy queries (vocabulary.ts). */
  async lexicalNeighbours(
    tenant: string,
    term: string,
    maxDistance: number,
    conversation?: string,
  ): Promise<Neighbour[]> {
    return termNeighbours((c, p) => this.query(c, p), tenant, term, maxDistance, conversation);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.owns) await this.driver.close();
  }
}
