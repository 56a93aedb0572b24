/**
 * What every stage process shares (services/<stage>/main.ts stays a thin wiring file): the Kafka
 * client, idempotent topic creation, schema registration and the stage runtime, served with the
 * platform's /metrics + /healthz + /readyz endpoint, JSON log lines and graceful shutdown on
 * SIGTERM / SIGINT (services/platform).
 */

import { Kafka, logLevel } from "kafkajs";
import { Gauge, Counter as PromCounter } from "prom-client";
import type { RunningHttpServer } from "../../../platform/http-server.ts";
import { jsonLogger, type LogFn } from "../../../platform/log.ts";
import { Metrics } from "../../../platform/metrics.ts";
import { startOpsServer } from "../../../platform/ops-server.ts";
import { onShutdownSignals } from "../../../platform/shutdown.ts";
import type { Config } from "../../config.ts";
import { checkSharedPartitionCount, ensureTopics, partitionCount, type Replication } from "./admin.ts";
import {
  openPipelineCodecs,
  type PipelineCodecs,
  RegistrySerdes,
  SCHEMA_FILES,
  type StageStateEnvelope,
  StageStateEnvelopeSchema,
  type TopicCodec,
} from "./serde.ts";
import { type StageHandler, type StageObserver, StageRuntime } from "./stage-runtime.ts";
import { type TopicNames, topicNames } from "./topics.ts";

export const kafkaClient = (config: Config, who: string): Kafka =>
  new Kafka({
    clientId: `${config.kafka.clientId}-${who}-${config.kafka.instanceId}`,
    brokers: config.kafka.brokers.split(",").map((b) => b.trim()),
    logLevel: config.kafka.debug ? logLevel.DEBUG : logLevel.NOTHING,
    retry: { retries: 10, initialRetryTime: 100 },
  });

/** The replication of created topics, from config.kafka. */
export const replicationOf = (config: Config): Replication => ({
  replicationFactor: config.kafka.replicationFactor,
  minInsyncReplicas: config.kafka.minInsyncReplicas,
  allowSingleReplica: config.kafka.allowSingleReplica,
});

/** Creates every pipeline topic that is missing (the changelogs come with their stage). */
export const ensurePipelineTopics = async (kafka: Kafka, config: Config): Promise<TopicNames> => {
  const topics = topicNames(config.kafka);
  const admin = kafka.admin();
  await admin.connect();
  try {
    const n = config.kafka.partitions;
    await ensureTopics(
      admin,
      [
        { topic: topics.turns, partitions: n },
        { topic: topics.sensory, partitions: n },
        { topic: topics.segments, partitions: n },
        { topic: topics.records, partitions: n },
        { topic: topics.updateQueue, partitions: n, compacted: true },
        { topic: topics.dlq, partitions: n },
      ],
      replicationOf(config),
    );
    await checkSharedPartitionCount(admin, [topics.turns, topics.sensory, topics.segments, topics.records]);
  } finally {
    await admin.disconnect();
  }
  return topics;
};

export interface StageBuildContext {
  config: Config;
  topics: TopicNames;
  codecs: PipelineCodecs;
  /** Codec of this stage's changelog (registered). */
  stateCodec: TopicCodec<StageStateEnvelope>;
  metrics: Metrics;
  log: LogFn;
}

export interface BuiltStage<I, O, S> {
  handler: StageHandler<I, O, S>;
  /**
   * Stateless handlers that run beside the stage in its process, each its own consumer group
   * (named after the handler) sharing the process's parts: the indexer's raw-turn consumer.
   */
  // biome-ignore lint/suspicious/noExplicitAny: handlers of any input and output topic
  companions?: StageHandler<any, any, never>[];
  /** Releases models and stores after the runtime stopped. */
  close?(): Promise<void>;
}

export interface StageProcessOptions<I, O, S> {
  stage: string;
  config: Config;
  /** /metrics + /healthz port when config.metrics.port (MEMORY_METRICS_PORT) is unset; 0 picks a free one. */
  defaultMetricsPort: number;
  /** Messages per transaction (default config.kafka.maxChunk, MEMORY_STAGE_MAX_CHUNK). */
  maxChunk?: number;
  build(ctx: StageBuildContext): Promise<BuiltStage<I, O, S>>;
}

