import { SingleBar } from "cli-progress";
import { type Config, DEFAULT_API_KEY, defaultKeyExposure } from "../core/config.ts";
import type { QueryRequest } from "../core/requests.ts";
import type { EmbeddedEngine } from "../embedded/engine.ts";
import { openEmbeddedEngine } from "../embedded/open.ts";
import { createHttpApp } from "../gateway/http-app.ts";
import { startHttpServer } from "../platform/http-server.ts";
import { type LogFn, requestLogger } from "../platform/log.ts";
import { Metrics } from "../platform/metrics.ts";
import { onShutdownSignals } from "../platform/shutdown.ts";
import { setupTracing } from "../platform/tracing.ts";
import { readTurnFile } from "./turn-files.ts";
import { UsageError } from "./usage.ts";

/** Drains the engine while a progress bar follows the turns it has taken in. */
export const drainWithProgress = async (engine: EmbeddedEngine, total: number, label: string): Promise<void> => {
  const bar = new SingleBar({
    format: `${label} [{bar}] {value}/{total} turns | {segments} segments | {records} records | {eta_formatted} left`,
    stream: process.stderr,
    noTTYOutput: false,
    hideCursor: true,
  });
  const start = engine.progress.turns;
  bar.start(total, 0, { segments: 0, records: 0 });
  const timer = setInterval(
    () =>
      bar.update(Math.min(total, engine.progress.turns - start), {
        segments: engine.progress.segments,
        records: engine.progress.records,
      }),
    200,
  );
  try {
    await engine.drain();
  } finally {
    clearInterval(timer);
    bar.update(Math.min(total, engine.progress.turns - start), {
      segments: engine.progress.segments,
      records: engine.progress.records,
    });
    bar.stop();
  }
};

export const runIngest = async (config: Config, file: string, tenant: string): Promise<void> => {
  const conversations = readTurnFile(file);
  const opened = await openEmbeddedEngine(config);
  try {
    const total = conversations.reduce((n, c) => n + c.turns.length, 0);
    const started = performance.now();
    for (const c of conversations) {
      await opened.engine.ingest(tenant, c.conversation, c.turns);
      await opened.engine.flush(tenant, c.conversation);
    }
    await drainWithProgress(opened.engine, total, "ingest");
    const s = (performance.now() - started) / 1000;
    console.log(
      `ingested ${total} turns of ${conversations.length} conversation(s) into tenant "${tenant}" in ${s.toFixed(1)} s (${(total / s).toFixed(1)} turns/s); data in ${config.dataDir}`,
    );
  } finally {
    await opened.close();
  }
};

export const runQueryCommand = async (
  config: Config,
  request: QueryRequest,
  o: { tenant: string; json?: boolean },
): Promise<void> => {
  const opened = await openEmbeddedEngine(config);
  try {
    const result = await opened.engine.query(o.tenant, request);
    if (o.json) console.log(JSON.stringify(result, null, 2));
    else {
      console.log(result.context || "(no memories found)");
      console.log(
        `\n${result.items.length} items, ${result.contextTokens}/${result.budget} tokens, ${result.cost.ms.toFixed(0)} ms, plan: ${result.plan.questionType}; entities [${result.plan.entities.join(", ")}]`,
      );
    }
  } finally {
    await opened.close();
  }
};

/** `memory serve` prints for people: only a failure to stop is worth a line. */
const stopLog: LogFn = (level, msg, fields) => {
  if (level === "error") console.error(`${msg}${fields ? ` ${JSON.stringify(fields)}` : ""}`);
};

export const runServe = async (config: Config): Promise<void> => {
  // Refused before anything opens: with the default key, anyone who can reach the port owns the data.
  const exposure = defaultKeyExposure(config);
  if (exposure === "refuse") {
    throw new UsageError(
      `refusing to serve on ${config.http.host}: the default API key "${DEFAULT_API_KEY}" is configured; set MEMORY_API_KEYS (key=tenant, keys of 8+ characters) or bind 127.0.0.1`,
    );
  }
  if (exposure === "warn") {
    console.warn(
      `warning: the default API key "${DEFAULT_API_KEY}" is configured; fine on ${config.http.host}, set MEMORY_API_KEYS before exposing the server`,
    );
  }
  const logger = requestLogger("memory-http");
  const metrics = new Metrics();
  await setupTracing("embedded"); // MEMORY_TRACING (docs/tracing.md); before the stores, so their calls are traced
  const opened = await openEmbeddedEngine(config, { observer: metrics });
  // Before listening: the first query would otherwise load the tables on its request path.
  await opened.engine.warmUpQueries();
  const app = createHttpApp({
    service: opened.engine,
    apiKeys: config.apiKeys,
    metrics,
    logger,
    maxBodyBytes: config.http.maxBodyBytes,
    authFailuresPerMinute: config.http.authFailuresPerMinute,
  });
  const server = await startHttpServer(app, { host: config.http.host, port: config.http.port });
  console.log(`memory API on ${server.url} (data in ${config.dataDir}); Ctrl-C to stop`);
  onShutdownSignals(stopLog, () => [
    { name: "closing the HTTP server", run: () => server.close() },
    { name: "closing the engine", run: () => opened.close() },
  ]);
};
