import { setImmediate as nextTick } from "node:timers/promises";
import { runConsolidation } from "../consolidator/consolidator.ts";
import { eraseConversation, eraseTenant } from "../consolidator/erasure.ts";
import { buildHistory } from "../consolidator/history.ts";
import { ConsolidationScheduler, parseWindow, type TriggerReason } from "../consolidator/scheduler.ts";
import type {
  ConsolidationDecider,
  ConsolidationReport,
  ConsolidationSettings,
  ErasureReport,
  MemoryMaintenance,
  RecordHistory,
} from "../consolidator/types.ts";
import type { ConversationPage, ExplorerPage, ExplorerReader, Timeline } from "../core/explorer.ts";
import { parseConversationKey } from "../core/keys.ts";
import { LruCache } from "../core/lru-cache.ts";
import type { Health, IngestResult, MemoryService } from "../core/memory-service.ts";
import {
  type Compressor,
  costOfError,
  type Embedder,
  type GraphStore,
  type LlmCost,
  type QueryPlanner,
  type RecordPage,
  type RecordQuery,
  type SegmentEncoder,
  type StateStore,
  type TurnAttention,
  type VectorStore,
} from "../core/ports.ts";
import type { QueryResult } from "../core/query-types.ts";
import type { QueryRequest, TurnInput } from "../core/requests.ts";
import { SERVER_TURN_ID_PREFIX } from "../core/turn-ids.ts";
import { turnEmbeddingText } from "../core/turn-text.ts";
import { validateTurns } from "../core/turn-validation.ts";
import {
  type DeadLetter,
  type DisambiguationContext,
  keyOf,
  type MemoryRecord,
  type Segment,
  type SensoryTurn,
} from "../core/types.ts";
import { walkVersionGraph } from "../core/version-graph.ts";
import { emptyContext } from "../encoder/extractor.ts";
import { DEFAULT_CANDIDATE_SETTINGS } from "../indexer/candidates.ts";
import { indexSegment } from "../indexer/indexer.ts";
import { type ArrivingTurn, indexRawTurns } from "../indexer/raw-turns.ts";
import { StoreExplorerReader } from "../query/explorer-reader.ts";
import { StoreMemoryReader } from "../query/memory-reader.ts";
import type { QuerySettings } from "../query/query.ts";
import type { SecondOpinion } from "../query/second-opinion.ts";
import { type WarmUpResult, warmUpQueries } from "../query/warm-up.ts";
import { AttentionScorer, type TurnPair } from "../segmenter/attention-scorer.ts";
import {
  initialSegmenterState,
  isIdle,
  type SegmenterConfig,
  type SegmenterState,
  segmenterStep,
  upgradeSegmenterState,
} from "../segmenter/segment-state.ts";
import { compressTurn } from "../sensory/compress-turn.ts";
import { BoundedQueue } from "./bounded-queue.ts";
import { withinBudget } from "./budget.ts";
import type { DurableLog, InboxEntry, InboxExclusion } from "./durable-log.ts";

/** What the runtime reports as it works (the Prometheus Metrics class satisfies it). */
export interface PipelineObserver {
  stageEvent(stage: string, outcome: "ok" | "error" | "dlq", seconds?: number): void;
  segmentClosed(reason: string): void;
  recordsWritten(n: number): void;
  /** Optional: LLM tokens spent writing memory (construction), per stage and tenant. */
  constructionTokens?(stage: string, tenant: string, usage: { inputTokens: number; outputTokens: number }): void;
  /** Optional: every indexed segment with its records (the demo prints them). */
  segmentIndexed?(segment: Segment, records: readonly MemoryRecord[]): void;
}

export interface EngineParts {
  log: DurableLog;
  graph: GraphStore;
  vectors: VectorStore;
  state: StateStore;
  embedder: Embedder;
  /**
   * A second embedding model (config secondOpinion): its vector of every record and raw turn is
   * stored beside the first's, and the query fuses its order of the candidates in.
   */
  secondOpinion?: SecondOpinion;
  compressor: Compressor;
  encoder: SegmentEncoder;
  planner?: QueryPlanner;
  observer?: PipelineObserver;
  /** Consolidation strategy (default: the deterministic rules). */
  decider?: ConsolidationDecider;
  /** The turn attention the segmenter's boundaries read (settings.segmenter.boundaries attention / both). */
  attention?: TurnAttention;
}

export interface EngineSettings {
  keepRate: number;
  segmenter: SegmenterConfig;
  query: QuerySettings;
  queueCapacity: number;
  /** Inbox entries read and embedded together by the first stage. */
  batchSize: number;
  clock?: () => number;
  /**
   * Longest a turn's asynchronous processing (embedding, sensory compression) may take before the
   * turn is dead-lettered and the pipeline goes on (default 30 s).
   */
  turnBudgetMs?: number;
  /** Longest a segment's encoding (extractor or LLM) may take before it is dead-lettered (default 300 s). */
  segmentBudgetMs?: number;
  /**
   * Unfinished attempts (the process stopped while on it) after which an inbox entry or a pending
   * segment is dead-lettered on restart instead of tried again (default 3).
   */
  maxAttempts?: number;
  /**
   * Conversations whose segmenter and encoder state stay in memory (default 10,000; config
   * cache.conversationStates). Beyond it the least recently active is dropped (it is in the state
   * store); one dropped with an open segment has it closed as an idle one would be.
   */
  conversationStates?: number;
  /** Turn-pair attention shares memoised (boundaries attention / both; config cache.attentionPairs). */
  attentionPairs?: number;
  /**
   * Sleep-time consolidation: candidate threshold, concurrency and the off-peak scheduler
   * (window / idle trigger). Absent: candidates with the defaults, no scheduler; consolidate() on demand works.
   */
  consolidation?: ConsolidationSettings;
}

/** Options of one on-demand consolidation (tests inject a crash through beforeCommit). */
export interface ConsolidateCallOptions {
  beforeCommit?: (ordinal: number, committed: number) => void;
}

/** Segmenter state carries the last inbox seq it took in, which makes a replay after a crash a no-op. */
interface KeyedSegmenterState extends SegmenterState {
  lastSeq: number;
}
interface KeyedEncoderState {
  lastSeq: number;
  context: DisambiguationContext;
}

