import type { ConversationSummary, SegmentKey } from "./explorer.ts";
import type { QueryPlan, RecordPage, RecordQuery } from "./query-types.ts";
import type { Neighbour } from "./text/fuzzy-terms.ts";
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
  /** The model's own time on those calls: its forward passes, not a call's wait behind others. */
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

/** How sub-token keep probabilities become a word's probability. */
export type WordAggregation = "mean" | "first" | "max";

export interface AttentionRequest {
  /** Average the last `upperLayers` layers (default: the upper half, at least one). */
  upperLayers?: number;
}

/** One sequence's result; positions are over [special, content..., special]. */
export interface ClassifiedSequence {
  /** Keep probability of every content token (specials excluded), length = content length. */
  keep: Float32Array;
  /**
   * Attention averaged over the chosen layers and all heads, row-major [n, n] with
   * n = content length + number of special tokens (specials included: row/column 0 is the
   * leading special token). Present only when attentions were asked for.
   */
  attention?: Float32Array;
  /** n above. */
  size: number;
}

/**
 * An LLMLingua-2-style token classifier (a keep probability per sub-token, optionally the
 * encoder's self-attention): what the ONNX compressor and the segmenter's attention boundaries
 * need from the model, so they hold the decision logic and never load a model themselves.
 */
export interface TokenClassifier {
  readonly name: string;
  /** Content tokens per sequence: the model window minus the special tokens. */
  readonly capacity: number;
  /** Leading special tokens the model sees before the content (1 for [CLS] / <s>). */
  readonly prefixLength: number;
  /** The model's preferred word aggregation (its manifest's). */
  readonly aggregation: WordAggregation;
  /** Whether run() can return attentions. */
  readonly hasAttentions: boolean;
  /** Sub-token ids of one whitespace-free word, without special tokens. */
  wordPieces(word: string): number[];
  /** Classifies content sequences (each at most `capacity` ids); results in input order. */
  run(sequences: readonly (readonly number[])[], attention?: AttentionRequest): Promise<ClassifiedSequence[]>;
  close(): Promise<void>;
}

/** Token positions [start, end) of one turn inside an attention window. */
export interface TurnSpan {
  start: number;
  end: number;
}

/** The self-attention over one window of consecutive turns. */
export interface WindowAttention {
  /**
   * Attention averaged over the model's upper layers and all heads, row-major [size, size], rows =
   * queries (each a softmax over the keys); positions over [special, content..., special].
   */
  attention: Float32Array;
  size: number;
  /** Each turn's tokens in the window (truncated to fit; empty for a turn without tokens). */
  spans: TurnSpan[];
}

/**
 * A sentence encoder's own self-attention over windows of consecutive turns (docs/segmenter.md):
 * what the segmenter's attention boundaries read, so the segmenter holds the decision logic and
 * never loads a model itself.
 */
