/**
 * The distributed runtime of one stage (docs/design.md §2, §3): a pure handler over Kafka.
 *
 * - One consumer group per stage; read_committed; eachBatch with manual resolveOffset, no auto-commit.
 * - Exactly once between topics: for each chunk of a partition's batch, the outputs, the dead
 *   letters, the changed keyed state (changelog) and the consumed offsets (sendOffsets) go in one
 *   Kafka transaction. In-memory state changes only after the commit; an abort re-reads the chunk.
 * - One transactional producer per input partition, its transactional id derived from stage, topic
 *   and partition (not from the process): whoever owns partition p next initialises the same id,
 *   which fences the previous owner (a zombie after a crash or a rebalance) and aborts its open
 *   transaction. (kafkajs cannot send the consumer-group metadata of KIP-447, so per-partition ids
 *   are what make fencing hold across instances.) kafkajs's connect() does NOT do this: it asks for
 *   an idempotent producer id without the transactional id; only the first transaction() sends
 *   InitProducerId with it. So the new owner opens and aborts an empty transaction first, then
 *   reads the changelog, then re-reads the group's committed offset (the zombie may have committed
 *   between the assignment and the fence) and skips what is below it.
 * - A new member id (the consumer was evicted, e.g. paused past the session timeout, and rejoined)
 *   drops every partition context: a partition handed back must be fenced and restored again, its
 *   old in-memory state may be stale. No idle-flush tick runs while the group is rebalancing.
 * - Failures are classified (error-class.ts): a transient one (a dependency down: Neo4j, the
 *   registry, an LLM's 429/5xx, a socket error) pauses the partition and retries the same input
 *   with capped exponential backoff and jitter for as long as it takes; a dependency failing for
 *   longer than dependencyDownLimitMs is reported (observer, /readyz). Only a permanent failure
 *   (invalid value, the stage's own refusal) or one unrecognised after bounded retries is a dead
 *   letter. The consumer heartbeats after every message and while it waits, so a slow chunk does
 *   not cost the group membership.
 * - A chunk whose outputs and changed states pass maxTransactionBytes is committed in several
 *   transactions, each with the offsets it covers.
 * - Keyed state in a compacted changelog memory.<stage>-state.v1 with as many partitions as the
 *   input topic; the state of a key consumed from input partition p is written to changelog
 *   partition p, so on assignment partition p's state is exactly changelog partition p, read up to
 *   its high watermark (read_committed) before p's first message is processed.
 * - Poison: an undecodable or invalid value, or one whose handler fails permanently, becomes a dead
 *   letter (memory.dlq.v1) in the same transaction; the partition flows.
 * - Backpressure: while handler.pressure() says the sink is saturated, the partition is paused
 *   (consumer.pause) and resumed when it clears.
 * - stop(): finishes and commits the chunk in flight, then disconnects (SIGTERM/SIGINT in process.ts).
 */
import { randomUUID } from "node:crypto";
import type { Admin, Consumer, Kafka, KafkaMessage, Message, Producer } from "kafkajs";
import { type BackoffPolicy, backoffDelay, type Random } from "./backoff.ts";
import { DependencyHealth } from "./dependency-health.ts";
import { classifyError, type Dependency, isFenced } from "./error-class.ts";
import { type DlqEntry, deadLetter, type StageStateEnvelope, type TopicCodec } from "./serde.ts";
import {
  afterFailure,
  applyStates,
  changelogMessages,
  chunksOf,
  type DecodedInput,
  decodeStageInput,
  dropMatching,
  lagAfter,
  MESSAGE_MAX_BYTES,
  nextOffset,
  outputMessages,
  PoisonError,
  refusalLabel,
  restoredUpTo,
  restoreTargets,
  SEND_MAX_BYTES,
  type StageInput,
  type StageOutput,
  sizeOf,
  splitBySize,
  stateFromEnvelope,
  TX_MAX_BYTES,
} from "./stage-runtime-parts.ts";
import { StageTracing } from "./stage-tracing.ts";

export {
  PoisonError,
  SEND_MAX_BYTES,
  type StageInput,
  type StageOutput,
  splitBySize,
} from "./stage-runtime-parts.ts";

export interface StageResult<O, S> {
  outputs: StageOutput<O>[];
  /** The key's new state; undefined deletes it (a tombstone in the changelog). */
  state: S | undefined;
  /**
   * Erasure (issue 13): other keys of the partition whose state is deleted with this input, in the
   * same transaction (tombstones in the changelog), e.g. every key of an erased tenant.
   */
  dropKeys?: (key: string) => boolean;
}