const SEGMENTER = "segmenter";
const ENCODER = "encoder";
const INBOX_CURSOR = "inbox";
/**
 * Idle-time merge of the graph store's full-text index (GraphMaintenance.mergeIndexSegments):
 * pages per step (one short write transaction: ~2-6 ms on a 40,000-record store) and steps per
 * idle tick at most, so a tick's work is bounded and a large index is merged over several ticks.
 */
const INDEX_MERGE_PAGES = 64;
const INDEX_MERGE_STEPS_PER_TICK = 64;
/** The stage name its steps are reported under (PipelineObserver.stageEvent). */
const INDEX_MERGE_STAGE = "index-merge";
/**
 * Idle-time write of the vector store's changed index files (VectorStore.flushSome): one tenant per
 * turn of the event loop (a 22K-point tenant's file takes ~30-60 ms), at most this many a tick. A
 * file behind its tenant's writes is rebuilt after a crash (in the background for a large tenant:
 * ~3.5 s of CPU per 22K points), so the engine writes them once ingest has been idle for a tick.
 */
const VECTOR_FLUSH_TENANTS_PER_TICK = 64;
const VECTOR_FLUSH_STAGE = "vector-flush";

/** An erasure's hold on the inbox (EmbeddedEngine.hold): its position, what it erases, how wide it holds. */
interface Hold {
  seq: number;
  tenant: string;
  conversation: string | undefined;
  /** Past the erasure's drain: only its tenant's entries after `seq` wait, the others go on. */
  ownTenantOnly: boolean;
}

/** An idle-time chore (runWhenIdle): the run in progress, and lastActivityMs when it last found nothing left. */
interface IdleChore {
  running?: Promise<void>;
  doneAt?: number;
}
/** Attempt records: the inbox batch in flight, the one entry in flight while isolating, the segment in flight. */
const INBOX_BATCH = "inbox-batch";
const INBOX_ENTRY = "inbox-entry";
const SEGMENT = "segment";
/** Cursor up to which the inbox is processed one entry at a time (the batch a crashed run left unfinished). */
const ISOLATE_CURSOR = "inbox-isolate";

export const DEFAULT_TURN_BUDGET_MS = 30_000;
export const DEFAULT_SEGMENT_BUDGET_MS = 300_000;
export const DEFAULT_MAX_ATTEMPTS = 3;
export const DEFAULT_CONVERSATION_STATES = 10_000;

type TurnEntry = Extract<InboxEntry, { kind: "turn" }>;

interface Progress {
  turns: number;
  segments: number;
  records: number;
}

/**
 * The embedded runtime: every stage in one process. Ingest appends to a durable inbox and returns;
 * the ingest loop (sensory + segmenter) reads the inbox in order, the encode loop (encoder + indexer) takes closed
 * segments through a bounded queue, so a slow indexer holds the segmenter back (backpressure).
 * Durable hand-offs and per-key sequence numbers make a restart resume where it stopped, with no
 * turn lost and no record written twice.
 */
export class EmbeddedEngine implements MemoryService, MemoryMaintenance, ExplorerReader {
  private readonly queue: BoundedQueue<{ seq: number; segment: Segment }>;
  /**
   * Segmenter states of the conversations holding turns (open segment or buffer), bounded: the idle
   * check reads them. The others are in the state store only, read when their next turn comes.
   */
  private readonly segStates: LruCache<string, KeyedSegmenterState>;
  /** Encoder states (disambiguation contexts) of recent conversations, bounded; all are in the state store. */
  private readonly encStates: LruCache<string, KeyedEncoderState>;
  /**
   * The segmenter states the inbox batch in flight has changed and not yet written to the state
   * store: read before segStates, so dropping one from segStates mid-batch loses nothing.
   */
  private batchStates: Map<string, KeyedSegmenterState> | undefined;
  private readonly clock: () => number;
  /** The read side, shared with the distributed query service. */
  private readonly reader: StoreMemoryReader;
  /** What the indexer writes with: the parts, and the second-opinion model when one is on. */
  private readonly indexDeps: EngineParts & { secondEmbedder?: Embedder };
  /** The explorer's read side (the gateway's /ui), shared with the distributed gateway. */
  private readonly explorer: StoreExplorerReader;
  private wake: (() => void) | undefined;
  private ingestLoop: Promise<void> | undefined;
  private encodeLoop: Promise<void> | undefined;
  private stopping = false;
  private inflightEncodes = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  /** The idle timer's period: the segmenter's idle timeout, at most a minute. */
  private idleTickMs = 60_000;
  private drainWaiters: (() => void)[] = [];
  private failure: Error | undefined;
  private lastActivityMs: number;
  private scheduler: ConsolidationScheduler | undefined;
  /** Consolidation and erasure run one at a time. */
  private maintenance: Promise<unknown> = Promise.resolve();
  /**
   * Inbox positions erasures hold the pipeline at, with what each erases (one per erasure called
   * and not yet past its deletes). Until an erasure has drained up to its position (`ownTenantOnly`
   * false), the ingest loop processes no entry after it; then, while its deletes run, only its own
   * tenant's entries after it wait, and the other tenants' go on (erase).
   */
  private readonly holds: Hold[] = [];
  /** The idle-time merge of the full-text index (mergeIndexIfIdle). */
  private readonly indexMerge: IdleChore = {};
  /** The idle-time write of changed vector index files (flushVectorsIfIdle). */
  private readonly vectorFlush: IdleChore = {};
  private closing = false;
  /** The last consolidation's report (on demand or scheduled). */
  lastConsolidation: (ConsolidationReport & { trigger: TriggerReason | "demand" }) | undefined;
  readonly progress: Progress = { turns: 0, segments: 0, records: 0 };
  /** Conversations whose stage state is in memory now (bounded by settings.conversationStates). */
  get statesInMemory(): { segmenter: number; encoder: number } {
    return { segmenter: this.segStates.size, encoder: this.encStates.size };
  }
  private readonly attention: AttentionScorer | undefined;
  /** Construction cost since start: what the encoder's LLM calls (if any) spent. */
  readonly construction: LlmCost = { llmCalls: 0, inputTokens: 0, outputTokens: 0 };