export interface TurnAttention {
  readonly id: string;
  /** Content tokens per window: the model window minus the special tokens. */
  readonly capacity: number;
  /** Windows (each a run of consecutive turn texts) in batched forward passes; results in input order. */
  attend(windows: readonly (readonly string[])[]): Promise<WindowAttention[]>;
  close(): Promise<void>;
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

/** Who a call is for: the pipeline stage (encoder, planner, answer) and the tenant. */
export interface LlmCallMeta {
  stage: string;
  tenant: string;
}

/**
 * A request that says whom its cost is booked to. Metering is part of the port's contract: a
 * caller that wants its calls attributed passes `meta`, and an adapter reports every call (meta,
 * usage, latency) to its usage sink; a call without meta is booked as unattributed.
 */
export interface MeteredLlmRequest extends LlmRequest {
  meta?: LlmCallMeta;
}

export interface LlmResponse {
  text: string;
  usage: LlmUsage;
}

export interface Llm {
  readonly id: string;
  complete(req: MeteredLlmRequest): Promise<LlmResponse>;
}

/** One completed (or failed) LLM call, as an adapter reports it. */
export interface LlmUsageEvent {
  stage: string;
  tenant: string;
  /** Adapter id, e.g. "openai:gpt-4.1-mini" or "llama:gemma-3-270m-q4_k_m". */
  llm: string;
  usage: LlmUsage;
  /** Wall time of the call, retries and back-off included. */
  ms: number;
  ok: boolean;
  /** HTTP attempts (openai) or 1 (local). */
  attempts: number;
}

/** Where an adapter reports its calls (cost per stage and per tenant). */
export type LlmUsageSink = (event: LlmUsageEvent) => void;

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
  /**
   * Whether plan() waits on a model (an LLM call). The query then embeds the question while the
   * planner waits, so the two overlap. A planner that only computes (false) leaves nothing to
   * overlap, since the ONNX embedder runs on the event loop too: the query embeds the texts the
   * routes need after planning, together in one call.
   */
  readonly waitsOnModel: boolean;
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
  /**
   * The second-opinion model's vector of the same text, when one is configured
   * (services/query/second-opinion.ts): kept beside the item and read by id, never searched, so it
   * needs no index of its own and goes with the item on every delete. An upsert without it clears a
   * stored one, as it replaces the rest of the item.
   */
  second?: Float32Array;
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
/** One search of a batch (VectorStore.searchMany). */
export interface VectorQuery {
  vector: Float32Array;
  k: number;
  filter?: VectorFilter;
}

export interface VectorStore {
  upsert(tenant: string, items: readonly VectorItem[]): Promise<void>;
  search(tenant: string, vector: Float32Array, k: number, filter?: VectorFilter): Promise<VectorHit[]>;
  /**
   * Several searches of one tenant, each answered as search() would answer it, in the order asked.
   * Optional: a store where each search is a round trip to a server (Neo4j) answers them together;
   * without it the caller runs search() per query.
   */
  searchMany?(tenant: string, queries: readonly VectorQuery[]): Promise<VectorHit[][]>;
  get(tenant: string, ids: readonly string[]): Promise<VectorItem[]>;
  /**
   * The vectors of these ids alone, as get() would return them (ids the store does not hold are
   * absent). Optional: a store that keeps a payload apart from its vector skips decoding it (a
   * query's reranks read a few hundred vectors and never their payloads); without it the caller
   * uses get().
   */
  getVectors?(tenant: string, ids: readonly string[]): Promise<ReadonlyMap<string, Float32Array>>;
  /**
   * The second-opinion vectors (VectorItem.second) of these ids; ids without one are absent.
   * Optional: without it the query embeds its candidates' texts with the second model itself.
   */
  getSecondVectors?(tenant: string, ids: readonly string[]): Promise<ReadonlyMap<string, Float32Array>>;
  /**
   * A page of the tenant's ids without a second-opinion vector, in the store's id order after
   * `after` (undefined: from the start), at most `limit`. With setSecondVectors, what the backfill
   * of items written before the setting was on walks (composition/second-opinion-backfill.ts);
   * optional with it.
   */
  idsWithoutSecond?(tenant: string, after: string | undefined, limit: number): Promise<string[]>;
  /**
   * Sets the second-opinion vectors of items the store holds and changes nothing else of them; an
   * id it does not hold (deleted meanwhile) stays absent, never written as a new item. Returns how
   * many items were set.
   */
  setSecondVectors?(tenant: string, vectors: ReadonlyMap<string, Float32Array>): Promise<number>;
  delete(tenant: string, ids: readonly string[]): Promise<void>;
  deleteTenant(tenant: string): Promise<void>;
  /**
   * Erasure of one conversation: deletes every item whose payload names it (records and raw turns),
   * returning how many were deleted. Optional: without it the caller deletes by the ids it knows.
   */
  deleteConversation?(tenant: string, conversation: string): Promise<number>;
  /**
   * Erasure of raw turns alone: every item of kind "turn" of the conversation, or with none of the
   * whole tenant, by payload (a turn's vector is written before its row: it may have no row);
   * records' vectors stay. Returns how many were deleted. What the indexer's raw-turn consumer
   * erases, it writes nothing else (services/indexer/erase-in-stores.ts).
   */
  deleteRawTurns(tenant: string, conversation?: string): Promise<number>;
  /**
   * After an erasure of the tenant's items: rewrites what the store keeps on disk so that deleted
   * vectors are gone from its files, not only marked deleted. Optional: a store that keeps no
   * deleted vectors (or cannot purge them) leaves it out.
   */
  purgeDeleted?(tenant: string): Promise<void>;
  /**
   * The tenants holding any item whose name starts with the prefix, sorted. Optional: what the
   * indexer's warm-up uses to find the scratch tenants of a process killed before it erased them
   * (services/indexer/warm-up.ts); a store that cannot list its tenants leaves it out.
   */
  tenantsNamed?(prefix: string): Promise<string[]>;
  count(tenant: string): Promise<number>;
  flush(): Promise<void>;
  /**
   * Writes the on-disk cache of at most `tenants` tenants changed since it was last written (what
   * flush() writes for all); true while more are left. Optional: what the embedded engine does when
   * idle, so that a crash leaves few tenants to rebuild (a store without such a cache leaves it out).
   */
  flushSome?(tenants: number): Promise<boolean>;
  close(): Promise<void>;
}

/** A raw turn kept for the fallback route, as stored. */
export interface StoredTurn extends SegmentTurn {
  tenant: string;
  conversation: string;
  /** OPEN_SEGMENT_ID while the turn was written ahead of its segment (writeTurns) and that segment is not yet indexed. */
  segmentId: string;
}

/** The segment id of a raw turn written as it arrived, before its segment closed (TurnStore.writeTurns). */
export const OPEN_SEGMENT_ID = "";

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

// -------------------------------------------------------------------------------------------------
// The graph store, by role. Every method is tenant-scoped. The rules that must hold whatever the
// store (applying consolidation, erasing a conversation) are written once above the stores
// (services/consolidator/apply.ts, erasure.ts) over GraphTransactions; a store implements only
// the primitives.

/** Records and what the indexer writes with them: one idempotent batch per segment. */
export interface RecordStore {
  writeBatch(batch: IndexBatch): Promise<void>;
  getRecords(tenant: string, ids: readonly string[]): Promise<MemoryRecord[]>;
  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage>;
  countRecords(tenant: string, conversation?: string): Promise<number>;
  countSegments(tenant: string, conversation?: string): Promise<number>;
}

/**
 * The entity / topic / time / event-frame indexes the query routes read: current records, or with
 * `validAt` (epoch ms, an as-of query) the versions valid at that moment, superseded ones included
 * (valid.from <= validAt < valid.to).
 */
export interface RecordIndexes {
  recordsByEntities(
    tenant: string,
    entities: readonly string[],
    k: number,
    conversation?: string,
    validAt?: number,
  ): Promise<ScoredId[]>;
  recordsByTopics(
    tenant: string,
    topics: readonly string[],
    k: number,
    conversation?: string,
    validAt?: number,
  ): Promise<ScoredId[]>;
  /**
   * Several tenant-wide, current-only recordsByTopics lookups, each answered as
   * recordsByTopics(tenant, topics, k) would, in the order asked. Optional: a store where each
   * lookup is a round trip to a server (Neo4j) answers them together; without it the caller runs
   * recordsByTopics per lookup.
   */
  recordsByTopicsMany?(
    tenant: string,
    lookups: readonly { topics: readonly string[]; k: number }[],
  ): Promise<ScoredId[][]>;
  /**
   * How many of the records recordsByEntities / recordsByTopics would return for this one key,
   * counted up to `cap` (min(matches, cap)): a selectivity test whose cost is bounded by the cap,
   * not by how often the key occurs in the tenant.
   */
  countRecordsByKey(
    tenant: string,
    index: "entity" | "topic",
    key: string,
    cap: number,
    conversation?: string,
    validAt?: number,
  ): Promise<number>;
  recordsInTime(
    tenant: string,
    window: TimeWindow,
    k: number,
    conversation?: string,
    validAt?: number,
  ): Promise<ScoredId[]>;
  /** Records sharing an event frame with any of the given records. */
  eventFrameNeighbours(tenant: string, recordIds: readonly string[], k: number, validAt?: number): Promise<ScoredId[]>;
  knownEntities(tenant: string, conversation?: string): Promise<string[]>;
  knownTopics(tenant: string, conversation?: string): Promise<string[]>;
}

/**
 * BM25 over the shared lexical terms (services/core/lexical.ts) of current records (or, with
 * `validAt`, of the versions valid then, as RecordIndexes) and raw turns.
 */
export interface LexicalSearch {
  searchRecordsLexical(
    tenant: string,
    text: string,
    k: number,
    conversation?: string,
    validAt?: number,
  ): Promise<ScoredId[]>;
  /** Ids are turnRowId(conversation, turnId). */
  searchTurnsLexical(tenant: string, text: string, k: number, conversation?: string): Promise<ScoredId[]>;
}

/**
 * The lexical index's vocabulary, read to tolerate misspelled rare terms (core/text/fuzzy-terms.ts).
 * Optional on a graph store (GraphStore has it as Partial): without it a query makes no corrections.
 * Scope: the tenant, or one of its conversations; any record version or raw turn counts.
 */
export interface LexicalVocabulary {
  /** Of these lexical terms, those that occur in the scope. */
  lexicalTermsPresent(tenant: string, terms: readonly string[], conversation?: string): Promise<string[]>;
  /**
   * Terms of the scope within `maxDistance` edits of `term`, closest first (nearestPresent over
   * neighboursWithin), read from the term's prefix buckets, at most VOCABULARY_SCAN_LIMIT index
   * terms each: the read is bounded whatever the size of the index.
   */
  lexicalNeighbours(tenant: string, term: string, maxDistance: number, conversation?: string): Promise<Neighbour[]>;
}

/**
 * Segments as the indexer wrote them (turns with compressed text, boundary decisions) and the
 * records each yielded: what the browser explorer reads (services/core/explorer.ts).
 */
export interface SegmentStore {
  /** Conversations with at least one segment, by name, after `after` (exclusive). */
  listConversations(tenant: string, limit: number, after?: string): Promise<ConversationSummary[]>;
  /** A conversation's segments in time order (start, then id), after `after` (exclusive). */
  listSegments(tenant: string, conversation: string, limit: number, after?: SegmentKey): Promise<Segment[]>;
  /** Every stored record (superseded versions included) whose source is one of these segments. */
  recordsOfSegments(tenant: string, segmentIds: readonly string[]): Promise<MemoryRecord[]>;
}

/** Raw turns kept for the fallback route (by row id: getTurnsByRowIds in services/core/turn-order.ts). */
export interface TurnStore {
  /** Turn ids are unique per conversation; the store keys them as conversation + turn id. */
  getTurns(tenant: string, turnKeys: readonly { conversation: string; turnId: string }[]): Promise<StoredTurn[]>;
  /**
   * Raw turns as they arrive, ahead of their segment (issue 18: queryable within seconds, not at
   * segment close): row and lexical terms, segment id OPEN_SEGMENT_ID. Idempotent; the segment's
   * writeBatch later names the segment on these rows (and leaves their text as it is).
   */
  writeTurns(tenant: string, conversation: string, turns: readonly SegmentTurn[]): Promise<void>;
}

/** Update candidates waiting for sleep-time consolidation, and the edges it left (versions, history). */
export interface VersionStore {
  putUpdateCandidates(candidates: readonly UpdateCandidate[]): Promise<void>;
  /**
   * Pending (not yet consolidated) update candidates of whole records: at most `maxRecords`
   * records, oldest record first, each with all its pending candidates.
   */
  pendingUpdateCandidates(tenant: string, maxRecords: number): Promise<UpdateCandidate[]>;
  /** Tenants with pending update candidates, sorted. */
  tenantsWithPendingCandidates(): Promise<string[]>;
  countPendingCandidates(tenant?: string): Promise<number>;
  /** Consolidation edges touching any of the records (a record's version graph: walkVersionGraph). */
  relationsOf(tenant: string, ids: readonly string[]): Promise<RecordRelation[]>;
}

/** What a rule reads at the start of its transaction. */
export interface TransactionReads {
  /** Stored records of the tenant with these ids (unknown ids are left out). */
  records?: readonly string[];
  /** A conversation about to be erased: what it holds and which records of others depend on it. */
  conversation?: string;
  /**
   * With `conversation`: read at most this many of its records and raw turns together (records
   * first), for one step of an erasure in several transactions (eraseConversation), so that no one
   * transaction holds the store (and, on SQLite, the event loop) for the whole conversation.
   */
  limit?: number;
  /**
   * With `conversation`, false: the records of other conversations that depend on it are not read
   * (dependants is empty). A tenant's erasure, where they go too, has nothing to repair.
   */
  dependants?: boolean;
}

/** What a conversation holds, read inside the transaction that erases it. */
export interface ConversationHoldings {
  /** Ids of its records (with a limit, the first of them). */
  recordIds: string[];
  /** Turn ids of its raw turns, not row ids (with a limit, what it leaves room for after the records). */
  turnIds: string[];
  /** Whether every record and raw turn of it was read: no limit, or fewer than it. */
  complete: boolean;
  /**
   * Records of other conversations that may depend on it: superseded by one of the records read,
   * or, when complete, carrying merged sources (a superset; the erasure rule decides what to
   * rewrite). Merged sources are repaired in the last step, after which none can name it.
   */
  dependants: MemoryRecord[];
}

export interface TransactionView {
  /** The records asked for, by id, freshly read (the rule may change its copies). */
  records: Map<string, MemoryRecord>;
  /** Empty when no conversation was asked for. */
  conversation: ConversationHoldings;
}

/** A candidate row consolidation settled (kept, marked done with the decision). */
export interface SettledCandidate {
  recordId: string;
  candidateId: string;
  decision: CandidateDecision;
}

/** What a rule writes, applied by the store in this order, inside the same transaction. */
export interface TransactionWrites {
  /** Stored records rewritten whole (their validity and merged sources; derived columns follow). */
  records?: readonly MemoryRecord[];
  /** Edges added (an edge already there is kept as it is). */
  relations?: readonly RecordRelation[];
  /** Candidate rows marked done with their decision at `decidedAt`. */
  settled?: { rows: readonly SettledCandidate[]; decidedAt: string };
  /** Records deleted with every derived row (index and full-text rows), and the candidates and edges touching them. */
  deleteRecords?: readonly string[];
  /** Raw turns of a conversation with their full-text rows, by turn id: a step of its erasure. */
  deleteTurns?: { conversation: string; turnIds: readonly string[] };
  /** A conversation's segments, raw turns (with their full-text rows) and event frames. */
  deleteConversation?: string;
  /** Dead letters with these partition keys. */
  deleteDeadLetters?: readonly string[];
}

export interface ApplyHooks {
  /** Called inside the transaction after every write and before the commit; throwing rolls it all back. */
  beforeCommit?(): void;
}

/**
 * The narrow transactional port the consolidation and erasure rules run over. In one write
 * transaction of the tenant: read what `reads` names, let `decide` (synchronous and pure: the
 * same view gives the same writes, so a store may retry a transient failure) choose the writes,
 * apply them, call beforeCommit, commit. A throw anywhere rolls the whole transaction back.
 */
export interface GraphTransactions {
  /**
   * Records and raw turns per transaction of an erasure (core/erasure.ts). Undefined: ERASURE_STEP,
   * for a store whose transactions hold the caller's event loop (SQLite). Infinity: a conversation
   * in one transaction and a tenant through deleteTenant, for a store on a server (Neo4j), where
   * steps would hold nothing and only add round trips.
   */
  readonly erasureStep?: number;
  transact<T>(
    tenant: string,
    reads: TransactionReads,
    decide: (view: TransactionView) => { writes: TransactionWrites; result: T },
    hooks?: ApplyHooks,
  ): Promise<T>;
}

/** Operations: dead letters, tenant erasure, on-disk purge, shutdown. */
export interface GraphMaintenance {
  putDeadLetter(letter: DeadLetter): Promise<void>;
  listDeadLetters(limit: number): Promise<DeadLetter[]>;
  /**
   * Erasure of a tenant: every row of it, whatever kind (a conversation: eraseConversation).
   * Returns the ids of the records it deleted, superseded versions included, read where they were
   * deleted: a record written meanwhile (an indexer in another process) is either deleted and named
   * or still there afterwards, never deleted unnamed (its update-queue tombstone needs its id).
   */
  deleteTenant(tenant: string): Promise<string[]>;
  /**
   * The conversations of the tenant that hold a record or a segment, sorted: what a partition's
   * share of a tenant erasure goes through, conversation by conversation (eraseConversation).
   */
  tenantConversations(tenant: string): Promise<string[]>;
  /**
   * Every row of the tenant, in one transaction, unless it holds a record: then nothing, and false.
   * It never deletes a record, so a record another process writes meanwhile stays for the erasure
   * that owns it to find and name (services/indexer/erase-in-stores.ts). What is left of a tenant
   * once every conversation of it is erased (names, days, the tenant's own rows).
   */
  deleteTenantIfEmpty(tenant: string): Promise<boolean>;
  /**
   * The tenants holding any row whose name starts with the prefix, sorted, whatever kind of row
   * (a tenant erasure interrupted part way leaves some kinds only). Optional, as VectorStore's.
   */
  tenantsNamed?(prefix: string): Promise<string[]>;
  /**
   * Erasure of raw turns alone (TurnStore rows with their full-text rows and lexical counts) of the
   * conversation, or with none of the whole tenant; records, segments and everything else stay.
   * Returns how many turn rows were deleted. What the indexer's raw-turn consumer erases: it writes
   * nothing else, and records are the records consumer's to erase (after their candidate sets).
   */
  deleteRawTurns(tenant: string, conversation?: string): Promise<number>;
  /**
   * After an erasure (every store's deletes done): removes what the store's files still keep of
   * deleted data (free space, full-text segments, write-ahead log), as far as the store allows.
   * Optional; docs/erasure.md says what each store guarantees.
   */
  purgeDeleted?(): Promise<void>;
  /**
   * One bounded step of index upkeep while the store is idle: merges of the full-text index's
   * segments, writing about `pages` pages. True while more work remains (call again later),
   * false when there is none. Optional: a store without such upkeep leaves it out.
   */
  mergeIndexSegments?(pages: number): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * The graph/record store: records, entity/topic/time/event-frame indexes, segments with their raw
 * turns, lexical search, consolidation state. The intersection of the role ports: a caller that
 * needs one role asks for that port.
 */
export interface GraphStore
  extends RecordStore,
    RecordIndexes,
    LexicalSearch,
    TurnStore,
    SegmentStore,
    VersionStore,
    GraphTransactions,
    GraphMaintenance,
    Partial<LexicalVocabulary> {}

/** Keyed stage state (a stage's open segment, disambiguation context), durable. */
export interface StateStore {
  get<T>(stage: string, key: string): Promise<T | undefined>;
  put<T>(stage: string, key: string, value: T): Promise<void>;
  delete(stage: string, key: string): Promise<void>;
  keys(stage: string): Promise<string[]>;
}

export type { Entity };