/** Starts one stage process and resolves once it is consuming; stops on SIGTERM / SIGINT. */
export const runStageProcess = async <I, O, S>(opts: StageProcessOptions<I, O, S>): Promise<void> => {
  const { stage, config } = opts;
  const log = jsonLogger(stage);
  const kafka = kafkaClient(config, stage);
  const topics = await ensurePipelineTopics(kafka, config);
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const codecs = await openPipelineCodecs(serdes, topics);
  const changelog = topics.state(stage);
  const stateCodec = await serdes.codec(changelog, SCHEMA_FILES.state, StageStateEnvelopeSchema);
  const metrics = new Metrics({ defaultLabels: { service: stage } });
  const built = await opts.build({ config, topics, codecs, stateCodec, metrics, log });
  const handler = built.handler;

  const admin = kafka.admin();
  await admin.connect();
  if (handler.state)
    await ensureTopics(
      admin,
      [{ topic: changelog, partitions: await partitionCount(admin, handler.input.topic), compacted: true }],
      replicationOf(config),
    );

  const registers = [metrics.registry];
  const lag = new Gauge({
    name: "memory_consumer_lag",
    help: "Messages behind the high watermark, per input partition of the stage's consumer group.",
    labelNames: ["stage", "topic", "partition"],
    registers,
  });
  const dlqTotal = new PromCounter({
    name: "memory_dlq_messages_total",
    help: "Messages a stage sent to the dead-letter topic, by reason (decode, validation, handler).",
    labelNames: ["stage", "reason"],
    registers,
  });
  const pausedGauge = new Gauge({
    name: "memory_consumer_paused_partitions",
    help: "Input partitions paused for backpressure.",
    labelNames: ["stage"],
    registers,
  });
  const dependencyDown = new Gauge({
    name: "memory_dependency_down",
    help: "1 while a dependency (neo4j, registry, llm, kafka, network) has failed for longer than MEMORY_DEPENDENCY_DOWN_LIMIT_MS; the stage is not ready meanwhile.",
    labelNames: ["stage", "dependency"],
    registers,
  });
  const observerOf = (stage: string): StageObserver => ({
    dependency: (d) => dependencyDown.set({ stage, dependency: d.dependency }, d.down ? 1 : 0),
    committed: (c) => log("info", "committed", { ...c, ...(stage !== opts.stage ? { consumer: stage } : {}) }),
    event: (outcome, seconds) => metrics.stageEvent(stage, outcome, seconds),
    deadLetter: (reason) => dlqTotal.inc({ stage, reason }),
    lag: (topic, partition, n) => lag.set({ stage, topic, partition: String(partition) }, n),
    paused: (n) => pausedGauge.set({ stage }, n),
    log,
  });
  // biome-ignore lint/suspicious/noExplicitAny: the stage's own handler or a companion
  const runtimeOf = (h: StageHandler<any, any, any>, stage: string, withState: boolean) =>
    new StageRuntime(h, {
      kafka,
      admin,
      groupId: `${config.kafka.topicPrefix}memory-${stage}`,
      transactionalIdPrefix: `${config.kafka.topicPrefix}memory-${stage}`,
      dlq: codecs.dlq,
      ...(withState ? { changelogTopic: changelog } : {}),
      maxChunk: opts.maxChunk ?? config.kafka.maxChunk,
      sessionTimeoutMs: config.kafka.sessionTimeoutMs,
      dependencyDownLimitMs: config.kafka.dependencyDownLimitMs,
      transientBackoff: { baseMs: 200, maxMs: config.kafka.retryMaxBackoffMs },
      observer: observerOf(stage),
    });
  const runtime = runtimeOf(handler, stage, handler.state !== undefined);
  const companions = (built.companions ?? []).map((h) => runtimeOf(h, h.name, false));
  const runtimes = [runtime, ...companions];
  const failureOf = () => runtimes.find((r) => r.failure !== undefined)?.failure;

  let started = false;
  let http: RunningHttpServer | undefined;
  const shutdown = onShutdownSignals(log, () => [
    { name: "stop", run: async () => void (await Promise.all(runtimes.map((r) => r.stop()))) },
    { name: "closing the stage", run: async () => built.close?.() },
    { name: "admin disconnect", run: () => admin.disconnect() },
    { name: "closing the registry client", run: () => serdes.close() },
    { name: "closing the metrics server", run: async () => http?.close() },
  ]);
  http = await startOpsServer({
    metrics,
    host: config.metrics.host ?? "127.0.0.1",
    port: config.metrics.port ?? opts.defaultMetricsPort,
    health: () => {
      const failure = failureOf();
      return { ok: !failure, body: { ok: !failure, stage, ...(failure ? { error: failure.message } : {}) } };
    },
    // Ready once the consumer has joined and restored its state, until it fails or stops, and not
    // while a dependency has been down for longer than the limit (the stage only retries then).
    ready: () => {
      const down = runtimes.flatMap((r) => r.dependenciesDown());
      const ready = started && !shutdown.stopping && failureOf() === undefined && down.length === 0;
      return {
        ok: ready,
        body: { ready, stage, ...(down.length > 0 ? { dependenciesDown: down.map((d) => d.dependency) } : {}) },
      };
    },
  });

  const watchdog = setInterval(() => {
    const failure = failureOf();
    if (failure) void shutdown.stop(`consumer failed: ${failure.message}`, 1);
  }, 1000);
  watchdog.unref();

  for (const r of runtimes) await r.start();
  started = true;
  log("info", "started", {
    input: handler.input.topic,
    ...(companions.length > 0
      ? { companions: (built.companions ?? []).map((h) => ({ name: h.name, input: h.input.topic })) }
      : {}),
    output: handler.output?.topic,
    changelog: handler.state ? changelog : undefined,
    metrics: http.url,
  });
};