  constructor(
    private readonly parts: EngineParts,
    private readonly settings: EngineSettings,
  ) {
    this.queue = new BoundedQueue(settings.queueCapacity);
    const conversations = settings.conversationStates ?? DEFAULT_CONVERSATION_STATES;
    this.segStates = new LruCache(conversations, (_key, s) => this.evicted(s));
    this.encStates = new LruCache(conversations);
    this.clock = settings.clock ?? Date.now;
    this.lastActivityMs = this.clock();
    const boundaries = settings.segmenter.boundaries ?? "gate";
    if (boundaries !== "gate" && !parts.attention)
      throw new Error(`segmenter boundaries "${boundaries}" need the turn attention model (parts.attention)`);
    this.attention =
      boundaries !== "gate" && parts.attention
        ? new AttentionScorer(parts.attention, settings.attentionPairs)
        : undefined;
    this.indexDeps = parts.secondOpinion ? { ...parts, secondEmbedder: parts.secondOpinion.embedder } : parts;
    this.reader = new StoreMemoryReader({
      graph: parts.graph,
      vectors: parts.vectors,
      embedder: parts.embedder,
      ...(parts.planner ? { planner: parts.planner } : {}),
      ...(parts.secondOpinion ? { secondOpinion: parts.secondOpinion } : {}),
      settings: settings.query,
    });
    this.explorer = new StoreExplorerReader(parts.graph, settings.segmenter.gate.threshold);
  }

  /** Starts the stages; segments left pending by a previous run are indexed first. */
  async start(): Promise<void> {
    const leftover = this.parts.log.pending();
    this.encodeLoop = this.runEncodeLoop();
    for (const p of leftover) await this.queue.push(p);
    this.ingestLoop = this.runIngestLoop();
    this.idleTickMs = Math.min(this.settings.segmenter.idleTimeoutMs, 60_000);
    this.idleTimer = setInterval(() => {
      this.flushIdle();
      this.mergeIndexIfIdle();
      this.flushVectorsIfIdle();
    }, this.idleTickMs);
    this.idleTimer.unref();
    this.startScheduler();
  }

  /** The off-peak consolidation scheduler (unref'd timer; the engine's clock). */
  private startScheduler(): void {
    const c = this.settings.consolidation;
    if (!c) return;
    const window = parseWindow(c.window);
    this.scheduler = new ConsolidationScheduler(
      { idleMs: c.idleMinutes * 60_000, maxInboxLag: c.maxInboxLag, ...(window ? { window } : {}) },
      {
        clock: this.clock,
        lastActivityMs: () => this.lastActivityMs,
        inboxLag: () => this.parts.log.lastInboxSeq() - this.parts.log.cursor(INBOX_CURSOR),
        pending: () => this.parts.graph.countPendingCandidates(),
        run: (reason) => this.runConsolidationExclusive(undefined, reason),
      },
      c.checkIntervalMs,
    );
    this.scheduler.start();
  }

  /** The scheduler, for tests and health (undefined without consolidation settings). */
  get consolidationScheduler(): ConsolidationScheduler | undefined {
    return this.scheduler;
  }

  async ingest(tenant: string, conversation: string, turns: readonly TurnInput[]): Promise<IngestResult> {
    this.assertRunning();
    // A placeholder id for the schema; the log assigns the real one with the conversation's counter.
    const checked = validateTurns(tenant, conversation, turns, () => SERVER_TURN_ID_PREFIX);
    const full = this.parts.log.appendConversationTurns(
      tenant,
      conversation,
      checked,
      turns.map((t) => t.turnId === undefined),
    );
    this.lastActivityMs = this.clock();
    this.wake?.();
    return { accepted: full.length, turnIds: full.map((t) => t.turnId) };
  }

  async flush(tenant: string, conversation?: string): Promise<void> {
    this.assertRunning();
    const keys = conversation ? [{ tenant, conversation }] : this.parts.log.conversations(tenant);
    for (const k of keys) this.parts.log.appendFlush(k.tenant, k.conversation, "flush");
    this.wake?.();
  }

  /** Resolves when everything accepted so far has been processed and indexed. */
  async drain(): Promise<void> {
    await this.drainUpTo(undefined);
  }

  /** Resolves when every inbox entry up to `seq` (all of them: undefined) has been processed and indexed. */
  private async drainUpTo(seq: number | undefined): Promise<void> {
    while (!this.isDrained(seq)) {
      if (this.failure) throw this.failure;
      await new Promise<void>((resolve) => this.drainWaiters.push(resolve));
    }
    if (this.failure) throw this.failure;
  }

  /** The lowest inbox position an erasure holds every tenant's entries at, if any. */
  private get heldAt(): number | undefined {
    const all = this.holds.filter((h) => !h.ownTenantOnly);
    return all.length > 0 ? Math.min(...all.map((h) => h.seq)) : undefined;
  }

  /** The tenants whose entries after a position wait for an erasure's deletes (the others go on). */
  private get heldTenants(): InboxExclusion[] {
    return this.holds.filter((h) => h.ownTenantOnly).map((h) => ({ tenant: h.tenant, from: h.seq }));
  }

  /** Whether an erasure under way covers the conversation (its idle flush would only leave its name behind). */
  private erasing(tenant: string, conversation: string): boolean {
    return this.holds.some((h) => h.tenant === tenant && (h.conversation ?? conversation) === conversation);
  }

  /**
   * Holds the pipeline at inbox position `seq`: every tenant's entries after it, until `narrow`
   * lets the other tenants' go on, and the tenant's own until `release` (the first call of either
   * counts; later ones do nothing).
   */
  private hold(seq: number, tenant: string, conversation: string | undefined): { narrow(): void; release(): void } {
    const held: Hold = { seq, tenant, conversation, ownTenantOnly: false };
    this.holds.push(held);
    return {
      narrow: () => {
        if (held.ownTenantOnly || !this.holds.includes(held)) return;
        held.ownTenantOnly = true;
        this.wake?.();
      },
      release: () => {
        const at = this.holds.indexOf(held);
        if (at < 0) return;
        this.holds.splice(at, 1);
        this.wake?.();
      },
    };
  }

  query(tenant: string, req: QueryRequest): Promise<QueryResult> {
    return this.reader.query(tenant, req);
  }

