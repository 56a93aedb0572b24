/**
 * `memory bench load`: is the service responsive while it works? An embedded engine behind the real
 * HTTP app on 127.0.0.1 (ephemeral port); `ingesters` clients post LoCoMo turns one request per turn
 * (each client its own conversation), `queriers` clients ask the conversations' questions, and one
 * probe calls /healthz every PROBE_INTERVAL_MS. Bounded in requests and in time. Reported: ingest
 * acknowledgement, query and /healthz latency percentiles and the event-loop delay the process saw
 * (perf_hooks.monitorEventLoopDelay), as markdown and JSON.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type IntervalHistogram, monitorEventLoopDelay } from "node:perf_hooks";
import type { Config } from "../core/config.ts";
import { loadLocomo } from "../core/datasets/locomo.ts";
import type { TurnInput } from "../core/requests.ts";
import { openEmbeddedEngine } from "../embedded/open.ts";
import { createHttpApp } from "../gateway/http-app.ts";
import { startHttpServer } from "../platform/http-server.ts";
import { Metrics } from "../platform/metrics.ts";
import { runEnvironment, writeReportFiles } from "./run.ts";
import { percentile } from "./scoring.ts";
import { fmt, fmtInt, markdownTable } from "./table.ts";

export interface LoadBenchOptions {
  /** The service configuration; the engine runs in a fresh temporary data folder instead of config.dataDir. */
  config: Config;
  /** LoCoMo-format file. */
  data: string;
  /** Clients posting turns (default 8), each its own conversation. */
  ingesters?: number;
  /** Clients asking questions (default 2). */
  queriers?: number;
  /** Turns each ingesting client posts at most (default 150). */
  turnsPerClient?: number;
  /** Questions each querying client asks at most (default 40). */
  queriesPerClient?: number;
  /** Wall-clock limit of the load phase in seconds (default 60); clients stop at it. */
  maxSeconds?: number;
  /** After the load phase, how long to wait for the pipeline to catch up (default 120 s). */
  drainSeconds?: number;
  /** Output folder; null writes nothing. */
  out: string | null;
  log?: (line: string) => void;
}

/** Latency summary in milliseconds. */
export interface LatencySummary {
  n: number;
  errors: number;
  p50: number | undefined;
  p95: number | undefined;
  p99: number | undefined;
  max: number | undefined;
}

export interface LoadBenchReport {
  config: {
    bench: "load";
    dataFile: string;
    dataSha256: string;
    ingesters: number;
    queriers: number;
    turnsPerClient: number;
    queriesPerClient: number;
    maxSeconds: number;
    gitCommit: string | null;
    gitDirty: boolean | null;
    date: string;
    node: string;
    cpus: number;
    loadAverage: { before: number[]; after: number[] };
  };
  /** Seconds of the load phase (until every client stopped). */
  loadSeconds: number;
  /** Seconds after the load phase until everything accepted was indexed; null when it did not finish in time. */
  drainSeconds: number | null;
  ack: LatencySummary;
  query: LatencySummary;
  healthz: LatencySummary;
  /** Event-loop delay during the load phase, milliseconds. */
  eventLoop: { mean: number; p50: number; p99: number; max: number };
  progress: { turns: number; segments: number; records: number };
  /** Failed requests by reason (acks include the closing flushes). */
  failures: Record<string, number>;
}

export interface LoadBenchRun {
  report: LoadBenchReport;
  markdown: string;
  files: string[];
}

const PROBE_INTERVAL_MS = 100;
const TENANT = "load-bench";
const API_KEY = "load-bench-key-0123456789";

/** Percentiles of latencies (ms); `errors` counts failed requests, which have no latency. */
export const summarize = (ms: readonly number[], errors = 0): LatencySummary => ({
  n: ms.length,
  errors,
  p50: percentile(ms, 50),
  p95: percentile(ms, 95),
  p99: percentile(ms, 99),
  max: ms.length === 0 ? undefined : ms.reduce((a, b) => Math.max(a, b), -Infinity),
});

/** An event-loop delay histogram (nanoseconds) in milliseconds; zeros when it saw no sample. */
export const eventLoopSummary = (
  h: Pick<IntervalHistogram, "mean" | "max" | "percentile" | "count">,
): LoadBenchReport["eventLoop"] => {
  const ms = (ns: number): number => (Number.isFinite(ns) ? ns / 1e6 : 0);
  if (h.count === 0) return { mean: 0, p50: 0, p99: 0, max: 0 };
  return { mean: ms(h.mean), p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max) };
};

/**
 * Which client posts which turns: client i takes conversation i mod n under its own id, so the
 * clients never share a conversation even when there are fewer conversations than clients.
 */
