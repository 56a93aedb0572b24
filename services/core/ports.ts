import type { QueryPlan, RecordPage, RecordQuery } from "./query-types.ts";
import type {
  DeadLetter,
  DisambiguationContext,
  Entity,
  MemoryRecord,
  RecordType,
  Segment,
  SegmentTurn,
  UpdateCandidate,
} from "./types.ts";

export interface EmbedderStats {
  calls: number;
  texts: number;
  ms: number;
}

/** Sentence embedder. Vectors are L2-normalised, so a dot product is the cosine. */
export interface Embedder {
  stats(): EmbedderStats;
  readonly id: string;
  /** Read from the model, never hard-coded. Available after the first embed or after load(). */
  readonly dimension: number;
  embed(texts: readonly string[]): Promise<Float32Array[]>;
  close?(): Promise<void>;
}

export interface CompressionResult {
  text: string;
  keptRatio: number;
}

/** Turn compressor (sensory stage). keepRate r in (0, 1]. */
export interface Compressor {
  readonly id: string;
  compress(text: string, keepRate: number): Promise<CompressionResult>;
}

export interface LlmUsage {
  inputTokens: number;
  outputTokens: number;
}

export interface LlmRequest {
  system: string;
  user: string;
  /** JSON schema the answer must follow. */
  jsonSchema?: Record<string, unknown>;
  maxTokens?: number;
}

export interface LlmResponse {
  text: string;
  usage: LlmUsage;
}

export interface Llm {
  readonly id: string;
  complete(req: LlmRequest): Promise<LlmResponse>;
}

/** LLM work spent on one call of a stage (all zeros for the deterministic implementations). */
export interface LlmCost {
  llmCalls: number;
  inputTokens: number;
  outputTokens: number;
}

/** An error that still cost LLM work (failed attempts are paid for even when the result is dropped). */
export const costOfError = (err: unknown): LlmCost | undefined => {
  const cost = (err as { cost?: Partial<LlmCost> } | null)?.cost;
  return cost &&
    typeof cost.llmCalls === "number" &&
    typeof cost.inputTokens === "number" &&
    typeof cost.outputTokens === "number"
    ? { llmCalls: cost.llmCalls, inputTokens: cost.inputTokens, outputTokens: cost.outputTokens }
    : undefined;
};

export const NO_LLM_COST: LlmCost = { llmCalls: 0, inputTokens: 0, outputTokens: 0 };

export interface EncodedSegment {
  records: MemoryRecord[];
  /** The disambiguation context to carry to the next segment of the conversation. */
  context: DisambiguationContext;
  cost: LlmCost;
}

/**
 * The encoder stage's strategy: a closed segment and the conversation's disambiguation context in,
 * self-contained records out. Throwing sends the segment to the dead-letter store with the reason.
 */
export interface SegmentEncoder {
  readonly id: string;
  encode(segment: Segment, context: DisambiguationContext): Promise<EncodedSegment>;
}

export interface PlannerInput {
  /** Whose question: LLM cost is attributed to this tenant. */
  tenant?: string;
  question: string;
  knownEntities: readonly string[];
  knownTopics: readonly string[];
  now: Date;
}

/** The query's single planning step. */
export interface QueryPlanner {
  readonly id: string;
  plan(input: PlannerInput): Promise<{ plan: QueryPlan; cost: LlmCost }>;
}

/** What a vector row is: a record's text, or a raw turn kept for fallback. */
export type VectorKind = "record" | "turn";

export interface VectorPayload {
  tenant: string;
  conversation: string;
  kind: VectorKind;
  type?: RecordType;
  /** Epoch milliseconds of the record's event time (or the turn time). */
  time?: number;
  entities?: string[];
}

export interface VectorItem {
  id: string;
  vector: Float32Array;
  payload: VectorPayload;
}

export interface VectorFilter {
  conversation?: string;
  kind?: VectorKind;
  types?: RecordType[];
  timeFrom?: number;
  timeTo?: number;
  entities?: string[];
}

export interface VectorHit {
  id: string;
  score: number;
  payload: VectorPayload;
}

/**
 * Vector store. Tenancy is a storage boundary: every call names the tenant and
 * an implementation must never return another tenant's item.
 */