  /** Loads what the first query would load on its request path (query/warm-up.ts); for a serving process. */
  warmUpQueries(): Promise<WarmUpResult> {
    return warmUpQueries(this.parts, this.settings.query);
  }

  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage> {
    return this.reader.listRecords(tenant, query);
  }

  getRecord(tenant: string, id: string): Promise<MemoryRecord | undefined> {
    return this.reader.getRecord(tenant, id);
  }

  /** The explorer's conversations (services/core/explorer.ts), read as the distributed gateway reads them. */
  listConversations(tenant: string, page: ExplorerPage): Promise<ConversationPage> {
    return this.explorer.listConversations(tenant, page);
  }

  /** A conversation's segments, decisions and records for the explorer. */
  timeline(tenant: string, conversation: string, page: ExplorerPage): Promise<Timeline | undefined> {
    return this.explorer.timeline(tenant, conversation, page);
  }

  /** The newest dead letters: what was set aside, by which stage, and why. */
  deadLetters(limit: number): Promise<DeadLetter[]> {
    return this.parts.graph.listDeadLetters(limit);
  }

  async health(): Promise<Health> {
    const lag = this.parts.log.lastInboxSeq() - this.parts.log.cursor(INBOX_CURSOR);
    return {
      ok: this.failure === undefined,
      ready: this.ingestLoop !== undefined && !this.stopping && this.failure === undefined,
      details: {
        embedder: this.parts.embedder.id,
        compressor: this.parts.compressor.id,
        inboxLag: String(lag),
        pendingSegments: String(this.parts.log.pendingCount()),
        ...(this.failure ? { error: this.failure.message } : {}),
      },
    };
  }

  /**
   * Sleep-time consolidation now, on demand: decides every pending update candidate (of one tenant,
   * or of all) and applies each record's decision atomically. Runs after the work in flight is
   * indexed, one consolidation (or erasure) at a time.
   */
  async consolidate(tenant?: string, options: ConsolidateCallOptions = {}): Promise<ConsolidationReport> {
    this.assertRunning();
    await this.drain();
    return this.runConsolidationExclusive(tenant, "demand", options);
  }

