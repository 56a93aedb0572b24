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
 * to the query service when set), KAFKA_BROKERS, SCHEMA_REGISTRY_URL, MEMORY_TOPIC_PREFIX.
 * Logs JSON lines on stdout; "started" carries the bound addresses.
 */
import { pino } from "pino";
import { envInt, jsonLogger } from "../core/adapters/kafka/process.ts";
import { DEFAULT_API_KEY, defaultKeyExposure, loadConfig } from "../core/config.ts";
import { DistributedMemoryService } from "./distributed-memory-service.ts";
import { GrpcQueryBackend } from "./grpc-client.ts";
import { apiKeyAuthenticator, startGrpcServer } from "./grpc-server.ts";
import { createHttpApp } from "./http-app.ts";
import { startHttpServer } from "./http-server.ts";
import { Metrics } from "./metrics.ts";

const log = jsonLogger("gateway");
const config = loadConfig();
// As `memory serve`: with the default key, anyone who reaches a public address owns the default tenant.
const grpcHost = process.env.MEMORY_GRPC_HOST ?? config.http.host;
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
const internalToken = process.env.MEMORY_INTERNAL_TOKEN;
const queryAddr = process.env.MEMORY_QUERY_ADDR ?? "127.0.0.1:50052";
const backend = new GrpcQueryBackend(queryAddr, internalToken ? { internalToken } : {});
const service = await DistributedMemoryService.open({ config, backend, log });

const metricsPortSetting = process.env.MEMORY_METRICS_PORT;
const metricsHttp =
  metricsPortSetting === undefined
    ? undefined
    : await startHttpServer(
        {
          fetch: async (req: Request): Promise<Response> => {
            const path = new URL(req.url).pathname;
            if (path === "/metrics")
              return new Response(await metrics.render(), { headers: { "content-type": metrics.contentType } });
            if (path === "/healthz") return Response.json({ status: "ok" });
            return new Response("not found", { status: 404 });
          },
        },
        { host: process.env.MEMORY_METRICS_HOST ?? config.http.host, port: envInt("MEMORY_METRICS_PORT", 9100) },
      );

const http = await startHttpServer(
  createHttpApp({
    service,
    apiKeys: config.apiKeys,
    metrics,
    serveMetrics: metricsHttp === undefined,
    logger: pino({ name: "gateway-http" }),
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
  port: envInt("MEMORY_GRPC_PORT", 50051),
});

let stopping = false;
const shutdown = async (why: string): Promise<void> => {
  if (stopping) return;
  stopping = true;
  log("info", "stopping", { why });
  await grpc.close().catch(() => undefined);
  await http.close().catch(() => undefined);
  await metricsHttp?.close().catch(() => undefined);
  await service.close().catch((err: unknown) => log("error", "closing the producer failed", { error: String(err) }));
  await backend.close().catch(() => undefined);
  log("info", "stopped");
  process.exit(0);
};
process.once("SIGTERM", () => void shutdown("SIGTERM"));
process.once("SIGINT", () => void shutdown("SIGINT"));

log("info", "started", {
  http: http.url,
  ...(metricsHttp ? { metrics: metricsHttp.url } : {}),
  grpc: grpc.address,
  query: queryAddr,
  topicPrefix: config.kafka.topicPrefix,
});