export interface VectorStore {
  upsert(tenant: string, items: readonly VectorItem[]): Promise<void>;
  search(tenant: string, vector: Float32Array, k: number, filter?: VectorFilter): Promise<VectorHit[]>;
  get(tenant: string, ids: readonly string[]): Promise<VectorItem[]>;
  delete(tenant: string, ids: readonly string[]): Promise<void>;
  deleteTenant(tenant: string): Promise<void>;
  /**
   * Erasure of one conversation: deletes every item whose payload names it (records and raw turns),
   * returning how many were deleted. Optional: without it the caller deletes by the ids it knows.
   */
  deleteConversation?(tenant: string, conversation: string): Promise<number>;
  /**
   * After an erasure of the tenant's items: rewrites what the store keeps on disk so that deleted
   * vectors are gone from its files, not only marked deleted. Optional: a store that keeps no
   * deleted vectors (or cannot purge them) leaves it out.
   */
  purgeDeleted?(tenant: string): Promise<void>;
  count(tenant: string): Promise<number>;
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** A raw turn kept for the fallback route, as stored. */
export interface StoredTurn extends SegmentTurn {
  tenant: string;
  conversation: string;
  segmentId: string;
}

export interface TimeWindow {
  from: number;
  to: number;
}

/** The record store lists with the read side's query and page shapes (services/core/query-types.ts). */
export type { RecordPage, RecordQuery };

export interface ScoredId {
  id: string;
  score: number;
}

/** Everything derived from a segment's records, written in one idempotent batch. */
export interface IndexBatch {
  tenant: string;
  conversation: string;
  segment: Segment;
  records: MemoryRecord[];
  /** Event frames: groups of record ids from the same segment and neighbouring turns. */
  eventFrames: { id: string; recordIds: string[]; turnIds: string[] }[];
}

/**
 * How two records relate after consolidation, as a directed edge from the newer record:
 * SUPERSEDES (from replaces to: to got valid.to and superseded_by), REFINES (from adds detail to to;
 * both stay current), DUPLICATE_OF (from was merged into the canonical, older to).
 */
export type RecordRelationKind = "SUPERSEDES" | "REFINES" | "DUPLICATE_OF";

export interface RecordRelation {
  from: string;
  to: string;
  relation: RecordRelationKind;
  /** When the relation took effect: the newer record's time (deterministic, not the clock). */
  at: string;
  /** Why the consolidator decided so (the rule or the decider's explanation). */
  reason?: string;
}

/** What the consolidator decided about one update candidate. */
export type CandidateDecision = "duplicate" | "refinement" | "contradiction" | "unrelated";

/**
 * One consolidation write. Each op checks its precondition inside the transaction (both records
 * exist; the one to be superseded is still current) and is skipped as a whole when it fails.
 */
export type ConsolidationOp =
  /** older.valid = {to: validTo, supersededBy: newer}; edge newer -SUPERSEDES-> older. */
  | { kind: "supersede"; older: string; newer: string; validTo: string; reason?: string }
  /**
   * duplicate.valid = {to: validTo, supersededBy: canonical}; canonical.mergedSources gains the
   * duplicate's source (and its merged sources); edge duplicate -DUPLICATE_OF-> canonical.
   */
  | { kind: "merge"; canonical: string; duplicate: string; validTo: string; reason?: string }
  /** edge from -REFINES-> to; nothing else changes. */
  | { kind: "link"; from: string; to: string; relation: "REFINES"; at: string; reason?: string };

/** One record's consolidation decision: applied atomically, with its candidates marked done. */
export interface ConsolidationChange {
  tenant: string;
  ops: ConsolidationOp[];
  /** Candidate rows settled by this change (kept, marked done with the decision). */
  settled: { recordId: string; candidateId: string; decision: CandidateDecision }[];
}

export interface ConsolidationApplied {
  superseded: number;
  merged: number;
  linked: number;
  /** Ops whose precondition no longer held (e.g. the record was superseded meanwhile). */
  skipped: number;
}

export interface ApplyHooks {
  /** Called inside the transaction after every write and before the commit; throwing rolls it all back. */
  beforeCommit?(): void;
}

/** A record's versions: the records connected by SUPERSEDES / DUPLICATE_OF edges, plus REFINES neighbours. */
export interface VersionGraph {
  records: MemoryRecord[];
  relations: RecordRelation[];
}

/** What an erasure removed from the graph store (the vector ids to delete with it). */
export interface ErasedIds {
  records: string[];
  /** turnRowId(conversation, turnId) of every erased raw turn. */
  turns: string[];
  /** Records of other conversations restored to current because their superseder was erased. */
  restored: number;
}

/**
 * The graph/record store: records, entity/topic/time/event-frame indexes,
 * segments with their raw turns, lexical search. Every method is tenant-scoped.
 */
export interface GraphStore {
  writeBatch(batch: IndexBatch): Promise<void>;
  getRecords(tenant: string, ids: readonly string[]): Promise<MemoryRecord[]>;
  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage>;
  countRecords(tenant: string, conversation?: string): Promise<number>;
  searchRecordsLexical(tenant: string, text: string, k: number, conversation?: string): Promise<ScoredId[]>;
  searchTurnsLexical(tenant: string, text: string, k: number, conversation?: string): Promise<ScoredId[]>;
  recordsByEntities(tenant: string, entities: readonly string[], k: number, conversation?: string): Promise<ScoredId[]>;
  recordsByTopics(tenant: string, topics: readonly string[], k: number, conversation?: string): Promise<ScoredId[]>;
  recordsInTime(tenant: string, window: TimeWindow, k: number, conversation?: string): Promise<ScoredId[]>;
  /** Records sharing an event frame with any of the given records. */
  eventFrameNeighbours(tenant: string, recordIds: readonly string[], k: number): Promise<ScoredId[]>;
  getTurns(tenant: string, turnKeys: readonly { conversation: string; turnId: string }[]): Promise<StoredTurn[]>;
  /** Turn ids are unique per conversation; the store keys them as conversation + turn id. */
  getTurnsByRowIds(tenant: string, rowIds: readonly string[]): Promise<StoredTurn[]>;
  knownEntities(tenant: string, conversation?: string): Promise<string[]>;
  knownTopics(tenant: string, conversation?: string): Promise<string[]>;
  countSegments(tenant: string, conversation?: string): Promise<number>;
  putUpdateCandidates(candidates: readonly UpdateCandidate[]): Promise<void>;
  /**
   * Pending (not yet consolidated) update candidates of whole records: at most `maxRecords`
   * records, oldest record first, each with all its pending candidates.
   */
  pendingUpdateCandidates(tenant: string, maxRecords: number): Promise<UpdateCandidate[]>;
  /** Tenants with pending update candidates, sorted. */
  tenantsWithPendingCandidates(): Promise<string[]>;
  countPendingCandidates(tenant?: string): Promise<number>;
  /** Applies one consolidation decision in one transaction (all or nothing). */
  applyConsolidation(change: ConsolidationChange, hooks?: ApplyHooks): Promise<ConsolidationApplied>;
  /** Consolidation edges touching any of the records. */
  relationsOf(tenant: string, ids: readonly string[]): Promise<RecordRelation[]>;
  /** The version chain of a record (empty when the record is unknown to the tenant). */
  versionGraph(tenant: string, id: string): Promise<VersionGraph>;
  putDeadLetter(letter: DeadLetter): Promise<void>;
  listDeadLetters(limit: number): Promise<DeadLetter[]>;
  deleteTenant(tenant: string): Promise<void>;
  /**
   * Erasure of one conversation: its records with every index row, FTS row, candidate and edge,
   * its segments, raw turns and dead letters. Records of other conversations that it had
   * superseded become current again; merged sources from it are removed.
   */
  deleteConversation(tenant: string, conversation: string): Promise<ErasedIds>;
  /**
   * After an erasure (every store's deletes done): removes what the store's files still keep of
   * deleted data (free space, full-text segments, write-ahead log), as far as the store allows.
   * Optional; docs/erasure.md says what each store guarantees.
   */
  purgeDeleted?(): Promise<void>;
  close(): Promise<void>;
}

/** Keyed stage state (a stage's open segment, disambiguation context), durable. */
export interface StateStore {
  get<T>(stage: string, key: string): Promise<T | undefined>;
  put<T>(stage: string, key: string, value: T): Promise<void>;
  delete(stage: string, key: string): Promise<void>;
  keys(stage: string): Promise<string[]>;
}

export type { Entity };