  private runConsolidationExclusive(
    tenant: string | undefined,
    trigger: TriggerReason | "demand",
    options: ConsolidateCallOptions = {},
  ): Promise<ConsolidationReport> {
    return this.exclusive(async () => {
      const report = await runConsolidation(
        { graph: this.parts.graph, ...(this.parts.decider ? { decider: this.parts.decider } : {}) },
        {
          ...(tenant !== undefined ? { tenant } : {}),
          concurrency: this.settings.consolidation?.concurrency ?? 4,
          ...(options.beforeCommit ? { beforeCommit: options.beforeCommit } : {}),
        },
      );
      this.lastConsolidation = { ...report, trigger };
      return report;
    });
  }

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    // A call that reaches its turn once close() has stopped the engine is refused: its stores are
    // about to be closed (a consolidation that drained just before close() ran on closed stores).
    const guarded = (): Promise<T> => {
      if (this.stopping) return Promise.reject(new Error("engine is shutting down"));
      return fn();
    };
    const run = this.maintenance.then(guarded, guarded);
    this.maintenance = run.catch(() => undefined);
    return run;
  }

  /** A record's version history: the chain of versions with valid ranges and the relation of each. */
  async history(tenant: string, recordId: string): Promise<RecordHistory | undefined> {
    return buildHistory(recordId, await walkVersionGraph(this.parts.graph, tenant, recordId));
  }

  /**
   * Erasure, the only real delete: everything of a tenant, or of one of its conversations, from
   * every embedded store: records with all index and FTS rows, update candidates and edges, raw
   * turns, segments, vectors, the inbox and pending segments, keyed stage state, dead letters.
   * Everything accepted before the call is processed first, so nothing of it is written afterwards;
   * meanwhile what is accepted after the call waits in the inbox, for every tenant (the inbox is one
   * sequence). While the deletes run, only the erased tenant's later entries wait, and the other
   * tenants' are processed (marked done ahead of the cursor). Once the deletes are done, the
   * tenant's own are processed as usual: they are not erased. Before holds, such a turn was
   * processed meanwhile and erased with the rest, though its ingest had been acknowledged. A turn
   * id accepted before the call and sent again after it is that earlier turn (ingest is idempotent
   * by id): it is acknowledged, and erased with it.
   */
  async erase(tenant: string, conversation?: string): Promise<ErasureReport> {
    this.assertRunning();
    const upTo = this.parts.log.lastInboxSeq();
    const held = this.hold(upTo, tenant, conversation);
    try {
      return await this.exclusive(() => this.eraseUpTo(upTo, held, tenant, conversation));
    } finally {
      held.release();
    }
  }

  private async eraseUpTo(
    upTo: number,
    held: { narrow(): void; release(): void },
    tenant: string,
    conversation?: string,
  ): Promise<ErasureReport> {
    await this.drainUpTo(upTo);
    // Everything before the call is processed and indexed: from here on only the tenant's own later
    // entries must wait for the deletes (they are not erased, and must not mix with what is). Other
    // tenants' entries share no key, record or index with it, so they go on meanwhile.
    held.narrow();
    const started = performance.now();
    const vectorsBefore = await this.parts.vectors.count(tenant);
    let records: number;
    let turns: number | undefined;
    let restored = 0;
    let inboxEntries: number;
    if (conversation !== undefined) {
      const erased = await eraseConversation(this.parts.graph, tenant, conversation);
      records = erased.records.length;
      turns = erased.turns.length;
      restored = erased.restored;
      await this.parts.vectors.delete(tenant, [...erased.records, ...erased.turns]);
      await this.parts.vectors.deleteConversation?.(tenant, conversation);
      inboxEntries = this.parts.log.deleteConversation(tenant, conversation, upTo);
    } else {
      records = await this.parts.graph.countRecords(tenant);
      await eraseTenant(this.parts.graph, tenant);
      await this.parts.vectors.deleteTenant(tenant);
      inboxEntries = this.parts.log.deleteTenant(tenant, upTo);
    }
    const stateKeys = await this.eraseState(tenant, conversation);
    // Nothing of the erased scope is left to mix with what waits: the pipeline goes on while the
    // stores' files are written and purged. The vector deletes are in the store (its SQLite rows
    // and its graphs) already; writing the index files waits for the rebuild that a large delete
    // starts in the background (seconds at 100K records), which held every tenant's turns when it
    // ran before the release. A crash before the files are written leaves them behind their
    // version, and the next load rebuilds them from SQLite, where the erased vectors are gone.
    held.release();
    await this.parts.vectors.flush();
    // Deleted is not yet gone from disk: the vector index file still holds the deleted vectors
    // (hnswlib only marks them) and the WAL holds pages from before the deletes. The graph store's
    // purge covers the whole shared SQLite file (state and inbox too), so it runs last.
    await this.parts.vectors.purgeDeleted?.(tenant);
    await this.parts.graph.purgeDeleted?.();
    return {
      tenant,
      ...(conversation !== undefined ? { conversation } : {}),
      records,
      ...(turns !== undefined ? { turns } : {}),
      vectors: vectorsBefore - (await this.parts.vectors.count(tenant)),
      inboxEntries,
      stateKeys,
      restored,
      ms: performance.now() - started,
    };
  }

  /** Keyed stage state of the tenant (or conversation), durable and in memory. */
  private async eraseState(tenant: string, conversation: string | undefined): Promise<number> {
    // Parsed, not prefix-matched: tenant `acme` must not match the keys of tenant `acme/eu`.
    const matches = (key: string): boolean => {
      const parsed = parseConversationKey(key);
      return (
        parsed !== undefined &&
        parsed.tenant === tenant &&
        (conversation ?? parsed.conversation) === parsed.conversation
      );
    };
    let n = 0;
    for (const stage of [SEGMENTER, ENCODER]) {
      for (const key of await this.parts.state.keys(stage)) {
        if (!matches(key)) continue;
        await this.parts.state.delete(stage, key);
        n++;
      }
    }
    for (const key of this.segStates.keys()) if (matches(key)) this.segStates.delete(key);
    for (const key of this.encStates.keys()) if (matches(key)) this.encStates.delete(key);
    return n;
  }

  /**
   * Stops the stages on a failure that is not any input's fault, such as the model's worker thread
   * dying (embedded/open.ts): every turn and segment would fail from then on, and the poison rules
   * would dead-letter them all. Nothing more is processed or set aside; health says why; drain and
   * ingest throw the error. What was in flight stays in the durable log as an unfinished attempt,
   * and a restart processes it again (as after a crash).
   */
  halt(err: Error): void {
    if (this.failure) return;
    this.fail(err);
  }

  /** Clean shutdown: finish what was accepted, then stop the stages. Open segments stay as durable state. */
  async close(): Promise<void> {
    this.closing = true;
    this.scheduler?.stop();
    await this.scheduler?.idle();
    await this.indexMerge.running;
    await this.vectorFlush.running;
    await this.maintenance;
    if (this.idleTimer) clearInterval(this.idleTimer);
    if (!this.failure) await this.drain();
    this.stopping = true;
    // Maintenance that began while close() drained ends before the stores can be closed.
    await this.maintenance;
    this.wake?.();
    await this.ingestLoop;
    this.queue.close();
    await this.encodeLoop;
  }

  private assertRunning(): void {
    if (this.stopping) throw new Error("engine is shutting down");
    if (this.failure) throw this.failure;
  }

  /** Every inbox entry up to `upTo` (all of them: undefined) processed, and nothing being encoded. */
  private isDrained(upTo?: number): boolean {
    return (
      this.parts.log.cursor(INBOX_CURSOR) >= (upTo ?? this.parts.log.lastInboxSeq()) &&
      this.queue.size === 0 &&
      this.inflightEncodes === 0
    );
  }

  /**
   * Wakes the drain waiters once the pipeline has done what it may (up to a hold, or everything but
   * a held tenant's entries); each checks its own end.
   */
  private notifyDrain(): void {
    if (!this.isDrained(this.heldAt) && !this.holds.some((h) => h.ownTenantOnly) && !this.failure) return;
    for (const w of this.drainWaiters.splice(0)) w();
  }

  private flushIdle(): void {
    if (this.failure) return;
    const now = this.clock();
    for (const s of this.segStates.values())
      if (isIdle(s, now, this.settings.segmenter) && !this.erasing(s.tenant, s.conversation)) {
        this.parts.log.appendFlush(s.tenant, s.conversation, "idle");
        s.lastActivityMs = now;
      }
    this.wake?.();
  }

  /**
   * Idle-time upkeep of the graph store's full-text index, when the store has any
   * (GraphMaintenance.mergeIndexSegments): once nothing was ingested for a whole idle tick and the
   * pipeline is drained, up to INDEX_MERGE_STEPS_PER_TICK steps, one at a time with the other
   * maintenance (exclusive) and the event loop free between them (queries run in between),
   * stopping when a turn arrives. Merged segments make every lexical lookup cheaper (a term is
   * looked up in each segment: fts-segments.ts); writes leave new segments, so the merge runs again
   * after the next activity. A failed step is left for the next tick; each step is reported to the
   * observer as stage "index-merge" (ok or error, with its seconds), so a merge that keeps failing
   * shows in the stage metrics instead of passing unseen.
   */
  private mergeIndexIfIdle(): void {
    const graph = this.parts.graph;
    if (!graph.mergeIndexSegments) return;
    this.runWhenIdle(this.indexMerge, INDEX_MERGE_STAGE, INDEX_MERGE_STEPS_PER_TICK, async () =>
      graph.mergeIndexSegments?.(INDEX_MERGE_PAGES),
    );
  }

  /**
   * Writes the vector store's changed index files once nothing was ingested for a tick, a tenant
   * per turn of the event loop, stopping when turns come again; as an erasure's or a
   * consolidation's writes, one maintenance call at a time (exclusive).
   */
  private flushVectorsIfIdle(): void {
    const vectors = this.parts.vectors;
    if (!vectors.flushSome) return;
    this.runWhenIdle(this.vectorFlush, VECTOR_FLUSH_STAGE, VECTOR_FLUSH_TENANTS_PER_TICK, async () =>
      vectors.flushSome?.(1),
    );
  }

  /**
   * Runs an idle-time chore once nothing was ingested for a whole idle tick and the pipeline is
   * drained: up to `steps` steps, each one at a time with the other maintenance (exclusive) and a
   * turn of the event loop between them, stopping when a turn arrives. A step answers whether more
   * is left; once one says false the chore is done until the next activity. Each step is reported
   * to the observer under `stage` (ok or error, with its seconds); a failed step is left for the
   * next tick.
   */
  private runWhenIdle(chore: IdleChore, stage: string, steps: number, step: () => Promise<boolean | undefined>): void {
    if (chore.running || this.closing || this.failure) return;
    const since = this.lastActivityMs;
    if (chore.doneAt === since || this.clock() - since < this.idleTickMs || !this.isDrained()) return;
    const busy = (): boolean => this.closing || this.lastActivityMs !== since || !this.isDrained();
    chore.running = (async () => {
      for (let n = 0; n < steps && !busy(); n++) {
        const more = await this.exclusive(async () => {
          if (busy()) return true;
          const started = performance.now();
          try {
            const left = await step();
            this.parts.observer?.stageEvent(stage, "ok", (performance.now() - started) / 1000);
            return left;
          } catch (err) {
            this.parts.observer?.stageEvent(stage, "error", (performance.now() - started) / 1000);
            throw err;
          }
        });
        if (more === false) {
          chore.doneAt = since;
          return;
        }
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    })()
      .catch(() => undefined)
      .finally(() => {
        chore.running = undefined;
      });
  }

  /**
   * The idle tick's vector index write (flushVectorsIfIdle) now, awaited: for tests and tools. True
   * when every changed index file is written since the last activity (or the store keeps none),
   * false when the engine was not idle for a tick, a write failed or the tick's steps ran out.
   */
  async flushVectorsWhenIdle(): Promise<boolean> {
    if (!this.parts.vectors.flushSome) return true;
    this.flushVectorsIfIdle();
    await this.vectorFlush.running;
    return this.vectorFlush.doneAt === this.lastActivityMs;
  }

  /**
   * The idle tick's index upkeep (mergeIndexIfIdle) now, awaited: for tests and tools. True when
   * the index has nothing left to merge since the last activity (or the store keeps no such
   * index), false when the engine was not idle for a tick, a step failed or the tick's steps ran out.
   */
  async mergeIndexWhenIdle(): Promise<boolean> {
    if (!this.parts.graph.mergeIndexSegments) return true;
    this.mergeIndexIfIdle();
    await this.indexMerge.running;
    return this.indexMerge.doneAt === this.lastActivityMs;
  }

  /**
   * A conversation's state pushed out of memory (more conversations active than
   * conversationStates): the idle check reads only the states in memory, so an open segment or
   * buffer is flushed now, as the idle timeout would later. Its state is in the state store.
   */
  private evicted(s: KeyedSegmenterState): void {
    if (!holdsTurns(s) || this.erasing(s.tenant, s.conversation)) return;
    this.parts.log.appendFlush(s.tenant, s.conversation, "idle");
    this.wake?.();
  }

  private async segState(tenant: string, conversation: string): Promise<KeyedSegmenterState> {
    const key = keyOf(tenant, conversation);
    let s = this.batchStates?.get(key) ?? this.segStates.get(key);
    if (!s) {
      const stored = await this.parts.state.get<KeyedSegmenterState>(SEGMENTER, key);
      // A state written before the bounded format (every open turn's embedding) is upgraded on load.
      s = (stored && upgradeSegmenterState(stored)) ?? {
        ...initialSegmenterState(tenant, conversation),
        lastSeq: 0,
      };
      // Not kept in memory yet: processBatch keeps it once it holds turns (see holdsTurns).
    }
    return s;
  }

  private async encState(key: string): Promise<KeyedEncoderState> {
    let s = this.encStates.get(key);
    if (!s) {
      s = (await this.parts.state.get<KeyedEncoderState>(ENCODER, key)) ?? {
        lastSeq: 0,
        context: emptyContext(),
      };
      this.encStates.set(key, s);
    }
    return s;
  }

  /**
   * The ingest loop (sensory + segmenter) reads the inbox in batches. Each batch is recorded as in flight before it starts and
   * cleared after; a batch still recorded at start-up is one a previous run died on (crash, kill,
   * hang), so it is gone through one entry at a time, each entry's attempts counted durably, and an
   * entry that has stopped the process maxAttempts times is dead-lettered instead of tried again.
   */
  private async runIngestLoop(): Promise<void> {
    const log = this.parts.log;
    try {
      const crashed = log.inFlight(INBOX_BATCH);
      if (crashed) {
        log.setCursor(ISOLATE_CURSOR, Math.max(crashed.last, log.cursor(ISOLATE_CURSOR)));
        log.endAttempt(INBOX_BATCH);
      }
      let isolateUntil = log.cursor(ISOLATE_CURSOR);
      while (!this.stopping && !this.failure) {
        const cursor = log.cursor(INBOX_CURSOR);
        const isolating = cursor < isolateUntil;
        // An erasure holds what was accepted after its call (erase) until it ends: every tenant's
        // entries until it has drained, its own tenant's while its deletes run.
        const held = this.heldAt;
        const batch = log.readInbox(cursor, isolating ? 1 : this.settings.batchSize, held, this.heldTenants);
        if (batch.length === 0) {
          // Nothing to do up to the hold: when no entry is left before it either (an erasure
          // deleted what stood there, the flushes of its conversations), the cursor moves to the
          // hold, where the erasure waits for it.
          if (held !== undefined && cursor < held) log.completeEntries(INBOX_CURSOR, [], held);
          this.notifyDrain();
          await new Promise<void>((resolve) => {
            this.wake = resolve;
          });
          this.wake = undefined;
          continue;
        }
        const first = (batch[0] as InboxEntry).seq;
        const last = (batch[batch.length - 1] as InboxEntry).seq;
        const name = isolating ? INBOX_ENTRY : INBOX_BATCH;
        const attempts = log.beginAttempt(name, first, last);
        if (isolating && attempts > this.maxAttempts) await this.setAside(batch[0] as InboxEntry, attempts - 1);
        else await this.processInbox(batch);
        log.endAttempt(name);
        if (!isolating) isolateUntil = log.cursor(ISOLATE_CURSOR);
        // Between batches the event loop serves requests (acks, queries, probes).
        await nextTick();
      }
    } catch (err) {
      this.fail(err);
    }
  }

  private get maxAttempts(): number {
    return this.settings.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  }

  /** An inbox entry that stopped the process `attempts` times: dead-lettered, the cursor moves past it. */
  private async setAside(entry: InboxEntry, attempts: number): Promise<void> {
    await this.deadLetter(
      "sensory+segmenter",
      entry,
      `set aside after ${attempts} unfinished attempts: the process stopped (crash, kill or hang) while processing it`,
    );
    this.parts.log.completeEntries(INBOX_CURSOR, [entry.seq]);
    this.notifyDrain();
  }

  private async deadLetter(stage: string, entry: InboxEntry, error: string): Promise<void> {
    await this.parts.graph.putDeadLetter({
      stage,
      key: keyOf(entry.tenant, entry.conversation),
      error,
      payload: JSON.stringify(entry),
      at: new Date(this.clock()).toISOString(),
    });
    this.parts.observer?.stageEvent(stage, "dlq");
  }

  /**
   * Embeddings of the batch's turns, by seq; a turn whose embedding fails or exceeds the budget
   * gets its error instead. The batch is embedded in one call; only when that fails is each turn
   * embedded alone, to find the one at fault.
   */
  private async embedTurns(turns: readonly TurnEntry[]): Promise<Map<number, Float32Array | Error>> {
    const out = new Map<number, Float32Array | Error>();
    if (turns.length === 0) return out;
    const budget = this.settings.turnBudgetMs ?? DEFAULT_TURN_BUDGET_MS;
    const embed = (entries: readonly TurnEntry[]) =>
      withinBudget(
        this.parts.embedder.embed(entries.map((e) => turnEmbeddingText(e.turn.speaker, e.turn.text))),
        budget * entries.length,
        "embedding",
      );
    try {
      const vectors = await embed(turns);
      for (const [i, e] of turns.entries()) out.set(e.seq, vectors[i] as Float32Array);
    } catch (batchErr) {
      if (turns.length === 1) out.set((turns[0] as TurnEntry).seq, asError(batchErr));
      else
        for (const e of turns) {
          try {
            out.set(e.seq, (await embed([e]))[0] as Float32Array);
          } catch (err) {
            out.set(e.seq, asError(err));
          }
        }
    }
    return out;
  }

  /**
   * Modes attention / both: the attention shares of the batch's turn pairs (each turn with the one
   * before it in its conversation) in one batched call beside the embedding call; the loop then
   * reads them (AttentionScorer.share). A failure here is not the batch's: a turn whose share is
   * still missing computes it alone, and fails alone.
   */
  private async prepareAttention(batch: readonly InboxEntry[]): Promise<void> {
    if (!this.attention) return;
    const last = new Map<string, string | undefined>();
    const pairs: TurnPair[] = [];
    for (const e of batch) {
      const key = keyOf(e.tenant, e.conversation);
      if (!last.has(key)) {
        const open = (await this.segState(e.tenant, e.conversation)).open;
        const t = open?.turns.at(-1);
        last.set(key, t ? turnEmbeddingText(t.speaker, t.text) : undefined);
      }
      if (e.kind !== "turn") {
        last.set(key, undefined);
        continue;
      }
      const text = turnEmbeddingText(e.turn.speaker, e.turn.text);
      const previous = last.get(key);
      if (previous !== undefined) pairs.push({ previous, current: text });
      last.set(key, text);
    }
    if (pairs.length > 0) await this.attention.prepare(pairs).catch(() => undefined);
  }

  /** The share of the turn's attention on the open segment's last turn (modes attention / both). */
  private async attentionShare(state: SegmenterState, turn: SensoryTurn): Promise<number | undefined> {
    const previous = state.open?.turns.at(-1);
    if (!this.attention || !previous) return undefined;
    return this.attention.share(
      turnEmbeddingText(previous.speaker, previous.text),
      turnEmbeddingText(turn.speaker, turn.text),
    );
  }

  private async processInbox(batch: InboxEntry[]): Promise<void> {
    this.batchStates = new Map();
    try {
      await this.processBatch(batch, this.batchStates);
    } finally {
      this.batchStates = undefined;
    }
  }

  private async processBatch(batch: InboxEntry[], changed: Map<string, KeyedSegmenterState>): Promise<void> {
    const started = performance.now();
    const turns = batch.filter((e): e is TurnEntry => e.kind === "turn");
    const vectorOf = await this.embedTurns(turns);
    await this.prepareAttention(batch);
    const turnBudget = this.settings.turnBudgetMs ?? DEFAULT_TURN_BUDGET_MS;
    const released: Segment[] = [];
    // Raw turns are written as they arrive (queryable at once, as through Kafka), with the gate's vectors.
    const arriving: { turn: ArrivingTurn; vector: Float32Array }[] = [];
    for (const [i, entry] of batch.entries()) {
      // Between entries the event loop serves requests: a batch is many turns of CPU work.
      if (i > 0) await nextTick();
      const state = await this.segState(entry.tenant, entry.conversation);
      if (entry.seq <= state.lastSeq) continue;
      const now = this.clock();
      let out: ReturnType<typeof segmenterStep>;
      try {
        if (entry.kind === "turn") {
          const embedding = vectorOf.get(entry.seq);
          if (!(embedding instanceof Float32Array)) throw embedding ?? new Error("no embedding");
          const sensory = await withinBudget(
            compressTurn(entry.turn, this.parts.compressor, this.settings.keepRate),
            turnBudget,
            "sensory compression",
          );
          const attention = await withinBudget(this.attentionShare(state, sensory), turnBudget, "turn attention");
          out = segmenterStep(
            state,
            { kind: "turn", turn: sensory, embedding, ...(attention !== undefined ? { attention } : {}), nowMs: now },
            this.settings.segmenter,
          );
          arriving.push({ turn: sensory, vector: embedding });
          this.progress.turns++;
        } else {
          out = segmenterStep(state, { kind: "flush", reason: entry.reason, nowMs: now }, this.settings.segmenter);
        }
      } catch (err) {
        // Halted (the model is gone): the entry is not at fault; it stays in the log, unfinished.
        if (this.failure) throw this.failure;
        // A poison entry (it throws, or exceeds its budget) is set aside with its reason; the
        // conversation keeps flowing.
        await this.deadLetter("sensory+segmenter", entry, asError(err).message);
        out = { state, segments: [] };
      }
      const next: KeyedSegmenterState = { ...out.state, lastSeq: entry.seq };
      const key = keyOf(entry.tenant, entry.conversation);
      changed.set(key, next);
      if (holdsTurns(next)) this.segStates.set(key, next);
      else this.segStates.delete(key);
      released.push(...out.segments);
    }
    await indexRawTurns(
      this.indexDeps,
      arriving.map((a) => a.turn),
      arriving.map((a) => a.vector),
    );
    // Order matters for crash safety: segments are durable before the state that no longer holds them.
    // Pushed before the cursor moves, so drain() never sees an empty pipeline with work in between.
    const pending = this.parts.log.addPending(released);
    for (const [key, state] of changed) await this.parts.state.put(SEGMENTER, key, state);
    const seconds = (performance.now() - started) / 1000;
    for (const e of batch)
      this.parts.observer?.stageEvent(
        e.kind === "turn" ? "sensory+segmenter" : "segmenter",
        "ok",
        seconds / batch.length,
      );
    for (const s of released) this.parts.observer?.segmentClosed(s.closedBy);
    for (const p of pending) await this.queue.push(p);
    // Past the batch, or, where a held tenant's entries lie between, past what is done before them.
    this.parts.log.completeEntries(
      INBOX_CURSOR,
      batch.map((e) => e.seq),
    );
    this.notifyDrain();
  }

  private async runEncodeLoop(): Promise<void> {
    try {
      for (;;) {
        const item = await this.queue.pop();
        if (!item || this.failure) break;
        this.inflightEncodes++;
        try {
          await this.processSegment(item.seq, item.segment);
        } finally {
          this.inflightEncodes--;
          this.notifyDrain();
        }
        // Between segments the event loop serves requests: encoding and indexing are CPU work.
        await nextTick();
      }
    } catch (err) {
      this.fail(err);
    }
  }

  private async processSegment(seq: number, segment: Segment): Promise<void> {
    const key = keyOf(segment.tenant, segment.conversation);
    const state = await this.encState(key);
    if (seq <= state.lastSeq) {
      this.parts.log.markDone(seq);
      return;
    }
    // Counted durably before the work: a segment that stops the process maxAttempts times is set aside on restart.
    const attempts = this.parts.log.beginAttempt(SEGMENT, seq, seq);
    if (attempts > this.maxAttempts) {
      await this.parts.graph.putDeadLetter({
        stage: "encoder+indexer",
        key,
        error: `set aside after ${attempts - 1} unfinished attempts: the process stopped (crash, kill or hang) while processing it`,
        payload: JSON.stringify(segment),
        at: new Date(this.clock()).toISOString(),
      });
      this.parts.observer?.stageEvent("encoder+indexer", "dlq");
      this.parts.log.markDone(seq);
      this.parts.log.endAttempt(SEGMENT);
      return;
    }
    const started = performance.now();
    try {
      const { records, context, cost } = await withinBudget(
        this.parts.encoder.encode(segment, state.context),
        this.settings.segmentBudgetMs ?? DEFAULT_SEGMENT_BUDGET_MS,
        "segment encoding",
      );
      this.addConstructionCost(segment.tenant, cost);
      await indexSegment(
        {
          ...this.indexDeps,
          candidates: {
            ...DEFAULT_CANDIDATE_SETTINGS,
            similarityThreshold:
              this.settings.consolidation?.similarityThreshold ?? DEFAULT_CANDIDATE_SETTINGS.similarityThreshold,
          },
        },
        segment,
        records,
      );
      const next = { lastSeq: seq, context };
      await this.parts.state.put(ENCODER, key, next);
      this.encStates.set(key, next);
      this.progress.segments++;
      this.progress.records += records.length;
      this.parts.observer?.recordsWritten(records.length);
      this.parts.observer?.segmentIndexed?.(segment, records);
      this.parts.observer?.stageEvent("encoder+indexer", "ok", (performance.now() - started) / 1000);
    } catch (err) {
      // Halted (the model is gone): the segment is not at fault; its attempt stays unfinished.
      if (this.failure) throw this.failure;
      // A segment that cannot be encoded or indexed goes to the dead-letter store; the rest flows.
      // What its failed LLM attempts cost still counts as construction cost.
      const spent = costOfError(err);
      if (spent) this.addConstructionCost(segment.tenant, spent);
      await this.parts.graph.putDeadLetter({
        stage: "encoder+indexer",
        key,
        error: err instanceof Error ? err.message : String(err),
        payload: JSON.stringify(segment),
        at: new Date(this.clock()).toISOString(),
      });
      this.parts.observer?.stageEvent("encoder+indexer", "dlq");
    }
    this.parts.log.markDone(seq);
    this.parts.log.endAttempt(SEGMENT);
  }

  private addConstructionCost(tenant: string, cost: LlmCost): void {
    this.construction.llmCalls += cost.llmCalls;
    this.construction.inputTokens += cost.inputTokens;
    this.construction.outputTokens += cost.outputTokens;
    if (cost.llmCalls > 0) this.parts.observer?.constructionTokens?.(this.parts.encoder.id, tenant, cost);
  }

  private fail(err: unknown): void {
    this.failure = err instanceof Error ? err : new Error(String(err));
    // Both loops stop: a segment push waiting on a full queue whose consumer has stopped would
    // otherwise wait forever, and close() with it. The segments stay pending in the durable log.
    this.queue.close();
    this.notifyDrain();
  }
}

/**
 * A conversation whose segmenter state holds turns (an open segment or buffered segments): the idle
 * check must see it, so it is kept in memory; other states are only in the state store.
 */
const holdsTurns = (s: SegmenterState): boolean => s.open !== null || s.buffer.length > 0;

const asError = (err: unknown): Error => (err instanceof Error ? err : new Error(String(err)));
