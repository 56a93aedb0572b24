/**
 * Helpers of the distributed end-to-end tests (real Kafka + schema registry + Neo4j): the four stages,
 * the query service and the gateway as child processes on a run-unique topic prefix, consumer-lag
 * based drain detection, HTTP calls to the gateway, and clean-up of the run's topics, subjects and
 * tenants.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createWriteStream, existsSync, mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Admin, Kafka } from "kafkajs";
import { MemoryClient } from "../../../clients/typescript/src/index.ts";
import { openDriver } from "../../../services/core/adapters/neo4j/driver.ts";
import { Neo4jGraphStore } from "../../../services/core/adapters/neo4j/graph-store.ts";
import { Neo4jVectorStore } from "../../../services/core/adapters/neo4j/vector-store.ts";
import type { RecordPage } from "../../../services/core/ports.ts";
import type { QueryResult } from "../../../services/core/query-types.ts";
import type { MemoryRecord } from "../../../services/core/types.ts";
import { neo4jConnection, neo4jSkip } from "../../helpers/neo4j-env.ts";
import { deleteSubjects, deleteTopics, sleep, testEnv } from "../pipeline/helpers.ts";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const MODEL_DIR = join(ROOT, "models");
export const LOCOMO = resolve(ROOT, "..", "shared", "data", "locomo-dev.json");

export const skip: string | false =
  !process.env.KAFKA_BROKERS || !process.env.SCHEMA_REGISTRY_URL || neo4jSkip
    ? 'KAFKA_BROKERS / SCHEMA_REGISTRY_URL / NEO4J_URI not set: npm run infra:up; eval "$(bash infra/env.sh)"'
    : !existsSync(join(MODEL_DIR, "all-MiniLM-L6-v2", "model.onnx"))
      ? "embedder model missing: npm run setup"
      : false;

export const STAGES = ["sensory", "segmenter", "encoder", "indexer"] as const;

/** The stages' input topics by role, for the lag check. */
const INPUT_OF: Record<(typeof STAGES)[number], "turns" | "sensory" | "segments" | "records"> = {
  sensory: "turns",
  segmenter: "sensory",
  encoder: "segments",
  indexer: "records",
};

export interface Proc {
  name: string;
  child: ChildProcess;
  log: string[];
  /** Fields of the "started" log line once seen. */
  started?: Record<string, unknown>;
  /** The last per-commit line (kept out of `log`; shown by tails(), to see where a stage stopped). */
  lastCommitted?: string;
  committedLines: number;
  exited: boolean;
}

/**
 * Spawns a service process whose stdout is JSON log lines: keeps its log (less the per-commit
 * lines) and the fields of its "started" line.
 */
export const spawnLogged = (name: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv): Proc => {
  const child = spawn(process.execPath, [...args], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  const proc: Proc = { name, child, log: [], exited: false, committedLines: 0 };
  // DIST_TEST_LOG_DIR: every line of every process also goes to <dir>/<name>-<pid>.log (diagnosis).
  const logDir = process.env.DIST_TEST_LOG_DIR;
  if (logDir) {
    mkdirSync(logDir, { recursive: true });
    const file = createWriteStream(join(logDir, `${name}-${child.pid}.log`));
    child.stdout?.pipe(file);
    child.stderr?.pipe(file);
  }
  let buf = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    buf += chunk.toString();
    let i = buf.indexOf("\n");
    while (i >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      i = buf.indexOf("\n");
      if (!line.includes('"committed"')) proc.log.push(line);
      else {
        proc.lastCommitted = line;
        proc.committedLines++;
      }
      try {
        const e = JSON.parse(line) as Record<string, unknown>;
        if (e.msg === "started") proc.started = e;
      } catch {
        // not a JSON line
      }
    }
  });
  child.stderr?.on("data", (chunk: Buffer) => proc.log.push(chunk.toString()));
  child.on("exit", () => {
    proc.exited = true;
  });
  return proc;
};

const spawnService = (name: string, main: string, env: NodeJS.ProcessEnv): Proc => {
  // DIST_TEST_NODE_ARGS: extra node arguments for the service processes (e.g. a profiler, --import <file>).
  const extra = (process.env.DIST_TEST_NODE_ARGS ?? "").split(" ").filter(Boolean);
  return spawnLogged(name, ["--import", "tsx", ...extra, join(ROOT, main)], ROOT, env);
};

