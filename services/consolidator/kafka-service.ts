/**
 * The sleep-time consolidator as a Kafka consumer of the compacted update queue (key: record id,
 * value: that record's update candidates). For each consumed batch it
 *   1. ensures the candidates are in the graph's pending set (putUpdateCandidates: MERGE, a
 *      candidate already settled stays settled, so a replay decides nothing twice),
 *   2. runs the consolidation (runConsolidation, the embedded runtime's rules and decider) for the
 *      batch's tenants: every decision is one graph transaction, idempotent,
 *   3. only then commits the batch's offsets.
 * A crash anywhere replays the uncommitted batch, which finds the decisions already made.
 *
 * Off-peak: the consumer takes messages only while a trigger of consolidator/scheduler.ts holds
 * (UTC window, ingest idle, upstream lag low), checked every checkIntervalMs; otherwise the
 * topic's partitions are paused (consumer.pause), nothing is fetched or buffered, and the
 * candidates wait in the topic (and, written by the indexer, in the graph's pending set).
 */
import type { Admin, Consumer, EachBatchPayload, Kafka } from "kafkajs";
import type { TopicCodec, UpdateCandidatesEvent } from "../core/adapters/kafka/serde.ts";
import type { UpdateCandidate } from "../core/types.ts";
import type { LogFn } from "../platform/log.ts";
import { type ConsolidatorDeps, runConsolidation } from "./consolidator.ts";
import { dueReason, type ScheduleSettings, type TriggerReason } from "./scheduler.ts";
import type { ConsolidatorMetrics } from "./service-metrics.ts";
import type { ConsolidationDecider, ConsolidationReport } from "./types.ts";
import { groupLag, type UpstreamProbe } from "./upstream.ts";

/** Heartbeats during a consolidation run (kafkajs sends one at most every heartbeatInterval). */
const HEARTBEAT_MS = 2000;

export interface ConsolidatorServiceOptions {
  kafka: Kafka;
  /** Connected admin client (lag probes). */
  admin: Admin;
  /** The update queue's codec (its topic is the one consumed). */
  codec: TopicCodec<UpdateCandidatesEvent>;
  groupId: string;
  sessionTimeoutMs: number;
  graph: ConsolidatorDeps["graph"];
  /** Default: the deterministic rules. */
  decider?: ConsolidationDecider;
  /** Groups decided at the same time within a run. */
  concurrency: number;
  schedule: ScheduleSettings;
  checkIntervalMs: number;
  /** Upstream lag and ingest position (upstream.ts probeUpstream). */
  upstream: () => Promise<UpstreamProbe>;
  metrics: ConsolidatorMetrics;
  log: LogFn;
  clock?: () => number;
  /** Test hook handed to every run (consolidator.ts ConsolidateOptions.beforeCommit). */
  beforeCommit?: (ordinal: number, committed: number) => void;
}

export class ConsolidatorService {
  private consumer: Consumer | undefined;
  private timer: NodeJS.Timeout | undefined;
  private reason: TriggerReason | undefined;
  private gateOpen = false;
  private lastActivityMs: number;
  private ingestPosition: number | undefined;
  /** Unknown until the first probe: the lag and idle triggers wait for it. */
  private upstreamLag = Number.POSITIVE_INFINITY;
  private checking: Promise<void> | undefined;
  private readonly clock: () => number;
  /** Set when the consumer crashed for good (health fails, the process exits). */
  failure: Error | undefined;
  /** Runs completed since start (observability and tests). */
  runs = 0;
  lastReport: ConsolidationReport | undefined;

  constructor(private readonly opts: ConsolidatorServiceOptions) {
    this.clock = opts.clock ?? Date.now;
    this.lastActivityMs = this.clock();
  }

  get topic(): string {
    return this.opts.codec.topic;
  }

  /** Whether an off-peak trigger holds (the partitions are consumed). */
  get open(): boolean {
    return this.gateOpen;
  }

  /** Joins the group; the partitions start paused unless a trigger holds already. */
  async start(): Promise<void> {
    await this.check();
    const consumer = this.opts.kafka.consumer({
      groupId: this.opts.groupId,
      sessionTimeout: this.opts.sessionTimeoutMs,
      allowAutoTopicCreation: false,
      // A consolidation run may take minutes: the batch's heartbeats keep the member alive.
      rebalanceTimeout: Math.max(60_000, this.opts.sessionTimeoutMs),
    });
    consumer.on(consumer.events.CRASH, (e) => {
      if (!e.payload.restart) this.failure = e.payload.error;
      this.opts.log("error", "consumer crashed", { error: String(e.payload.error), restart: e.payload.restart });
    });
    this.consumer = consumer;
    await consumer.connect();
    await consumer.subscribe({ topic: this.topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: (payload) => this.onBatch(payload),
    });
    // A batch fetched before this pause is not processed either (onBatch checks the gate).
    if (!this.gateOpen) consumer.pause([{ topic: this.topic }]);
    this.timer = setInterval(() => void this.check(), this.opts.checkIntervalMs);
    this.timer.unref();
  }

