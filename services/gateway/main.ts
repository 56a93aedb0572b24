/**
 * Gateway process (distributed runtime): the front door. HTTP (the same createHttpApp and OpenAPI
 * document as the embedded server) and gRPC (schemas/memory.proto) on 127.0.0.1 by default, both
 * over the DistributedMemoryService: turns and flushes go to memory.turns.v1, reads go to the query
 * service over gRPC. The tenant always comes from the API key (MEMORY_API_KEYS / config apiKeys).
 *
 * Env: MEMORY_HTTP_HOST / MEMORY_HTTP_PORT (127.0.0.1 / 8787; /healthz, /readyz are on it, and
 * /metrics unless MEMORY_METRICS_PORT is set: then /metrics (and /healthz) are served only on that
 * port, on MEMORY_METRICS_HOST or the HTTP host, so tenant-labelled metrics stay off the public port), MEMORY_GRPC_HOST / MEMORY_GRPC_PORT (the HTTP host / 50051; 0 picks a free port),
 * MEMORY_QUERY_ADDR (host:port of the query service, 127.0.0.1:50052), MEMORY_INTERNAL_TOKEN (sent
 * to the query service when set), KAFKA_BROKERS, SCHEMA_REGISTRY_URL, MEMORY_TOPIC_PREFIX;
 * MEMORY_STORE=neo4j with NEO4J_* for the explorer's conversation and timeline routes (/ui).
 * Logs JSON lines on stdout; "started" carries the bound addresses.
 */
import { openStores } from "../composition/stores.ts";
import { DEFAULT_API_KEY, defaultKeyExposure, loadProcessConfig } from "../core/config.ts";
import { apiKeyAuthenticator } from "../platform/grpc/auth.ts";
import { startHttpServer } from "../platform/http-server.ts";
import { jsonLogger, requestLogger } from "../platform/log.ts";
import { Metrics } from "../platform/metrics.ts";
import { startOpsServer } from "../platform/ops-server.ts";
import { onShutdownSignals } from "../platform/shutdown.ts";
import { setupTracing } from "../platform/tracing.ts";
import { StoreExplorerReader } from "../query/explorer-reader.ts";
import { DistributedMemoryService } from "./distributed-memory-service.ts";
import { GrpcQueryBackend } from "./grpc-client.ts";
import { startGrpcServer } from "./grpc-server.ts";
import { createHttpApp } from "./http-app.ts";

const log = jsonLogger("gateway");
const config = loadProcessConfig();
await setupTracing("gateway"); // MEMORY_TRACING (docs/tracing.md); off by default
// As `memory serve`: with the default key, anyone who reaches a public address owns the default tenant.
const grpcHost = config.grpc.host ?? config.http.host;
const exposure = [config.http.host, grpcHost].map((host) =>
  defaultKeyExposure({ ...config, http: { ...config.http, host } }),
);
if (exposure.includes("refuse")) {
  log(
    "error",
    `refusing to serve on a non-loopback address with the default API key "${DEFAULT_API_KEY}"; set MEMORY_API_KEYS`,
  );
  process.exit(2);
}
if (exposure.includes("warn"))
  log("warn", `the default API key "${DEFAULT_API_KEY}" is configured; set MEMORY_API_KEYS`);
const metrics = new Metrics({ defaultLabels: { service: "gateway" } });
const internalToken = config.internalToken;
const queryAddr = config.queryService.address;
const backend = new GrpcQueryBackend(queryAddr, internalToken ? { internalToken } : {});
// The explorer's data routes (/ui) read segments and records from the shared graph store, as the
// query service does, when the gateway is given it (MEMORY_STORE=neo4j with NEO4J_*); otherwise
// they answer 501. A SQLite store belongs to the query service's process and is never opened here.
const stores = config.store.kind === "neo4j" ? await openStores(config) : undefined;
const explorer = stores ? new StoreExplorerReader(stores.graph, config.segmenter.threshold) : undefined;
const service = await DistributedMemoryService.open({ config, backend, ...(explorer ? { explorer } : {}), log });

// With MEMORY_METRICS_PORT set, /metrics leaves the public port for a port of its own.
const metricsHttp =
  config.metrics.port === undefined
    ? undefined
    : await startOpsServer({ metrics, host: config.metrics.host ?? config.http.host, port: config.metrics.port });

const http = await startHttpServer(
  createHttpApp({
    service,
    apiKeys: config.apiKeys,
    metrics,
    serveMetrics: metricsHttp === undefined,
    logger: requestLogger("gateway-http"),
    maxBodyBytes: config.http.maxBodyBytes,
    authFailuresPerMinute: config.http.authFailuresPerMinute,
  }),
  {
    host: config.http.host,
    port: config.http.port,
  },
);
const grpc = await startGrpcServer({
  service,
  authenticate: apiKeyAuthenticator(config.apiKeys),
  authFailuresPerMinute: config.http.authFailuresPerMinute,
  metrics,
  log,
  host: grpcHost,
  port: config.grpc.port,
});

onShutdownSignals(log, () => [
  { name: "closing the gRPC server", run: () => grpc.close() },
  { name: "closing the HTTP server", run: () => http.close() },
  { name: "closing the metrics server", run: async () => metricsHttp?.close() },
  { name: "closing the producer", run: () => service.close() },
  { name: "closing the query client", run: () => backend.close() },
  { name: "closing the explorer's stores", run: async () => stores?.close() },
]);

log("info", "started", {
  http: http.url,
  ...(metricsHttp ? { metrics: metricsHttp.url } : {}),
  grpc: grpc.address,
  query: queryAddr,
  topicPrefix: config.kafka.topicPrefix,
});