/** Waits until every process logged "started"; fails with the log tails when one exits or time runs out. */
export const waitStarted = async (procs: readonly Proc[], ms: number): Promise<void> => {
  const end = Date.now() + ms;
  while (procs.some((p) => !p.started)) {
    const dead = procs.find((p) => p.exited);
    if (dead) throw new Error(`${dead.name} exited before it started:\n${dead.log.slice(-20).join("\n")}`);
    if (Date.now() > end)
      throw new Error(
        `timed out waiting for ${procs
          .filter((p) => !p.started)
          .map((p) => p.name)
          .join(", ")} to start:\n${procs.map((p) => `--- ${p.name}\n${p.log.slice(-10).join("\n")}`).join("\n")}`,
      );
    await sleep(100);
  }
};

export interface Deployment {
  prefix: string;
  env: NodeJS.ProcessEnv;
  procs: Proc[];
  /** Gateway HTTP base URL and gRPC address. */
  http: string;
  grpc: string;
  /** Query service gRPC address. */
  queryGrpc: string;
  stop(): Promise<void>;
}

/** Test settings shared by the distributed run and the in-process embedded reference. */
export const sharedEnv = (
  prefix: string,
  apiKeys: Record<string, string>,
  extra: Record<string, string> = {},
): NodeJS.ProcessEnv =>
  testEnv(prefix, {
    ...extra,
    MEMORY_MODEL_DIR: MODEL_DIR,
    MEMORY_COMPRESSOR: "statistical",
    MEMORY_IDLE_TIMEOUT_MS: "3600000",
    MEMORY_STORE: "neo4j",
    MEMORY_METRICS_PORT: "0",
    MEMORY_HTTP_PORT: "0",
    MEMORY_GRPC_PORT: "0",
    MEMORY_QUERY_GRPC_PORT: "0",
    MEMORY_API_KEYS: Object.entries(apiKeys)
      .map(([k, t]) => `${k}=${t}`)
      .join(","),
  });

/**
 * Starts the four stages and the query service, then the gateway pointing at it; resolves when all
 * are up. `extra`: settings every process gets (e.g. MEMORY_SECOND_OPINION).
 */
export const startDeployment = async (
  prefix: string,
  apiKeys: Record<string, string>,
  extra: Record<string, string> = {},
): Promise<Deployment> => {
  const env = sharedEnv(prefix, apiKeys, extra);
  const procs: Proc[] = [];
  const stop = async (): Promise<void> => {
    // Gateway first (no new input), then the rest.
    for (const p of [...procs].reverse()) if (!p.exited) p.child.kill("SIGTERM");
    const end = Date.now() + 20_000;
    while (procs.some((p) => !p.exited) && Date.now() < end) await sleep(100);
    for (const p of procs) if (!p.exited) p.child.kill("SIGKILL");
  };
  try {
    // DIST_TEST_INSTANCES=n: n instances of each stage (one consumer group each, partitions shared).
    const instances = Math.max(1, Number(process.env.DIST_TEST_INSTANCES ?? 1));
    for (const stage of STAGES)
      for (let i = 0; i < instances; i++)
        procs.push(
          spawnService(instances > 1 ? `${stage}-${i}` : stage, `services/${stage}/main.ts`, {
            ...env,
            MEMORY_KAFKA_INSTANCE_ID: String(i),
          }),
        );
    const query = spawnService("query", "services/query/main.ts", env);
    procs.push(query);
    await waitStarted([query], 120_000);
    const queryGrpc = String(query.started?.grpc);
    const gateway = spawnService("gateway", "services/gateway/main.ts", { ...env, MEMORY_QUERY_ADDR: queryGrpc });
    procs.push(gateway);
    await waitStarted(procs, 150_000);
    return {
      prefix,
      env,
      procs,
      http: String(gateway.started?.http),
      grpc: String(gateway.started?.grpc),
      queryGrpc,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
};

/** The last log lines of every process (for failure messages). */
export const tails = (d: Deployment | undefined, n = 15): string =>
  d
    ? d.procs
        .map(
          (p) =>
            `--- ${p.name}${p.exited ? " (exited)" : ""}, ${p.committedLines} commits, the last: ${p.lastCommitted ?? "none"}\n` +
            p.log.slice(-n).join("\n"),
        )
        .join("\n")
    : "";

// ---------------------------------------------------------------------------------------------------
// Drained: every stage's consumer group has committed up to its input's end

export interface LagReport {
  drained: boolean;
  lag: Record<string, number>;
}

/**
 * Consumer lag of every stage's group, from the committed offsets against the partitions' high
 * watermarks. The turns topic is written by the gateway's idempotent (non-transactional) producer,
 * so drained means committed == high watermark there; the other inputs are written in
 * transactions, whose commit marker takes an offset no consumer ever commits past, so the last
 * marker is allowed (committed >= high watermark - 1).
 */
export const stageLag = async (admin: Admin, prefix: string): Promise<LagReport> => {
  const lag: Record<string, number> = {};
  let drained = true;
  for (const stage of STAGES) {
    const role = INPUT_OF[stage];
    const topic = `${prefix}memory.${role}.v1`;
    const [committed] = await admin.fetchOffsets({ groupId: `${prefix}memory-${stage}`, topics: [topic] });
    const ends = await admin.fetchTopicOffsets(topic);
    const slack = role === "turns" ? 0 : 1;
    let behind = 0;
    for (const end of ends) {
      const c = Math.max(0, Number(committed?.partitions.find((p) => p.partition === end.partition)?.offset ?? -1));
      const high = Number(end.high);
      if (c < high - slack) {
        drained = false;
        behind += high - c;
      }
    }
    lag[stage] = behind;
  }
  return { drained, lag };
};

/** Polls the lag until two consecutive polls find every stage drained; rejects after `ms`. */
export const waitDrained = async (kafka: Kafka, prefix: string, ms: number, onPoll?: (r: LagReport) => void) => {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const end = Date.now() + ms;
    let streak = 0;
    let last: LagReport | undefined;
    while (streak < 2) {
      if (Date.now() > end) throw new Error(`not drained after ${ms} ms: ${JSON.stringify(last?.lag)}`);
      last = await stageLag(admin, prefix);
      streak = last.drained ? streak + 1 : 0;
      onPoll?.(last);
      if (streak < 2) await sleep(300);
    }
    return last;
  } finally {
    await admin.disconnect();
  }
};

// ---------------------------------------------------------------------------------------------------
// HTTP to the gateway

export const httpJson = async <T>(
  base: string,
  key: string,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T }> => {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as T };
};