export const assignConversations = <
  T extends { id: string; turns: readonly TurnInput[]; questions: readonly { question: string }[] },
>(
  conversations: readonly T[],
  clients: number,
  turnsPerClient: number,
): { conversation: string; turns: TurnInput[]; questions: string[] }[] => {
  if (conversations.length === 0) throw new Error("no conversations to post");
  return Array.from({ length: clients }, (_, i) => {
    const c = conversations[i % conversations.length] as T;
    return {
      conversation: `${c.id}-client${i}`,
      turns: c.turns.slice(0, turnsPerClient),
      questions: c.questions.map((q) => q.question),
    };
  });
};

/** The questions in the order the querying clients ask them: round robin over the clients' conversations. */
export const interleaveQuestions = (
  clients: readonly { conversation: string; questions: readonly string[] }[],
): { conversation: string; question: string }[] => {
  const out: { conversation: string; question: string }[] = [];
  const longest = clients.reduce((m, c) => Math.max(m, c.questions.length), 0);
  for (let j = 0; j < longest; j++)
    for (const c of clients) {
      const q = c.questions[j];
      if (q !== undefined) out.push({ conversation: c.conversation, question: q });
    }
  return out;
};

interface Sample {
  ms: number[];
  errors: number;
}

/** Failures seen, by message, so a run that errors says why. */
const failures = new Map<string, number>();

const timed = async (sample: Sample, call: () => Promise<Response>): Promise<void> => {
  const t0 = performance.now();
  try {
    const res = await call();
    await res.arrayBuffer();
    if (res.ok) sample.ms.push(performance.now() - t0);
    else {
      sample.errors++;
      failures.set(`HTTP ${res.status}`, (failures.get(`HTTP ${res.status}`) ?? 0) + 1);
    }
  } catch (err) {
    sample.errors++;
    const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
    const why = `${err instanceof Error ? err.message : String(err)}${cause}`;
    failures.set(why, (failures.get(why) ?? 0) + 1);
  }
};

/** Runs the load phase against a fresh engine in a temporary data folder; writes the reports. */
export const runLoadBench = async (options: LoadBenchOptions): Promise<LoadBenchRun> => {
  const ingesters = options.ingesters ?? 8;
  const queriers = options.queriers ?? 2;
  const turnsPerClient = options.turnsPerClient ?? 150;
  const queriesPerClient = options.queriesPerClient ?? 40;
  const maxSeconds = options.maxSeconds ?? 60;
  const drainLimit = options.drainSeconds ?? 120;
  const dataFile = resolve(options.data);
  const bytes = readFileSync(dataFile);
  const conversations = loadLocomo(dataFile);
  const clients = assignConversations(conversations, ingesters, turnsPerClient);
  const questions = interleaveQuestions(clients);

  const dir = mkdtempSync(join(tmpdir(), "memory-load-"));
  const metrics = new Metrics({ defaultMetrics: false });
  const opened = await openEmbeddedEngine({ ...options.config, dataDir: dir }, { observer: metrics });
  // As `memory serve` does before it listens (cli/commands.ts): without it the first turn built the
  // o200k rank table on the event loop (~0.5 s), which was every run's longest event-loop delay and
  // its query p99, a start-up cost no served process pays.
  await opened.engine.warmUpQueries();
  const server = await startHttpServer(
    createHttpApp({ service: opened.engine, apiKeys: { [API_KEY]: TENANT }, metrics }),
    { port: 0 },
  );
  const post = (path: string, body: unknown): Promise<Response> =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify(body),
    });

  failures.clear();
  const ack: Sample = { ms: [], errors: 0 };
  const query: Sample = { ms: [], errors: 0 };
  const health: Sample = { ms: [], errors: 0 };
  const flushes: Sample = { ms: [], errors: 0 };
  try {
    const loadBefore = loadavg();
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const started = performance.now();
    const deadline = started + maxSeconds * 1000;
    const open = (): boolean => performance.now() < deadline;

    const ingesting = clients.map(async (c) => {
      for (const turn of c.turns) {
        if (!open()) break;
        await timed(ack, () => post(`/v1/conversations/${encodeURIComponent(c.conversation)}/turns`, turn));
      }
      // The closing flush is not a timed ack, but a failed one is still an error of the run.
      await timed(flushes, () => post(`/v1/conversations/${encodeURIComponent(c.conversation)}/flush`, {}));
    });
    const querying = Array.from({ length: queriers }, async (_, k) => {
      for (let j = 0; j < queriesPerClient && open(); j++) {
        const q = questions[(j * queriers + k) % Math.max(1, questions.length)];
        if (!q) break;
        await timed(query, () => post("/v1/query", { question: q.question, conversation: q.conversation }));
      }
    });
    let probing = true;
    const probe = (async () => {
      while (probing && open()) {
        await timed(health, () => fetch(`${server.url}/healthz`));
        await new Promise((r) => setTimeout(r, PROBE_INTERVAL_MS));
      }
    })();
    await Promise.all([...ingesting, ...querying]);
    probing = false;
    await probe;
    const loadSeconds = (performance.now() - started) / 1000;
    lag.disable();
    const loadAfter = loadavg();
    options.log?.(`load phase done in ${loadSeconds.toFixed(1)} s; waiting for the pipeline`);

    const drainStarted = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      opened.engine.drain().then(() => true),
      new Promise<boolean>((r) => {
        timer = setTimeout(() => r(false), drainLimit * 1000);
      }),
    ]);
    clearTimeout(timer);

    const report: LoadBenchReport = {
      config: {
        bench: "load",
        dataFile,
        dataSha256: createHash("sha256").update(bytes).digest("hex"),
        ingesters,
        queriers,
        turnsPerClient,
        queriesPerClient,
        maxSeconds,
        ...runEnvironment(),
        loadAverage: { before: loadBefore, after: loadAfter },
      },
      loadSeconds,
      drainSeconds: drained ? (performance.now() - drainStarted) / 1000 : null,
      ack: summarize(ack.ms, ack.errors + flushes.errors),
      query: summarize(query.ms, query.errors),
      healthz: summarize(health.ms, health.errors),
      eventLoop: eventLoopSummary(lag),
      progress: { ...opened.engine.progress },
      failures: Object.fromEntries(failures),
    };
    const markdown = renderLoadMarkdown(report);
    const files =
      options.out === null ? [] : writeReportFiles(options.out, "load", report.config.date, markdown, report);
    return { report, markdown, files };
  } finally {
    await server.close();
    // A pipeline that did not drain in time is not waited for again: close would block on it.
    await Promise.race([opened.close(), new Promise((r) => setTimeout(r, 5000).unref())]);
    rmSync(dir, { recursive: true, force: true });
  }
};

