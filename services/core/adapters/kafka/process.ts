/**
 * What every stage process shares (services/<stage>/main.ts stays a thin wiring file): the Kafka
 * client, idempotent topic creation, schema registration, the stage runtime, a /metrics + /healthz +
 * /readyz endpoint, JSON log lines on stdout, and graceful shutdown on SIGTERM / SIGINT.
 */

import { Kafka, logLevel } from "kafkajs";
import { Gauge, Counter as PromCounter } from "prom-client";
import { type RunningHttpServer, startHttpServer } from "../../../gateway/http-server.ts";
import { Metrics } from "../../../gateway/metrics.ts";
import type { Config } from "../../config.ts";
import { ensureTopics, partitionCount } from "./admin.ts";
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

export type LogFn = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;

export const jsonLogger =
  (stage: string): LogFn =>
  (level, msg, fields = {}) => {
    const line = JSON.stringify({ t: new Date().toISOString(), level, stage, msg, ...fields });
    if (level === "error") process.stderr.write(`${line}\n`);
    process.stdout.write(`${line}\n`);
  };

export const kafkaClient = (config: Config, who: string): Kafka =>
  new Kafka({
    clientId: `${config.kafka.clientId}-${who}-${config.kafka.instanceId}`,
    brokers: config.kafka.brokers.split(",").map((b) => b.trim()),
    logLevel: process.env.KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.NOTHING,
    retry: { retries: 10, initialRetryTime: 100 },
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
      config.kafka.replicationFactor,
    );
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
  /** Releases models and stores after the runtime stopped. */
  close?(): Promise<void>;
}

export interface StageProcessOptions<I, O, S> {
  stage: string;
  config: Config;
  /** /metrics + /healthz port (MEMORY_METRICS_PORT; 0 picks a free one). */
  metricsPort: number;
  /** Messages per transaction. */
  maxChunk?: number;
  build(ctx: StageBuildContext): Promise<BuiltStage<I, O, S>>;
}

/** An integer setting of a service process (ports, sizes) from the environment, else the default. */
export const envInt = (name: string, fallback: number): number => {
  const v = process.env[name];
  const n = v === undefined || v === "" ? Number.NaN : Number(v);
  return Number.isInteger(n) ? n : fallback;
};

/** Default metrics port of a stage process: MEMORY_METRICS_PORT, else the given default. */
export const metricsPortFromEnv = (fallback: number): number => envInt("MEMORY_METRICS_PORT", fallback);

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
      config.kafka.replicationFactor,
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
  const observer: StageObserver = {
    committed: (c) => log("info", "committed", c),
    event: (outcome, seconds) => metrics.stageEvent(stage, outcome, seconds),
    deadLetter: (reason) => dlqTotal.inc({ stage, reason }),
    lag: (topic, partition, n) => lag.set({ stage, topic, partition: String(partition) }, n),
    paused: (n) => pausedGauge.set({ stage }, n),
    log,
  };
  const runtime = new StageRuntime(handler, {
    kafka,
    admin,
    groupId: `${config.kafka.topicPrefix}memory-${stage}`,
    transactionalIdPrefix: `${config.kafka.topicPrefix}memory-${stage}`,
    dlq: codecs.dlq,
    ...(handler.state ? { changelogTopic: changelog } : {}),
    maxChunk: opts.maxChunk ?? envInt("MEMORY_STAGE_MAX_CHUNK", 50),
    sessionTimeoutMs: config.kafka.sessionTimeoutMs,
    observer,
  });

  let started = false;
  let stopping: Promise<void> | undefined;
  let http: RunningHttpServer | undefined;
  http = await startHttpServer(
    {
      fetch: async (req: Request): Promise<Response> => {
        const path = new URL(req.url).pathname;
        if (path === "/metrics")
          return new Response(await metrics.render(), { headers: { "content-type": metrics.contentType } });
        if (path === "/healthz") {
          const ok = runtime.failure === undefined;
          return Response.json(
            { ok, stage, ...(runtime.failure ? { error: runtime.failure.message } : {}) },
            { status: ok ? 200 : 503 },
          );
        }
        if (path === "/readyz") {
          // Ready once the consumer has joined and restored its state, until it fails or stops.
          const ready = started && stopping === undefined && runtime.failure === undefined;
          return Response.json({ ready, stage }, { status: ready ? 200 : 503 });
        }
        return new Response("not found", { status: 404 });
      },
    },
    { host: process.env.MEMORY_METRICS_HOST ?? "127.0.0.1", port: opts.metricsPort },
  );

  const shutdown = (code: number, why: string): Promise<void> => {
    stopping ??= (async () => {
      log("info", "stopping", { why });
      await runtime.stop().catch((err) => log("error", "stop failed", { error: String(err) }));
      await built.close?.().catch(() => undefined);
      await admin.disconnect().catch(() => undefined);
      await serdes.close().catch(() => undefined);
      await http?.close().catch(() => undefined);
      http = undefined;
      log("info", "stopped");
      process.exit(code);
    })();
    return stopping;
  };
  process.once("SIGTERM", () => void shutdown(0, "SIGTERM"));
  process.once("SIGINT", () => void shutdown(0, "SIGINT"));
  const watchdog = setInterval(() => {
    if (runtime.failure) void shutdown(1, `consumer failed: ${runtime.failure.message}`);
  }, 1000);
  watchdog.unref();

  await runtime.start();
  started = true;
  log("info", "started", {
    input: handler.input.topic,
    output: handler.output?.topic,
    changelog: handler.state ? changelog : undefined,
    metrics: http.url,
  });
};
