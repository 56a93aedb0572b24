/**
 * Consolidator process (distributed runtime): consumes the compacted update queue
 * (memory.update-queue.v1) in its own consumer group (MEMORY_CONSOLIDATOR_GROUP, default
 * memory-consolidator, after the topic prefix) and applies the sleep-time consolidation to the
 * configured stores (MEMORY_STORE=neo4j in a deployment) off-peak: MEMORY_CONSOLIDATION_WINDOW,
 * MEMORY_CONSOLIDATION_IDLE_MINUTES (+ MEMORY_CONSOLIDATION_MAX_LAG), MEMORY_CONSOLIDATION_LAG_THRESHOLD;
 * outside them its partitions are paused. Safe to run more than one: the group splits the
 * partitions, and every decision is an idempotent graph transaction. MEMORY_METRICS_PORT
 * defaults to 9106 (/metrics, /healthz, /readyz).
 */
import { openStores } from "../composition/stores.ts";
import { ensurePipelineTopics, kafkaClient } from "../core/adapters/kafka/process.ts";
import { RegistrySerdes, SCHEMA_FILES, UpdateCandidatesEventSchema } from "../core/adapters/kafka/serde.ts";
import { loadProcessConfig } from "../core/config.ts";
import type { RunningHttpServer } from "../platform/http-server.ts";
import { jsonLogger } from "../platform/log.ts";
import { Metrics } from "../platform/metrics.ts";
import { startOpsServer } from "../platform/ops-server.ts";
import { onShutdownSignals } from "../platform/shutdown.ts";
import { setupTracing } from "../platform/tracing.ts";
import { ConsolidatorService } from "./kafka-service.ts";
import { ConsolidatorMetrics } from "./service-metrics.ts";
import { crashHookFromEnv, scheduleFrom } from "./service-settings.ts";
import { probeUpstream } from "./upstream.ts";

const NAME = "consolidator";
const config = loadProcessConfig();
await setupTracing("consolidator"); // MEMORY_TRACING (docs/tracing.md); off by default
const log = jsonLogger(NAME);
const kafka = kafkaClient(config, NAME);
const topics = await ensurePipelineTopics(kafka, config);
const serdes = new RegistrySerdes(config.kafka.registryUrl);
const codec = await serdes.codec(topics.updateQueue, SCHEMA_FILES.updateQueue, UpdateCandidatesEventSchema);
const stores = await openStores(config);
log("info", "stores opened", { store: stores.kind, where: stores.label });
const admin = kafka.admin();
await admin.connect();
const metrics = new Metrics({ defaultLabels: { service: NAME } });
const groupId = `${config.kafka.topicPrefix}${config.consolidation.consumerGroup}`;
const crash = crashHookFromEnv(process.env);
const service = new ConsolidatorService({
  kafka,
  admin,
  codec,
  groupId,
  sessionTimeoutMs: config.kafka.sessionTimeoutMs,
  graph: stores.graph,
  // The embedded runtime's default: the deterministic rules (no LLM decider is configurable yet).
  concurrency: config.consolidation.concurrency,
  schedule: scheduleFrom(config.consolidation),
  checkIntervalMs: config.consolidation.checkIntervalMs,
  upstream: () => probeUpstream(admin, topics, config.kafka.topicPrefix),
  metrics: new ConsolidatorMetrics(metrics.registry),
  log,
  ...(crash ? { beforeCommit: crash } : {}),
});

let started = false;
let http: RunningHttpServer | undefined;
const shutdown = onShutdownSignals(log, () => [
  { name: "stop", run: () => service.stop() },
  { name: "closing the stores", run: () => stores.close() },
  { name: "admin disconnect", run: () => admin.disconnect() },
  { name: "closing the registry client", run: () => serdes.close() },
  { name: "closing the metrics server", run: async () => http?.close() },
]);
http = await startOpsServer({
  metrics,
  host: config.metrics.host ?? "127.0.0.1",
  port: config.metrics.port ?? 9106,
  health: () => {
    const ok = service.failure === undefined;
    return { ok, body: { ok, stage: NAME, ...(service.failure ? { error: service.failure.message } : {}) } };
  },
  // Ready once it has joined the group (consuming or paused), until it fails or stops.
  ready: () => {
    const ready = started && !shutdown.stopping && service.failure === undefined;
    return { ok: ready, body: { ready, stage: NAME, consuming: service.open } };
  },
});
const watchdog = setInterval(() => {
  if (service.failure) void shutdown.stop(`consumer failed: ${service.failure.message}`, 1);
}, 1000);
watchdog.unref();

await service.start();
started = true;
log("info", "started", {
  input: topics.updateQueue,
  group: groupId,
  store: stores.kind,
  consuming: service.open,
  window: config.consolidation.window,
  metrics: http.url,
});