  /** Stops checking, lets the batch in progress finish (its offsets commit) and leaves the group. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.checking;
    await this.consumer?.disconnect();
  }

  /** Reads the probes once and opens or closes the gate (pause / resume). Never throws. */
  check(): Promise<void> {
    this.checking ??= (async () => {
      try {
        try {
          const probe = await this.opts.upstream();
          if (this.ingestPosition !== undefined && probe.ingestPosition !== this.ingestPosition)
            this.lastActivityMs = this.clock();
          this.ingestPosition = probe.ingestPosition;
          this.upstreamLag = probe.upstreamLag;
          this.opts.metrics.upstream(probe.upstreamLag);
          this.opts.metrics.ownLag(this.topic, await groupLag(this.opts.admin, this.opts.groupId, this.topic, 1));
        } catch (err) {
          // The window trigger does not need the probes; idle and lag keep their last values.
          this.opts.log("warn", "lag probe failed", { error: String(err) });
        }
        this.setGate(
          dueReason(this.opts.schedule, {
            nowMs: this.clock(),
            lastActivityMs: this.lastActivityMs,
            inboxLag: this.upstreamLag,
            // The gate asks whether a trigger holds; the pending work is in the topic.
            pending: 1,
          }),
        );
      } finally {
        this.checking = undefined;
      }
    })();
    return this.checking;
  }

  private setGate(reason: TriggerReason | undefined): void {
    this.reason = reason;
    this.opts.metrics.checked();
    const open = reason !== undefined;
    if (open === this.gateOpen) return;
    this.gateOpen = open;
    this.opts.metrics.gate(open);
    if (this.consumer) {
      if (open) this.consumer.resume([{ topic: this.topic }]);
      else this.consumer.pause([{ topic: this.topic }]);
    }
    this.opts.log("info", open ? "consuming" : "paused", open ? { trigger: reason } : {});
  }

  private async onBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    if (!this.gateOpen) {
      // Fetched just before the gate closed: left unresolved, so it is fetched again after resume.
      this.consumer?.pause([{ topic: this.topic }]);
      return;
    }
    const trigger = this.reason ?? "window";
    const candidates: UpdateCandidate[] = [];
    const tenants = new Set<string>();
    for (const m of batch.messages) {
      if (m.value === null) {
        this.opts.metrics.skip("tombstone");
        continue;
      }
      const d = await this.opts.codec.decode(m.value);
      if (!d.ok) {
        // Nothing to decide from it; the record's pending candidates (if any) are in the graph.
        this.opts.metrics.skip("decode");
        this.opts.log("warn", "undecodable update-queue message skipped", {
          partition: batch.partition,
          offset: m.offset,
          reason: d.reason,
        });
        continue;
      }
      tenants.add(d.value.tenant);
      candidates.push(...d.value.candidates);
    }
    // A tenant's run can outlast the session timeout: keep the member alive meanwhile (a failed
    // heartbeat means a rebalance; the stale check below then leaves the offsets uncommitted).
    const beat = setInterval(() => void heartbeat().catch(() => undefined), HEARTBEAT_MS);
    try {
      if (candidates.length > 0) await this.opts.graph.putUpdateCandidates(candidates);
      for (const tenant of [...tenants].sort()) await this.consolidate(tenant, trigger);
    } finally {
      clearInterval(beat);
    }
    if (!isRunning() || isStale()) return;
    // lastOffset() covers the transaction marker that follows the last message, when fetched.
    const last = batch.lastOffset();
    resolveOffset(last);
    await this.consumer?.commitOffsets([
      { topic: batch.topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() },
    ]);
  }

  private async consolidate(tenant: string, trigger: TriggerReason): Promise<void> {
    try {
      const report = await runConsolidation(
        { graph: this.opts.graph, ...(this.opts.decider ? { decider: this.opts.decider } : {}) },
        {
          tenant,
          concurrency: this.opts.concurrency,
          ...(this.opts.beforeCommit ? { beforeCommit: this.opts.beforeCommit } : {}),
        },
      );
      this.runs++;
      this.lastReport = report;
      this.opts.metrics.ran(trigger, report, this.clock());
      this.opts.log("info", "consolidated", {
        tenant,
        trigger,
        examined: report.examined,
        merged: report.merged,
        superseded: report.superseded,
        linked: report.linked,
        unchanged: report.unchanged,
        dropped: report.dropped,
        ms: Math.round(report.ms),
      });
    } catch (err) {
      // Not committed: kafkajs retries the batch (and restarts the consumer after its retries).
      this.opts.metrics.failed(trigger);
      this.opts.log("error", "consolidation failed", { tenant, error: String(err) });
      throw err;
    }
  }
}
