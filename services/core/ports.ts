import type { QueryPlan } from "./service.ts";
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

export interface RecordQuery {
  conversation?: string;
  entity?: string;
  type?: RecordType;
  timeFrom?: number;
  timeTo?: number;
  /** Include superseded versions (default false: current versions only). */
  includeSuperseded?: boolean;
  limit: number;
  /** Opaque cursor from the previous page. */
  cursor?: string;
}

export interface RecordPage {
  records: MemoryRecord[];
  nextCursor?: string;
}

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
  putDeadLetter(letter: DeadLetter): Promise<void>;
  listDeadLetters(limit: number): Promise<DeadLetter[]>;
  deleteTenant(tenant: string): Promise<void>;
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
