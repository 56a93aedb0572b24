/**
 * Query service process (distributed runtime): a gRPC server of memory.v1.Memory's read side
 * (Query, ListRecords, GetRecord; schemas/memory.proto) over the stores the indexer writes, for the
 * gateway. Stateless apart from the embedder: run as many as the query load needs.
 *
 * Stores (MEMORY_STORE):
 * - neo4j (preferred): Neo4jGraphStore + Neo4jVectorStore over NEO4J_URI / NEO4J_USER /
 *   NEO4J_PASSWORD (/ NEO4J_DATABASE), one shared driver.
 * - embedded (the default, as for the indexer): the SQLite graph store and the HNSW vectors in
 *   MEMORY_DATA_DIR, opened next to the indexer. Caveat: the HNSW index is loaded once at start and
 *   the indexer writes its file only on flush/close, so dense routes see a snapshot; records, the
 *   lexical and graph routes are live (SQLite WAL). Use neo4j for a live pipeline.
 *
 * The caller is the gateway: the tenant it authenticated comes in `x-memory-tenant`; with
 * MEMORY_INTERNAL_TOKEN set, calls must also carry `authorization: Bearer <token>`.
 * Env: MEMORY_QUERY_GRPC_HOST (127.0.0.1), MEMORY_QUERY_GRPC_PORT (50052; 0 picks one),
 * MEMORY_METRICS_PORT (9105; /metrics, /healthz, /readyz), the usual MEMORY_* query settings.
 * Logs JSON lines on stdout; "started" carries the bound addresses.
 */
import { join } from "node:path";
import { envInt, jsonLogger } from "../core/adapters/kafka/process.ts";
import { createLlm, metricsUsageSink } from "../core/adapters/llm-factory.ts";
import { loadOnnxEmbedder } from "../core/adapters/onnx/embedder.ts";
import { openStores, storeKindFromEnv } from "../core/adapters/open-stores.ts";
import { CachingEmbedder } from "../core/caching-embedder.ts";
import { loadConfig } from "../core/config.ts";
import { startHttpServer } from "../gateway/http-server.ts";
import { Metrics } from "../gateway/metrics.ts";
import { internalAuthenticator } from "../platform/grpc/auth.ts";
import { startGrpcServer } from "../platform/grpc/server.ts";
import { StoreQueryService } from "./grpc-query-service.ts";
import { LlmPlanner } from "./llm-planner.ts";

const log = jsonLogger("query");
const config = loadConfig();
const metrics = new Metrics({ defaultLabels: { service: "query" } });
const model = await loadOnnxEmbedder(join(config.modelDir, "all-MiniLM-L6-v2"));
const stores = await openStores(config, storeKindFromEnv());
const llm =
  config.llm.planner === "llm"
    ? await createLlm(config.llm, { modelDir: config.modelDir, usageSink: metricsUsageSink(metrics) })
    : undefined;
const service = new StoreQueryService({
  graph: stores.graph,
  vectors: stores.vectors,
  embedder: new CachingEmbedder(model),
  ...(llm ? { planner: new LlmPlanner(llm) } : {}),
  settings: {
    budget: config.query.budget,
    rrfK: config.query.rrfK,
    mmrLambda: config.query.mmrLambda,
    routeDepth: 40,
    candidates: 80,
  },
  storeLabel: stores.label,
});

const internalToken = process.env.MEMORY_INTERNAL_TOKEN;
const grpc = await startGrpcServer({
  service,
  authenticate: internalAuthenticator(internalToken ? internalToken : undefined),
  metrics,
  log,
  host: process.env.MEMORY_QUERY_GRPC_HOST ?? "127.0.0.1",
  port: envInt("MEMORY_QUERY_GRPC_PORT", 50052),
});

const http = await startHttpServer(
  {
    fetch: async (req: Request): Promise<Response> => {
      const path = new URL(req.url).pathname;
      if (path === "/metrics")
        return new Response(await metrics.render(), { headers: { "content-type": metrics.contentType } });
      if (path === "/healthz") return Response.json({ status: "ok" });
      if (path === "/readyz") {
        const h = await service.health();
        return Response.json(h, { status: h.ready ? 200 : 503 });
      }
      return new Response("not found", { status: 404 });
    },
  },
  { host: process.env.MEMORY_METRICS_HOST ?? "127.0.0.1", port: envInt("MEMORY_METRICS_PORT", 9105) },
);

let stopping = false;
const shutdown = async (why: string): Promise<void> => {
  if (stopping) return;
  stopping = true;
  log("info", "stopping", { why });
  await grpc.close().catch(() => undefined);
  await http.close().catch(() => undefined);
  await stores.close().catch((err: unknown) => log("error", "closing the stores failed", { error: String(err) }));
  await model.close().catch(() => undefined);
  await llm?.close?.().catch(() => undefined);
  log("info", "stopped");
  process.exit(0);
};
process.once("SIGTERM", () => void shutdown("SIGTERM"));
process.once("SIGINT", () => void shutdown("SIGINT"));

log("info", "started", {
  grpc: grpc.address,
  metrics: http.url,
  store: stores.label,
  auth: internalToken ? "token" : "none",
});