/** Every record of the key's tenant, page by page, through GET /v1/records (the typed client). */
export const listAllHttp = async (base: string, key: string, conversation?: string): Promise<MemoryRecord[]> => {
  const client = new MemoryClient({ baseUrl: base, apiKey: key });
  const out: MemoryRecord[] = [];
  for await (const r of client.records(conversation ? { conversation } : {}, { pageSize: 200 })) out.push(r);
  return out;
};

/** Every record through any paginated lister (the embedded engine, the gRPC client). */
export const listAll = async (list: (cursor?: string) => Promise<RecordPage>): Promise<MemoryRecord[]> => {
  const out: MemoryRecord[] = [];
  let cursor: string | undefined;
  do {
    const page = await list(cursor);
    out.push(...page.records);
    cursor = page.nextCursor;
  } while (cursor);
  return out;
};

/** A QueryResult without what depends on the clock (cost.ms, per-route ms). */
export const timeless = (
  q: QueryResult,
): Omit<QueryResult, "cost"> & { cost: Omit<QueryResult["cost"], "ms" | "routeMs"> } => {
  const { ms: _ms, routeMs: _routeMs, ...cost } = q.cost;
  return { ...q, cost };
};

export const jaccard = <T>(a: readonly T[], b: readonly T[]): number => {
  const A = new Set(a);
  const B = new Set(b);
  const inter = [...A].filter((x) => B.has(x)).length;
  const union = new Set([...A, ...B]).size;
  return union === 0 ? 1 : inter / union;
};

export const percentile = (xs: readonly number[], p: number): number => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] as number;
};

export const newKey = (): string => `key-${randomUUID()}`;

// ---------------------------------------------------------------------------------------------------
// Clean-up

/** Deletes the run's topics and subjects and the tenants' Neo4j data (best effort). */
export const cleanUp = async (kafka: Kafka, prefix: string, tenants: readonly string[]): Promise<void> => {
  await deleteTopics(kafka, prefix);
  await deleteSubjects(prefix);
  if (neo4jSkip || tenants.length === 0) return;
  const { driver } = openDriver(neo4jConnection());
  try {
    const graph = new Neo4jGraphStore({ driver });
    const vectors = new Neo4jVectorStore({ driver });
    for (const t of tenants) {
      await graph.deleteTenant(t).catch(() => undefined);
      await vectors.deleteTenant(t).catch(() => undefined);
    }
  } finally {
    await driver.close();
  }
};
