/**
 * Query service process (distributed runtime): a gRPC server of memory.v1.Memory's read side
 * (Query, ListRecords, GetRecord; schemas/memory.proto) over the stores the indexer writes, for the
 * gateway, and of memory.v1.Maintenance (Consolidate, History, Erase) over the same stores. Stateless apart from the embedder: run as many as the query load needs.
 *
 * Stores (MEMORY_STORE, services/composition/stores.ts):
 * - neo4j (preferred): Neo4jGraphStore + Neo4jVectorStore over NEO4J_URI / NEO4J_USER /
 *   NEO4J_PASSWORD (/ NEO4J_DATABASE), one shared driver.
 * - embedded (the default, as for the indexer): the SQLite graph store and the HNSW vectors in
 *   MEMORY_DATA_DIR, opened next to the indexer. Caveat: the HNSW index is loaded once at start and
 *   the indexer writes its file only on flush/close, so dense routes see a snapshot; records, the
 *   lexical and graph routes are live (SQLite WAL). Use neo4j (or MEMORY_VECTOR_STORE=qdrant) for a
 *   live pipeline.
 *
 * The caller is the gateway: the tenant it authenticated comes in `x-memory-tenant`; with
 * MEMORY_INTERNAL_TOKEN set, calls must also carry `authorization: Bearer <token>`.
 * Env: MEMORY_QUERY_GRPC_HOST (127.0.0.1), MEMORY_QUERY_GRPC_PORT (50052; 0 picks one),
 * MEMORY_METRICS_PORT (9105; /metrics, /healthz, /readyz), the usual MEMORY_* query settings.
 * Logs JSON lines on stdout; "started" carries the bound addresses.
 */
import {
  openEmbedderThread,
  openLlm,
  openSecondOpinionEmbedder,
  plannerFrom,
  querySettingsFrom,
  secondOpinionOf,
  stageEmbedder,
} from "../composition/parts.ts";
import { StoreMaintenance } from "../composition/store-maintenance.ts";
import { openStores } from "../composition/stores.ts";
import { loadProcessConfig } from "../core/config.ts";
import { internalAuthenticator } from "../platform/grpc/auth.ts";
import { startGrpcServer } from "../platform/grpc/server.ts";
import { jsonLogger } from "../platform/log.ts";
import { Metrics } from "../platform/metrics.ts";
import { startOpsServer } from "../platform/ops-server.ts";
import { onShutdownSignals } from "../platform/shutdown.ts";
import { setupTracing } from "../platform/tracing.ts";
import { StoreQueryService } from "./grpc-query-service.ts";
import { warmUpQueries } from "./warm-up.ts";

const log = jsonLogger("query");
const config = loadProcessConfig();
await setupTracing("query"); // MEMORY_TRACING (docs/tracing.md); off by default
const metrics = new Metrics({ defaultLabels: { service: "query" } });
// On a worker thread: a question is embedded while the graph routes read the stores (query.ts),
// and one query's forward pass does not hold the others' store reads. A dead worker thread would
// fail every query: the process exits and its orchestrator starts another.
const model = await openEmbedderThread(config, {
  onFailure: (err) => {
    log("error", "embedding worker thread failed; exiting", { error: err.message });
    process.exit(1);
  },
});
const second = await openSecondOpinionEmbedder(config, {
  onFailure: (err) => {
    log("error", "second-opinion worker thread failed; exiting", { error: err.message });
    process.exit(1);
  },
});
const secondOpinion = secondOpinionOf(
  config,
  second ? stageEmbedder(second, undefined, config.cache.embeddingEntries) : undefined,
);
const stores = await openStores(config);
const llm = await openLlm(config, { planner: true }, metrics);
const planner = plannerFrom(config, llm);
const readDeps = {
  graph: stores.graph,
  vectors: stores.vectors,
  embedder: stageEmbedder(model, undefined, config.cache.embeddingEntries),
  ...(secondOpinion ? { secondOpinion } : {}),
  settings: querySettingsFrom(config),
};
const service = new StoreQueryService({ ...readDeps, ...(planner ? { planner } : {}), storeLabel: stores.label });
// Before the server takes calls: the first query would otherwise load the tables on its request path.
const warm = await warmUpQueries(readDeps, readDeps.settings);
log("info", "warmed up", { ms: Math.round(warm.ms), queries: warm.queries });

// Consolidation, history and erasure over the same stores (memory.v1.Maintenance), for the gateway.
const maintenance = new StoreMaintenance({
  graph: stores.graph,
  vectors: stores.vectors,
  concurrency: config.consolidation.concurrency,
});

const internalToken = config.internalToken;
const grpc = await startGrpcServer({
  service,
  maintenance,
  authenticate: internalAuthenticator(internalToken),
  metrics,
  log,
  host: config.queryService.host,
  port: config.queryService.port,
});

const http = await startOpsServer({
  metrics,
  host: config.metrics.host ?? "127.0.0.1",
  port: config.metrics.port ?? 9105,
  ready: async () => {
    const h = await service.health();
    return { ok: h.ready, body: { ...h } };
  },
});

onShutdownSignals(log, () => [
  { name: "closing the gRPC server", run: () => grpc.close() },
  { name: "closing the metrics server", run: () => http.close() },
  { name: "closing the stores", run: () => stores.close() },
  { name: "closing the embedder", run: () => model.close() },
  { name: "closing the second-opinion model", run: async () => second?.close() },
  { name: "closing the LLM", run: async () => llm?.close?.() },
]);

log("info", "started", {
  grpc: grpc.address,
  metrics: http.url,
  store: stores.label,
  auth: internalToken ? "token" : "none",
});
