#!/usr/bin/env node
// The whole distributed runtime locally, against the infra/ servers (npm run infra:up first):
//   node scripts/distributed.mjs up       the four stages (scripts/pipeline.mjs up), then the query
//                                         service, the consolidator and the gateway
//   node scripts/distributed.mjs down     gateway, consolidator, query service, then the stages
//                                         (SIGTERM, then SIGKILL after 30 s)
//   node scripts/distributed.mjs status
// Logs and pids beside the pipeline's: <run dir>/{query,consolidator,gateway}.{log,pid}, the run dir being
// $MEMORY_PIPELINE_DIR or ./data/pipeline. MEMORY_STORE defaults to neo4j here (the query service
// reads what the indexer writes; the embedded store only gives it a snapshot of the vectors).
// Ports: stages' /metrics 9101..9104, the query service's /metrics 9105, the consolidator's 9106
// (MEMORY_METRICS_BASE_PORT moves them all), query gRPC 50052 (MEMORY_QUERY_GRPC_PORT), gateway HTTP 8787 (MEMORY_HTTP_PORT,
// /metrics there too) and gRPC 50051 (MEMORY_GRPC_PORT). Every other MEMORY_* variable is passed on,
// e.g. the consolidator's triggers: MEMORY_CONSOLIDATION_WINDOW, _IDLE_MINUTES (30 by default),
// _LAG_THRESHOLD (README "Distributed runtime").
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const DIR = resolve(process.env.MEMORY_PIPELINE_DIR ?? join(ROOT, "data", "pipeline"));
const BASE_PORT = Number(process.env.MEMORY_METRICS_BASE_PORT ?? 9101);
const QUERY_GRPC_PORT = process.env.MEMORY_QUERY_GRPC_PORT ?? "50052";

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const pidOf = (name) => {
  const f = join(DIR, `${name}.pid`);
  return existsSync(f) ? Number(readFileSync(f, "utf8").trim()) : undefined;
};

const infraEnv = () => {
  if (process.env.KAFKA_BROKERS && process.env.SCHEMA_REGISTRY_URL && process.env.NEO4J_URI) return {};
  const out = execFileSync("bash", [join(ROOT, "infra", "env.sh")], { encoding: "utf8" });
  const env = {};
  for (const line of out.split("\n")) {
    const m = /^export ([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m) env[m[1]] = m[2].replace(/^'(.*)'$/, "$1");
  }
  return env;
};

const env = () => ({ MEMORY_STORE: "neo4j", ...infraEnv(), ...process.env });

const SERVICES = [
  {
    name: "query",
    main: join(ROOT, "services", "query", "main.ts"),
    env: () => ({ MEMORY_METRICS_PORT: String(BASE_PORT + 4), MEMORY_QUERY_GRPC_PORT: QUERY_GRPC_PORT }),
  },
  {
    name: "consolidator",
    main: join(ROOT, "services", "consolidator", "main.ts"),
    env: () => ({ MEMORY_METRICS_PORT: String(BASE_PORT + 5) }),
  },
  {
    name: "gateway",
    main: join(ROOT, "services", "gateway", "main.ts"),
    env: () => ({ MEMORY_QUERY_ADDR: process.env.MEMORY_QUERY_ADDR ?? `127.0.0.1:${QUERY_GRPC_PORT}` }),
  },
];

const start = (svc, base) => {
  const pid = pidOf(svc.name);
  if (pid && alive(pid)) {
    console.log(`${svc.name}: already running (pid ${pid})`);
    return;
  }
  const log = openSync(join(DIR, `${svc.name}.log`), "a");
  const child = spawn(process.execPath, ["--import", "tsx", svc.main], {
    cwd: ROOT,
    env: { ...base, ...svc.env() },
    stdio: ["ignore", log, log],
    detached: true,
  });
  child.unref();
  closeSync(log);
  writeFileSync(join(DIR, `${svc.name}.pid`), `${child.pid}\n`);
  console.log(`${svc.name}: started (pid ${child.pid}, log ${join(DIR, `${svc.name}.log`)})`);
};

const stop = async (name) => {
  const pid = pidOf(name);
  if (!pid || !alive(pid)) {
    console.log(`${name}: not running`);
    rmSync(join(DIR, `${name}.pid`), { force: true });
    return;
  }
  process.kill(pid, "SIGTERM");
  const end = Date.now() + 30_000;
  while (alive(pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
  if (alive(pid)) process.kill(pid, "SIGKILL");
  rmSync(join(DIR, `${name}.pid`), { force: true });
  console.log(`${name}: stopped`);
};

const pipeline = (cmd, base) => {
  const r = spawnSync(process.execPath, [join(ROOT, "scripts", "pipeline.mjs"), cmd], {
    cwd: ROOT,
    env: base,
    stdio: "inherit",
  });
  if (r.status !== 0) throw new Error(`scripts/pipeline.mjs ${cmd} failed (${r.status})`);
};

const cmd = process.argv[2] ?? "status";
if (cmd === "up") {
  mkdirSync(DIR, { recursive: true });
  const base = env();
  pipeline("up", base);
  for (const svc of SERVICES) start(svc, base);
} else if (cmd === "down") {
  for (const svc of [...SERVICES].reverse()) await stop(svc.name);
  pipeline("down", { ...process.env });
} else if (cmd === "status") {
  pipeline("status", { ...process.env });
  for (const svc of SERVICES) {
    const pid = pidOf(svc.name);
    console.log(`${svc.name}: ${pid && alive(pid) ? `running (pid ${pid})` : "stopped"}`);
  }
} else {
  console.error("usage: node scripts/distributed.mjs up|down|status");
  process.exit(2);
}