const row = (name: string, s: LatencySummary): string[] => [
  name,
  fmtInt(s.n),
  fmtInt(s.errors),
  fmt(s.p50, 1),
  fmt(s.p95, 1),
  fmt(s.p99, 1),
  fmt(s.max, 1),
];

/** The report as markdown: settings line, latency table, event-loop delay line. */
export const renderLoadMarkdown = (r: LoadBenchReport): string => {
  const c = r.config;
  const load = (xs: readonly number[]): string => xs.map((x) => x.toFixed(1)).join(" ");
  return `${[
    "# Benchmark: responsiveness under load",
    "",
    `data \`${c.dataFile}\` (sha256 ${c.dataSha256.slice(0, 12)}…), ${c.ingesters} ingesting clients (≤ ${c.turnsPerClient} turns each, one request per turn), ${c.queriers} querying clients (≤ ${c.queriesPerClient} questions each), /healthz probe every ${PROBE_INTERVAL_MS} ms, limit ${c.maxSeconds} s, commit ${c.gitCommit?.slice(0, 10) ?? "unknown"}${c.gitDirty ? " (dirty)" : ""}, ${c.date}, node ${c.node}, ${c.cpus} CPUs, load average ${load(c.loadAverage.before)} → ${load(c.loadAverage.after)}`,
    "",
    markdownTable(
      ["request", "n", "errors", "p50 ms", "p95 ms", "p99 ms", "max ms"],
      [row("ingest ack", r.ack), row("query", r.query), row("/healthz", r.healthz)],
    ),
    "",
    `event-loop delay during load: mean ${fmt(r.eventLoop.mean, 1)} ms, p50 ${fmt(r.eventLoop.p50, 1)} ms, p99 ${fmt(r.eventLoop.p99, 1)} ms, max ${fmt(r.eventLoop.max, 1)} ms.`,
    ...(Object.keys(r.failures).length > 0
      ? [
          `failed requests: ${Object.entries(r.failures)
            .map(([why, n]) => `${n} × ${why}`)
            .join("; ")}.`,
        ]
      : []),
    `load phase ${r.loadSeconds.toFixed(1)} s; pipeline caught up ${r.drainSeconds === null ? "not within the drain limit" : `${r.drainSeconds.toFixed(1)} s later`}; processed ${r.progress.turns} turns into ${r.progress.segments} segments and ${r.progress.records} records.`,
  ].join("\n")}\n`;
};