export interface StageStateSpec<S> {
  /** Version of the JSON shape; a changelog entry of another version is refused at restore. */
  version: number;
  codec: TopicCodec<StageStateEnvelope>;
  toJson?(state: S): string;
  fromJson?(json: string): S;
  /** Reads an entry of an older version (a running deployment upgrades in place); absent: refused. */
  migrate?(fromVersion: number, json: string): S;
}

/** A stage as a small adapter over the shared pure logic. */
export interface StageHandler<I, O, S> {
  name: string;
  input: TopicCodec<I>;
  output?: TopicCodec<O>;
  state?: StageStateSpec<S>;
  /** Optional: work for a whole chunk before handle() (e.g. one embedding call for all its turns). */
  prepare?(inputs: readonly { key: string; input: StageInput<I> }[]): Promise<void>;
  handle(key: string, input: StageInput<I>, state: S | undefined): Promise<StageResult<O, S>>;
  /** Optional periodic tick over the keyed states (idle flush): inputs run through the same path. */
  tick?(states: ReadonlyMap<string, S>, nowMs: number): { key: string; input: StageInput<I> }[];
  /** Optional: true while downstream is saturated; the runtime pauses its partitions meanwhile. */
  pressure?(): boolean;
  /**
   * Input partitions whose chunks are handled at the same time (default 1: one after another).
   * Only for a handler whose prepare() and handle() keep nothing per chunk that another
   * partition's chunk could disturb; each partition still has its own transactions, in order.
   */
  partitionsAtOnce?: number;
}

export interface StageObserver {
  committed?(info: { partition: number; offset: string; inputs: number; outputs: number; dlq: number }): void;
  event?(outcome: "ok" | "error" | "dlq", seconds?: number): void;
  deadLetter?(reason: string): void;
  lag?(topic: string, partition: number, lag: number): void;
  paused?(partitions: number): void;
  /** A dependency failing longer than the limit (down: true), or back after that (down: false). */
  dependency?(info: { dependency: Dependency; down: boolean; downMs: number }): void;
  log?(level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>): void;
}

export interface StageRuntimeOptions {
  kafka: Kafka;
  admin: Admin;
  groupId: string;
  /** Prefix of the per-partition transactional ids (include the topic prefix for isolation). */
  transactionalIdPrefix: string;
  dlq: TopicCodec<DlqEntry>;
  /** Changelog topic (required when the handler has state). */
  changelogTopic?: string;
  /** Messages per transaction (default 50). */
  maxChunk?: number;
  /** Attempts of an event failing for an unrecognised reason before it goes to the DLQ (default 3). */
  maxAttempts?: number;
  backoffMs?: number;
  /** Waits between retries of a transiently failing input (default 200 ms doubling up to 30 s). */
  transientBackoff?: BackoffPolicy;
  /** Jitter source of those waits (seeded in tests). */
  random?: Random;
  /** A dependency failing longer than this is reported and makes the stage not ready (default 60 s). */
  dependencyDownLimitMs?: number;
  /** Bytes one transaction writes at most before a chunk is committed in parts (default TX_MAX_BYTES). */
  maxTransactionBytes?: number;
  /** Tick interval for handler.tick (default 1000 ms). */
  tickMs?: number;
  sessionTimeoutMs?: number;
  observer?: StageObserver;
}

interface PartitionCtx<S> {
  partition: number;
  producer: Producer;
  states: Map<string, S>;
  /** Serialises the partition's transactions (batches and ticks). */
  lock: Promise<void>;
  ready: Promise<void>;
  /** The group's committed offset for the partition, read after the fence and the restore. */
  committed: bigint;
}

type Pending = { key: string; input: StageInput<unknown> };

/** What a chunk's processing may do to the consumer while it waits on a dependency. */
interface ChunkIo {
  heartbeat(): Promise<void>;
  /** Pauses fetching of the partition; returns its resume. */
  pause(): () => void;
  /** False once the work should be abandoned uncommitted (stop, rebalance, partition moved). */
  live(): boolean;
  /** Heartbeats in the background while one long call runs (a handler step: Neo4j, an LLM); returns its stop. */
  keepAlive(): () => void;
}

