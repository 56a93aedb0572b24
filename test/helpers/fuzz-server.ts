/**
 * The server side of the fuzz suite, run as a child process (test/helpers/fuzz-child.ts): the real
 * HTTP app and gRPC server over one embedded engine on a temporary data folder. A separate process
 * so that a request that blocks the server's event loop cannot also block the test's timers: the
 * client's time bound stays measurable and the test can kill a stalled server.
 *
 * Deterministic and light: the hashing embedder (no model load, hundreds of requests stay fast)
 * and the statistical compressor. API keys (key -> tenant) come as JSON in FUZZ_API_KEYS. Prints one JSON line `{"http": url, "grpc": address, "dataDir"}`
 * on stdout once both listen; logs (pino) go to stderr; SIGTERM closes everything.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";
import { openEmbeddedEngine } from "../../services/embedded/open.ts";
import { startGrpcServer } from "../../services/gateway/grpc-server.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { apiKeyAuthenticator } from "../../services/platform/grpc/auth.ts";
import { startHttpServer } from "../../services/platform/http-server.ts";
import { Metrics } from "../../services/platform/metrics.ts";
import { StatisticalCompressor } from "../../services/sensory/statistical-compressor.ts";

const main = async (): Promise<void> => {
  const dataDir = mkdtempSync(join(tmpdir(), "memory-fuzz-"));
  const logger = pino({ level: "warn" }, pino.destination(2));
  const metrics = new Metrics({ defaultMetrics: false });
  const opened = await openEmbeddedEngine(loadConfig({ dataDir, modelDir: join(dataDir, "no-models") }), {
    embedder: new HashingEmbedder(),
    compressor: new StatisticalCompressor(),
    observer: metrics,
  });
  // Warm up (tokenizer tables, SQLite statements, the first HNSW index) under a tenant no key
  // maps to, so that the first fuzzed requests are not timed against one-off start-up work.
  await opened.engine.ingest("fuzz-warmup", "warmup", [
    {
      speaker: "Ana",
      role: "user",
      text: "Warming up the pipeline.",
      timestamp: "2024-05-06T10:15:00Z",
      sessionId: "s",
    },
  ]);
  await opened.engine.flush("fuzz-warmup", "warmup");
  await opened.engine.drain();
  await opened.engine.query("fuzz-warmup", { question: "warming up?" });
  const apiKeys = JSON.parse(process.env.FUZZ_API_KEYS ?? "{}") as Record<string, string>;
  const http = await startHttpServer(createHttpApp({ service: opened.engine, apiKeys, metrics, logger }), {
    port: 0,
    closeGraceMs: 1000,
  });
  const grpc = await startGrpcServer({
    service: opened.engine,
    authenticate: apiKeyAuthenticator(apiKeys),
    metrics,
    port: 0,
    closeGraceMs: 1000,
    log: (level, msg, fields) => logger[level](fields ?? {}, msg),
  });
  process.stdout.write(`${JSON.stringify({ http: http.url, grpc: grpc.address, dataDir })}\n`);

  let stopping = false;
  process.on("SIGTERM", () => {
    if (stopping) return;
    stopping = true;
    void (async () => {
      await http.close().catch(() => undefined);
      await grpc.close().catch(() => undefined);
      await opened.close().catch(() => undefined);
      rmSync(dataDir, { recursive: true, force: true });
      process.exit(0);
    })();
  });
};

await main();
