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
 *   transaction before the new owner reads the changelog. (kafkajs cannot send the consumer-group
 *   metadata of KIP-447, so per-partition ids are what make fencing hold across instances.)
 * - Keyed state in a compacted changelog memory.<stage>-state.v1 with as many partitions as the
 *   input topic; the state of a key consumed from input partition p is written to changelog
 *   partition p, so on assignment partition p's state is exactly changelog partition p, read up to
 *   its high watermark (read_committed) before p's first message is processed.
 * - Poison: an undecodable or invalid value, or one whose handler still fails after bounded retries
 *   with backoff, becomes a dead letter (memory.dlq.v1) in the same transaction; the partition flows.
 * - Backpressure: while handler.pressure() says the sink is saturated, the partition is paused
 *   (consumer.pause) and resumed when it clears.
 * - stop(): finishes and commits the chunk in flight, then disconnects (SIGTERM/SIGINT in process.ts).
 */
import { randomUUID } from "node:crypto";
import type { Admin, Consumer, Kafka, KafkaMessage, Message, Producer } from "kafkajs";
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
  nextOffset,
  outputMessages,
  refusalLabel,
  restoredUpTo,
  restoreTargets,
  SEND_MAX_BYTES,
  type StageInput,
  type StageOutput,
  splitBySize,
  stateFromEnvelope,
} from "./stage-runtime-parts.ts";

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
}

export interface StageObserver {
  committed?(info: { partition: number; offset: string; inputs: number; outputs: number; dlq: number }): void;
  event?(outcome: "ok" | "error" | "dlq", seconds?: number): void;
  deadLetter?(reason: string): void;
  lag?(topic: string, partition: number, lag: number): void;
  paused?(partitions: number): void;
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
  /** Attempts of a failing event before it goes to the DLQ (default 3), with exponential backoff. */
  maxAttempts?: number;
  backoffMs?: number;
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
}