type Attempt<T> = { ok: true; value: T } | { ok: false; reason: string; attempts: number } | { abandoned: true };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const errMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export class StageRuntime<I, O, S> {
  private readonly consumer: Consumer;
  private readonly partitions = new Map<number, PartitionCtx<S>>();
  private readonly paused = new Set<number>();
  private assigned = new Set<number>();
  private stopping = false;
  private rebalancing = false;
  private memberId: string | undefined;
  private readonly health = new DependencyHealth();
  private readonly reportedDown = new Set<Dependency>();
  /**
   * While a dependency is failing: reports it once it is overdue. A retried call can itself hang
   * for as long as the outage (a driver waiting out its connection timeout), so the report cannot
   * wait for the next failure.
   */
  private downWatch: NodeJS.Timeout | undefined;
  /** Partitions paused now while an input waits for a dependency. */
  private transientPauses = 0;
  /**
   * Partitions whose producer was fenced by another instance, until when: their batches are left
   * alone (not re-fenced, which would fence the new owner back) until the group's next join tells
   * this consumer what it owns, or the session timeout has passed with it still a member.
   */
  private readonly lost = new Map<number, number>();
  private tickTimer: NodeJS.Timeout | undefined;
  private resumeTimer: NodeJS.Timeout | undefined;
  private readonly maxChunk: number;
  private readonly maxAttempts: number;
  private readonly backoffMs: number;
  private readonly obs: StageObserver;
  private readonly transientBackoff: BackoffPolicy;
  private readonly random: Random;
  private readonly downLimitMs: number;
  private readonly maxTxBytes: number;
  /** Spans and trace headers (docs/tracing.md): no-ops while tracing is off. */
  private readonly tracing: StageTracing;
  /** Set when the consumer has crashed for good: the process should exit and be restarted. */
  failure: Error | undefined;

  constructor(
    private readonly handler: StageHandler<I, O, S>,
    private readonly opts: StageRuntimeOptions,
  ) {
    if (handler.state && !opts.changelogTopic) throw new Error(`${handler.name}: a stateful stage needs a changelog`);
    this.maxChunk = opts.maxChunk ?? 50;
    this.maxAttempts = opts.maxAttempts ?? 3;
    this.backoffMs = opts.backoffMs ?? 200;
    this.obs = opts.observer ?? {};
    this.transientBackoff = opts.transientBackoff ?? { baseMs: 200, maxMs: 30_000 };
    this.random = opts.random ?? Math.random;
    this.downLimitMs = opts.dependencyDownLimitMs ?? 60_000;
    this.maxTxBytes = opts.maxTransactionBytes ?? TX_MAX_BYTES;
    this.tracing = new StageTracing(handler.name);
    const session = opts.sessionTimeoutMs ?? 30_000;
    this.consumer = opts.kafka.consumer({
      groupId: opts.groupId,
      readUncommitted: false,
      sessionTimeout: session,
      heartbeatInterval: Math.min(3000, Math.floor(session / 3)),
      retry: { retries: 10 },
    });
  }

  /** The states held now (all assigned partitions), for the tick and for tests. */
  get stateCount(): number {
    let n = 0;
    for (const p of this.partitions.values()) n += p.states.size;
    return n;
  }

  /** Dependencies failing for longer than the limit now (the stage is not ready while any is). */
  dependenciesDown(nowMs = Date.now()): { dependency: Dependency; downMs: number }[] {
    return this.health.overdue(nowMs, this.downLimitMs);
  }

  async start(): Promise<void> {
    const topic = this.handler.input.topic;
    this.consumer.on(this.consumer.events.REBALANCING, () => {
      this.rebalancing = true;
    });
    this.consumer.on(this.consumer.events.GROUP_JOIN, (e) => {
      const mine = new Set(e.payload.memberAssignment[topic] ?? []);
      // A new member id means this consumer was evicted and rejoined: between the two, any of its
      // partitions may have had another owner, so every context goes (fenced and restored anew).
      // The same member id means it took part in every generation since: a partition it keeps
      // had no other owner, its state is current.
      const rejoined = this.memberId !== undefined && this.memberId !== e.payload.memberId;
      this.memberId = e.payload.memberId;
      this.assigned = mine;
      this.lost.clear();
      for (const p of [...this.partitions.keys()]) if (rejoined || !mine.has(p)) void this.release(p);
      for (const p of mine) this.ensure(p);
      this.rebalancing = false;
      this.obs.log?.("info", "partitions assigned", {
        partitions: [...mine],
        memberId: e.payload.memberId,
        ...(rejoined ? { rejoined: true } : {}),
      });
    });
    this.consumer.on(this.consumer.events.CRASH, (e) => {
      if (!e.payload.restart) {
        this.failure = e.payload.error;
        this.obs.log?.("error", "consumer crashed", { error: errMessage(e.payload.error) });
      }
    });
    await this.consumer.connect();
    await this.consumer.subscribe({ topic, fromBeginning: true });
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: Math.max(1, this.handler.partitionsAtOnce ?? 1),
      eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale, pause }) => {
        const lostUntil = this.lost.get(batch.partition);
        if (lostUntil !== undefined) {
          if (Date.now() < lostUntil) {
            // Fenced: another instance owns it. The heartbeat tells kafkajs to rejoin.
            await sleep(500);
            await heartbeat();
            return;
          }
          this.lost.delete(batch.partition);
        }
        const ctx = this.ensure(batch.partition);
        await this.waitReady(ctx, heartbeat);
        // The fetch position came from the committed offset at assignment, before the fence: the
        // previous owner may have committed past it since. Those messages are done; skip them.
        const fresh = batch.messages.filter((m) => BigInt(m.offset) >= ctx.committed);
        const skipped = batch.messages.length - fresh.length;
        if (skipped > 0) {
          resolveOffset((batch.messages[skipped - 1] as KafkaMessage).offset);
          this.obs.log?.("info", "skipped messages committed by the previous owner", {
            partition: batch.partition,
            skipped,
            committed: ctx.committed.toString(),
          });
        }
        // A heartbeat refused (the group is rebalancing, or this member was evicted) means the
        // work in hand will be read again by the partition's next owner: it is abandoned.
        let lost = false;
        const beat = async (): Promise<void> => {
          try {
            await heartbeat();
          } catch (err) {
            lost = true;
            throw err;
          }
        };
        const io: ChunkIo = {
          heartbeat: beat,
          pause,
          live: () =>
            !lost && !this.stopping && isRunning() && !isStale() && this.partitions.get(batch.partition) === ctx,
          keepAlive: () => {
            const timer = setInterval(() => void beat().catch(() => undefined), 1000);
            return () => clearInterval(timer);
          },
        };
        for (const chunk of chunksOf(fresh, this.maxChunk)) {
          if (!io.live()) break;
          if (this.handler.pressure?.()) {
            pause();
            this.paused.add(batch.partition);
            this.obs.paused?.(this.paused.size);
            this.scheduleResume();
            break;
          }
          const done = await this.withLock(ctx, () =>
            this.tracing.chunk(batch.topic, batch.partition, chunk, () =>
              this.processChunk(ctx, batch.topic, chunk, io),
            ),
          );
          if (done.lastCommitted !== undefined) {
            resolveOffset(done.lastCommitted);
            this.obs.lag?.(batch.topic, batch.partition, lagAfter(batch.highWatermark, done.lastCommitted));
          }
          if (!done.complete) break;
          await heartbeat();
        }
      },
    });
    if (this.handler.tick) {
      this.tickTimer = setInterval(() => void this.runTick(), this.opts.tickMs ?? 1000);
      this.tickTimer.unref();
    }
  }

  /** Graceful stop: the chunk in flight finishes and commits, then everything disconnects. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    if (this.tickTimer) clearInterval(this.tickTimer);
    if (this.resumeTimer) clearInterval(this.resumeTimer);
    this.stopDownWatch();
    await this.consumer.disconnect();
    await Promise.allSettled([...this.partitions.keys()].map((p) => this.release(p)));
  }

  private ensure(partition: number): PartitionCtx<S> {
    const existing = this.partitions.get(partition);
    if (existing) return existing;
    const producer = this.opts.kafka.producer({
      transactionalId: `${this.opts.transactionalIdPrefix}-${this.handler.input.topic}-${partition}`,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: 60_000,
    });
    const ctx: PartitionCtx<S> = {
      partition,
      producer,
      states: new Map(),
      lock: Promise.resolve(),
      ready: Promise.resolve(),
      committed: -1n,
    };
    // connect() alone does not fence (see the header): the empty transaction does. Only then are
    // the changelog and the committed offset final, so both are read after it.
    ctx.ready = (async () => {
      await producer.connect();
      await this.fence(producer);
      if (this.handler.state) await this.restore([ctx]);
      ctx.committed = await this.committedOffset(partition);
    })();
    ctx.ready.catch(() => undefined);
    this.partitions.set(partition, ctx);
    return ctx;
  }

  /**
   * Sends InitProducerId with the transactional id (kafkajs does it at the first transaction()):
   * the broker bumps the epoch, so the previous owner's producer is fenced, and its open
   * transaction is aborted (kafkajs retries CONCURRENT_TRANSACTIONS until that is done). Aborting
   * the empty transaction sends nothing (no partition was added).
   */
  private async fence(producer: Producer): Promise<void> {
    const tx = await producer.transaction();
    await tx.abort();
  }

  /** The group's committed offset of an input partition (-1 when none). */
  private async committedOffset(partition: number): Promise<bigint> {
    const topic = this.handler.input.topic;
    const [committed] = await this.opts.admin.fetchOffsets({ groupId: this.opts.groupId, topics: [topic] });
    const offset = committed?.partitions.find((p) => p.partition === partition)?.offset ?? "-1";
    return BigInt(offset);
  }

  private async waitReady(ctx: PartitionCtx<S>, heartbeat: () => Promise<void>): Promise<void> {
    let done = false;
    const ready = ctx.ready.finally(() => {
      done = true;
    });
    while (!done) {
      await Promise.race([ready, sleep(1000)]);
      if (!done) await heartbeat();
    }
    try {
      await ctx.ready;
    } catch (err) {
      // Restore failed: forget the partition so the next batch retries from scratch.
      this.partitions.delete(ctx.partition);
      await ctx.producer.disconnect().catch(() => undefined);
      throw err;
    }
  }

  private async release(partition: number): Promise<void> {
    const ctx = this.partitions.get(partition);
    if (!ctx) return;
    this.partitions.delete(partition);
    this.paused.delete(partition);
    await ctx.lock.catch(() => undefined);
    await ctx.producer.disconnect().catch(() => undefined);
  }

  private withLock<T>(ctx: PartitionCtx<S>, fn: () => Promise<T>): Promise<T> {
    const run = ctx.lock.then(fn);
    ctx.lock = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** Reads changelog partitions up to their high watermark (read_committed) into the states. */
  private async restore(ctxs: PartitionCtx<S>[]): Promise<void> {
    const spec = this.handler.state;
    const changelog = this.opts.changelogTopic;
    if (!spec || !changelog) return;
    const started = Date.now();
    const offsets = await this.opts.admin.fetchTopicOffsets(changelog);
    const partitions = ctxs.map((c) => c.partition);
    const target = restoreTargets(offsets, partitions);
    if (target.size === 0) return;
    const byPartition = new Map(ctxs.map((c) => [c.partition, c]));
    const seen = new Map<number, bigint>();
    const groupId = `${this.opts.groupId}-restore-${randomUUID().slice(0, 8)}`;
    // A short fetch wait: the reader is disconnected as soon as it has reached the targets, and
    // kafkajs's disconnect waits for the fetch in flight (5 s by default), which held every
    // restored partition back for up to 5 s however small its changelog.
    const reader = this.opts.kafka.consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 100 });
    const doneOf = (p: number): boolean => restoredUpTo(seen, target, p);
    let entries = 0;
    try {
      // Control-only batches (commit markers) are not delivered to eachBatch; this event still
      // reports how far the reader got, which is how the end of a transactional log is seen.
      reader.on(reader.events.END_BATCH_PROCESS, (e) => {
        const last = BigInt(e.payload.lastOffset);
        if (last > (seen.get(e.payload.partition) ?? -1n)) seen.set(e.payload.partition, last);
      });
      await reader.connect();
      await reader.subscribe({ topic: changelog, fromBeginning: true });
      await reader.run({
        eachBatch: async ({ batch }) => {
          const ctx = byPartition.get(batch.partition);
          if (!ctx) return;
          for (const m of batch.messages) {
            const key = m.key?.toString() ?? "";
            if (m.value === null) ctx.states.delete(key);
            else {
              const decoded = await spec.codec.decode(m.value);
              if (!decoded.ok)
                throw new Error(`changelog ${changelog}/${batch.partition}@${m.offset}: ${decoded.reason}`);
              ctx.states.set(key, stateFromEnvelope(spec, decoded.value));
            }
            entries++;
          }
        },
      });
      const deadline = Date.now() + 120_000;
      while (![...target.keys()].every(doneOf)) {
        if (Date.now() > deadline) throw new Error(`restore of ${changelog} timed out`);
        await sleep(50);
      }
    } finally {
      await reader.disconnect().catch(() => undefined);
      await this.opts.admin.deleteGroups([groupId]).catch(() => undefined);
    }
    this.obs.log?.("info", "state restored", {
      changelog,
      partitions: [...target.keys()],
      entries,
      keys: ctxs.reduce((n, c) => n + c.states.size, 0),
      ms: Date.now() - started,
    });
  }

  private scheduleResume(): void {
    if (this.resumeTimer) return;
    this.resumeTimer = setInterval(() => {
      if (this.handler.pressure?.()) return;
      const topic = this.handler.input.topic;
      const partitions = [...this.paused];
      this.paused.clear();
      if (partitions.length > 0) this.consumer.resume([{ topic, partitions }]);
      this.obs.paused?.(0);
      clearInterval(this.resumeTimer);
      this.resumeTimer = undefined;
    }, 200);
    this.resumeTimer.unref();
  }

  private decodeInput = (m: KafkaMessage): Promise<DecodedInput<I>> => decodeStageInput(m, this.handler.input);

  // --- Retrying what fails for a transient reason -----------------------------------------------

  /**
   * `call` until it succeeds, fails permanently, or the work is abandoned. A transient failure
   * (a dependency down) pauses the partition and waits with backoff, heartbeating, without limit;
   * an unrecognised one is retried maxAttempts times in all; a permanent one is not retried.
   */
  private async retrying<T>(
    what: string,
    hint: Dependency | undefined,
    io: ChunkIo,
    call: () => Promise<T>,
    fields: Record<string, unknown> = {},
  ): Promise<Attempt<T>> {
    let failures = 0;
    let transient = 0;
    let resume: (() => void) | undefined;
    try {
      for (;;) {
        const stopBeating = io.keepAlive();
        try {
          const value = await call();
          this.recovered();
          return { ok: true, value };
        } catch (err) {
          stopBeating();
          const last = errMessage(err);
          const cls = classifyError(err, hint);
          this.obs.event?.("error");
          if (cls.kind === "transient") {
            transient++;
            this.health.failed(cls.dependency, Date.now());
            this.reportDown();
            this.startDownWatch();
            if (!resume) {
              const resumeFetch = io.pause();
              this.transientPauses++;
              this.obs.paused?.(this.paused.size + this.transientPauses);
              resume = () => {
                resumeFetch();
                this.transientPauses--;
                this.obs.paused?.(this.paused.size + this.transientPauses);
              };
            }
            const delayMs = backoffDelay(transient, this.transientBackoff, this.random);
            this.obs.log?.("warn", `${what} failed: dependency unavailable, retrying`, {
              ...fields,
              dependency: cls.dependency,
              attempt: transient,
              delayMs,
              error: last,
            });
            if (!(await this.waitLive(delayMs, io))) return { abandoned: true };
            continue;
          }
          failures++;
          this.obs.log?.("warn", `${what} failed`, { ...fields, attempt: failures, error: last, class: cls.kind });
          const next =
            cls.kind === "permanent"
              ? { retry: false as const }
              : afterFailure(err, failures, this.maxAttempts, this.backoffMs);
          if (!next.retry) return { ok: false, reason: last, attempts: failures + transient };
          if (!(await this.waitLive(next.delayMs, io))) return { abandoned: true };
        } finally {
          stopBeating();
        }
      }
    } finally {
      resume?.();
    }
  }

  /** Waits ms in slices, heartbeating; false as soon as the work should be abandoned. */
  private async waitLive(ms: number, io: ChunkIo): Promise<boolean> {
    const end = Date.now() + ms;
    for (;;) {
      if (!io.live()) return false;
      const left = end - Date.now();
      if (left <= 0) return true;
      await sleep(Math.min(left, 1000));
      await io.heartbeat();
    }
  }

  /** Logs and reports each dependency that has now been failing for longer than the limit (once per outage). */
  private reportDown(): void {
    for (const { dependency, downMs } of this.health.overdue(Date.now(), this.downLimitMs)) {
      if (this.reportedDown.has(dependency)) continue;
      this.reportedDown.add(dependency);
      this.obs.log?.("error", "dependency down longer than the limit: not ready", {
        dependency,
        downMs,
        limitMs: this.downLimitMs,
      });
      this.obs.dependency?.({ dependency, down: true, downMs });
    }
  }

  private startDownWatch(): void {
    if (this.downWatch || this.stopping) return;
    this.downWatch = setInterval(() => this.reportDown(), Math.max(100, Math.min(1000, this.downLimitMs / 4)));
    this.downWatch.unref();
  }

  private stopDownWatch(): void {
    if (this.downWatch) clearInterval(this.downWatch);
    this.downWatch = undefined;
  }

  private recovered(): void {
    if (!this.health.failing) return;
    this.stopDownWatch();
    for (const dependency of this.health.recovered()) {
      const reported = this.reportedDown.delete(dependency);
      this.obs.log?.("info", "dependency available again", { dependency });
      if (reported) this.obs.dependency?.({ dependency, down: false, downMs: 0 });
    }
  }

  // --- Chunks --------------------------------------------------------------------------------------

  /** handle() and the encoding of its outputs; an output the broker could never take is permanent. */
  private async handleOne(
    key: string,
    input: StageInput<I>,
    state: S | undefined,
  ): Promise<{ messages: Message[]; state: S | undefined; dropKeys?: (key: string) => boolean }> {
    const res = await this.handler.handle(key, input, state);
    const messages = await outputMessages(this.handler.name, res.outputs, this.handler.output);
    this.tracing.outputs(key, messages, input.kind === "event", res.state !== undefined);
    const big = messages.find((m) => sizeOf(m) > MESSAGE_MAX_BYTES);
    if (big) throw new PoisonError(`output of ${sizeOf(big)} bytes is over the broker's message limit`);
    return { messages, state: res.state, ...(res.dropKeys ? { dropKeys: res.dropKeys } : {}) };
  }

  /** Bytes of a state's changelog entry (its payload; the envelope adds little). */
  private stateBytes(s: S | undefined): number {
    const spec = this.handler.state;
    if (!spec || s === undefined) return 64;
    return (spec.toJson ? spec.toJson(s) : JSON.stringify(s)).length + 256;
  }

  /**
   * Processes a chunk and commits it, in more than one transaction when its outputs and changed
   * states pass maxTransactionBytes. Returns the last offset committed and whether the whole
   * chunk was (false: abandoned for a stop or a rebalance; the rest is read again by its owner).
   */
  private async processChunk(
    ctx: PartitionCtx<S>,
    topic: string,
    chunk: KafkaMessage[],
    io: ChunkIo,
  ): Promise<{ lastCommitted: string | undefined; complete: boolean }> {
    let started = performance.now();
    const decoded: DecodedInput<I>[] = [];
    for (const m of chunk) {
      // The registry being down is not the value's fault: a decode that throws is retried.
      const d = await this.retrying("decode", "registry", io, () => this.decodeInput(m), { offset: m.offset });
      if ("abandoned" in d) return { lastCommitted: undefined, complete: false };
      decoded.push(d.ok ? d.value : { ok: false, reason: `decode: ${d.reason}` });
    }
    const valid: Pending[] = [];
    decoded.forEach((d, i) => {
      if (d.ok) valid.push({ key: (chunk[i] as KafkaMessage).key?.toString() ?? "", input: d.input });
    });
    if (this.handler.prepare && valid.length > 0) {
      // One long call for the chunk (the segmenter's embeddings): heartbeats go on meanwhile.
      const stopBeating = io.keepAlive();
      await this.handler
        .prepare(valid as { key: string; input: StageInput<I> }[])
        .catch((err) => this.obs.log?.("warn", "prepare failed", { error: errMessage(err) }))
        .finally(stopBeating);
    }

    let dirty = new Map<string, S | undefined>();
    let stateSizes = new Map<string, number>();
    let outputs: Message[] = [];
    let outputBytes = 0;
    let dlq: { entry: DlqEntry; reason: string }[] = [];
    let inputs = 0;
    let lastCommitted: string | undefined;
    const flush = async (last: KafkaMessage): Promise<boolean> => {
      const next = nextOffset(last.offset);
      try {
        await this.commit(ctx, outputs, dlq, dirty, { topic, offset: next });
      } catch (err) {
        if (!isFenced(err)) throw err;
        this.fenced(ctx, err);
        return false;
      }
      const seconds = (performance.now() - started) / 1000;
      for (let i = 0; i < inputs - dlq.length; i++) this.obs.event?.("ok", seconds / inputs);
      for (const d of dlq) {
        this.obs.event?.("dlq");
        this.obs.deadLetter?.(d.reason);
      }
      this.obs.committed?.({
        partition: ctx.partition,
        offset: next,
        inputs,
        outputs: outputs.length,
        dlq: dlq.length,
      });
      lastCommitted = last.offset;
      dirty = new Map();
      stateSizes = new Map();
      outputs = [];
      outputBytes = 0;
      dlq = [];
      inputs = 0;
      started = performance.now();
      return true;
    };
    for (const [i, m] of chunk.entries()) {
      const key = m.key?.toString() ?? "";
      const d = decoded[i] as DecodedInput<I>;
      const source = { topic, partition: ctx.partition, offset: m.offset, key, value: m.value };
      inputs++;
      if (!d.ok) {
        dlq.push({ entry: deadLetter(this.handler.name, source, d.reason), reason: refusalLabel(d.reason) });
      } else {
        const state = dirty.has(key) ? dirty.get(key) : ctx.states.get(key);
        const res = await this.retrying(
          "handler",
          undefined,
          io,
          () => this.tracing.input(key, m.headers, d.input.kind, () => this.handleOne(key, d.input, state)),
          { key },
        );
        if ("abandoned" in res) return { lastCommitted, complete: false };
        if (!res.ok) {
          dlq.push({
            entry: deadLetter(this.handler.name, source, `handler: ${res.reason}`, res.attempts),
            reason: "handler",
          });
        } else {
          outputs.push(...res.value.messages);
          for (const o of res.value.messages) outputBytes += sizeOf(o);
          if (this.handler.state) {
            dirty.set(key, res.value.state);
            stateSizes.set(key, this.stateBytes(res.value.state));
          }
          // Erasure (issue 13): the handler's dropKeys, over the held and the chunk's changed keys.
          if (this.handler.state && res.value.dropKeys) {
            dropMatching(ctx.states, dirty, res.value.dropKeys);
            for (const [k, v] of dirty) if (v === undefined) stateSizes.set(k, 0);
          }
        }
      }
      // Heartbeat per message: a slow chunk (LLM, Neo4j) must not outlast the session timeout.
      await io.heartbeat();
      let bytes = outputBytes;
      for (const n of stateSizes.values()) bytes += n;
      if (bytes >= this.maxTxBytes && i < chunk.length - 1) {
        if (!io.live() || !(await flush(m))) return { lastCommitted, complete: false };
      }
    }
    const complete = await flush(chunk[chunk.length - 1] as KafkaMessage);
    return { lastCommitted, complete };
  }

  /** One transaction: outputs, dead letters, changelog entries and (for a batch) the offsets. */
  private async commit(
    ctx: PartitionCtx<S>,
    outputs: Message[],
    dlq: { entry: DlqEntry }[],
    dirty: Map<string, S | undefined>,
    offsets: { topic: string; offset: string } | undefined,
  ): Promise<void> {
    const topicMessages: { topic: string; messages: Message[] }[] = [];
    if (outputs.length > 0) {
      if (!this.handler.output) throw new Error(`${this.handler.name} has no output topic`);
      topicMessages.push({ topic: this.handler.output.topic, messages: outputs });
    }
    if (dlq.length > 0)
      topicMessages.push({
        topic: this.opts.dlq.topic,
        messages: await Promise.all(
          dlq.map(async (d) => ({ key: d.entry.key, value: await this.opts.dlq.encode(d.entry) })),
        ),
      });
    const spec = this.handler.state;
    if (spec && this.opts.changelogTopic && dirty.size > 0) {
      const now = new Date().toISOString();
      const messages = await changelogMessages(this.handler.name, dirty, spec, ctx.partition, now);
      topicMessages.push({ topic: this.opts.changelogTopic, messages });
    }
    if (topicMessages.length === 0 && !offsets) return;
    const tx = await ctx.producer.transaction();
    try {
      for (const part of splitBySize(topicMessages, SEND_MAX_BYTES)) await tx.sendBatch({ topicMessages: part });
      if (offsets)
        await tx.sendOffsets({
          consumerGroupId: this.opts.groupId,
          topics: [{ topic: offsets.topic, partitions: [{ partition: ctx.partition, offset: offsets.offset }] }],
        });
      await tx.commit();
    } catch (err) {
      await tx.abort().catch(() => undefined);
      throw err;
    }
    applyStates(ctx.states, dirty);
  }

  /**
   * This instance's producer for the partition was fenced: a newer owner exists (this one was
   * paused or evicted). Its transaction is aborted; the context goes, and the partition is left
   * alone until the group says otherwise (see lost).
   */
  private fenced(ctx: PartitionCtx<S>, err: unknown): void {
    this.obs.log?.("warn", "fenced: another instance owns the partition now", {
      partition: ctx.partition,
      error: errMessage(err),
    });
    this.lost.set(ctx.partition, Date.now() + (this.opts.sessionTimeoutMs ?? 30_000));
    if (this.partitions.get(ctx.partition) === ctx) void this.release(ctx.partition);
  }

  /** Idle flushes and the like: handler.tick's inputs, committed like a batch but without offsets. */
  private async runTick(): Promise<void> {
    const tick = this.handler.tick;
    if (!tick || this.stopping || this.rebalancing) return;
    for (const ctx of [...this.partitions.values()]) {
      // Not during a rebalance: the partition may be someone else's already, and a tick's
      // transaction would race the new owner's fence for nothing.
      if (this.rebalancing || !this.assigned.has(ctx.partition)) continue;
      const io: ChunkIo = {
        heartbeat: async () => undefined,
        pause: () => () => undefined,
        live: () => !this.stopping && !this.rebalancing && this.partitions.get(ctx.partition) === ctx,
        keepAlive: () => () => undefined,
      };
      await this.withLock(ctx, async () => {
        await ctx.ready;
        if (!io.live()) return;
        const due = tick(ctx.states, Date.now());
        if (due.length === 0) return;
        const dirty = new Map<string, S | undefined>();
        const outputs: Message[] = [];
        for (const { key, input } of due) {
          const state = dirty.has(key) ? dirty.get(key) : ctx.states.get(key);
          const res = await this.retrying(
            "tick input",
            undefined,
            io,
            () => this.tracing.input(key, undefined, input.kind, () => this.handleOne(key, input, state)),
            { key },
          );
          if ("abandoned" in res) return;
          if (!res.ok) {
            this.obs.log?.("error", "tick input failed", { key, error: res.reason });
            continue;
          }
          outputs.push(...res.value.messages);
          dirty.set(key, res.value.state);
          if (res.value.dropKeys) dropMatching(ctx.states, dirty, res.value.dropKeys);
        }
        if (!io.live()) return;
        try {
          await this.commit(ctx, outputs, [], dirty, undefined);
        } catch (err) {
          if (!isFenced(err)) throw err;
          this.fenced(ctx, err);
          return;
        }
        this.obs.log?.("info", "tick committed", {
          partition: ctx.partition,
          keys: due.length,
          outputs: outputs.length,
        });
      }).catch((err) => this.obs.log?.("error", "tick failed", { error: errMessage(err) }));
    }
  }
}