type Pending = { key: string; input: StageInput<unknown> };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const errMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export class StageRuntime<I, O, S> {
  private readonly consumer: Consumer;
  private readonly partitions = new Map<number, PartitionCtx<S>>();
  private readonly paused = new Set<number>();
  private assigned = new Set<number>();
  private stopping = false;
  private tickTimer: NodeJS.Timeout | undefined;
  private resumeTimer: NodeJS.Timeout | undefined;
  private readonly maxChunk: number;
  private readonly maxAttempts: number;
  private readonly backoffMs: number;
  private readonly obs: StageObserver;
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

  async start(): Promise<void> {
    const topic = this.handler.input.topic;
    this.consumer.on(this.consumer.events.GROUP_JOIN, (e) => {
      const mine = new Set(e.payload.memberAssignment[topic] ?? []);
      this.assigned = mine;
      for (const p of [...this.partitions.keys()]) if (!mine.has(p)) void this.release(p);
      for (const p of mine) this.ensure(p);
      this.obs.log?.("info", "partitions assigned", { partitions: [...mine] });
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
      partitionsConsumedConcurrently: 1,
      eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale, pause }) => {
        const ctx = this.ensure(batch.partition);
        await this.waitReady(ctx, heartbeat);
        for (const chunk of chunksOf(batch.messages, this.maxChunk)) {
          if (this.stopping || !isRunning() || isStale()) break;
          if (this.handler.pressure?.()) {
            pause();
            this.paused.add(batch.partition);
            this.obs.paused?.(this.paused.size);
            this.scheduleResume();
            break;
          }
          await this.withLock(ctx, () => this.processChunk(ctx, batch.topic, chunk));
          const last = chunk[chunk.length - 1] as KafkaMessage;
          resolveOffset(last.offset);
          this.obs.lag?.(batch.topic, batch.partition, lagAfter(batch.highWatermark, last.offset));
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
    };
    // Connecting initialises the transactional id: the previous owner is fenced and its open
    // transaction aborted, so the changelog read next is final.
    ctx.ready = (async () => {
      await producer.connect();
      if (this.handler.state) await this.restore([ctx]);
    })();
    ctx.ready.catch(() => undefined);
    this.partitions.set(partition, ctx);
    return ctx;
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
    const reader = this.opts.kafka.consumer({ groupId, readUncommitted: false });
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

  /** Runs handle() with bounded retries; the outputs are encoded inside the attempt. */
  private async attempt(
    key: string,
    input: StageInput<I>,
    state: S | undefined,
  ): Promise<
    | { ok: true; messages: Message[]; state: S | undefined; dropKeys?: (key: string) => boolean }
    | { ok: false; reason: string; attempts: number }
  > {
    let last = "";
    for (let a = 1; a <= this.maxAttempts; a++) {
      try {
        const res = await this.handler.handle(key, input, state);
        const messages = await outputMessages(this.handler.name, res.outputs, this.handler.output);
        return { ok: true, messages, state: res.state, ...(res.dropKeys ? { dropKeys: res.dropKeys } : {}) };
      } catch (err) {
        last = errMessage(err);
        this.obs.event?.("error");
        this.obs.log?.("warn", "handler failed", { key, attempt: a, error: last });
        const next = afterFailure(err, a, this.maxAttempts, this.backoffMs);
        if (!next.retry) return { ok: false, reason: `handler: ${last}`, attempts: a };
        await sleep(next.delayMs);
      }
    }
    return { ok: false, reason: `handler: ${last}`, attempts: this.maxAttempts };
  }

  private async processChunk(ctx: PartitionCtx<S>, topic: string, chunk: KafkaMessage[]): Promise<void> {
    const started = performance.now();
    const decoded = await Promise.all(chunk.map(this.decodeInput));
    const valid: Pending[] = [];
    decoded.forEach((d, i) => {
      if (d.ok) valid.push({ key: (chunk[i] as KafkaMessage).key?.toString() ?? "", input: d.input });
    });
    if (this.handler.prepare && valid.length > 0)
      await this.handler
        .prepare(valid as { key: string; input: StageInput<I> }[])
        .catch((err) => this.obs.log?.("warn", "prepare failed", { error: errMessage(err) }));

    const dirty = new Map<string, S | undefined>();
    const outputs: Message[] = [];
    const dlq: { entry: DlqEntry; reason: string }[] = [];
    for (const [i, m] of chunk.entries()) {
      const key = m.key?.toString() ?? "";
      const d = decoded[i] as DecodedInput<I>;
      const source = { topic, partition: ctx.partition, offset: m.offset, key, value: m.value };
      if (!d.ok) {
        dlq.push({
          entry: deadLetter(this.handler.name, source, d.reason),
          reason: refusalLabel(d.reason),
        });
        continue;
      }
      const state = dirty.has(key) ? dirty.get(key) : ctx.states.get(key);
      const res = await this.attempt(key, d.input, state);
      if (!res.ok) {
        dlq.push({ entry: deadLetter(this.handler.name, source, res.reason, res.attempts), reason: "handler" });
        continue;
      }
      outputs.push(...res.messages);
      if (this.handler.state) dirty.set(key, res.state);
      // Erasure (issue 13): the handler's dropKeys, over the held and the chunk's changed keys.
      if (this.handler.state && res.dropKeys) dropMatching(ctx.states, dirty, res.dropKeys);
    }
    const last = chunk[chunk.length - 1] as KafkaMessage;
    const next = nextOffset(last.offset);
    await this.commit(ctx, outputs, dlq, dirty, { topic, offset: next });
    const seconds = (performance.now() - started) / 1000;
    for (let i = 0; i < chunk.length - dlq.length; i++) this.obs.event?.("ok", seconds / chunk.length);
    for (const d of dlq) {
      this.obs.event?.("dlq");
      this.obs.deadLetter?.(d.reason);
    }
    this.obs.committed?.({
      partition: ctx.partition,
      offset: next,
      inputs: chunk.length,
      outputs: outputs.length,
      dlq: dlq.length,
    });
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

  /** Idle flushes and the like: handler.tick's inputs, committed like a batch but without offsets. */
  private async runTick(): Promise<void> {
    const tick = this.handler.tick;
    if (!tick || this.stopping) return;
    for (const ctx of [...this.partitions.values()]) {
      if (!this.assigned.has(ctx.partition)) continue;
      await this.withLock(ctx, async () => {
        await ctx.ready;
        const due = tick(ctx.states, Date.now());
        if (due.length === 0 || this.stopping) return;
        const dirty = new Map<string, S | undefined>();
        const outputs: Message[] = [];
        for (const { key, input } of due) {
          const res = await this.attempt(key, input, dirty.has(key) ? dirty.get(key) : ctx.states.get(key));
          if (!res.ok) {
            this.obs.log?.("error", "tick input failed", { key, error: res.reason });
            continue;
          }
          outputs.push(...res.messages);
          dirty.set(key, res.state);
        }
        await this.commit(ctx, outputs, [], dirty, undefined);
        this.obs.log?.("info", "tick committed", {
          partition: ctx.partition,
          keys: due.length,
          outputs: outputs.length,
        });
      }).catch((err) => this.obs.log?.("error", "tick failed", { error: errMessage(err) }));
    }
  }
}
