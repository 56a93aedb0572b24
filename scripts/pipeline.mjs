#!/usr/bin/env node
// Starts / stops the whole distributed pipeline locally against the infra/ servers:
//   npm run infra:up                       (Kafka, schema registry, Neo4j)
//   npm run pipeline:up                    (node scripts/pipeline.mjs up)
//   npm run pipeline:down                  (node scripts/pipeline.mjs down)
//   node scripts/pipeline.mjs status
// Each stage (sensory, segmenter, encoder, indexer) runs as its own process
// (node --import tsx services/<stage>/main.ts), logs to <run dir>/<stage>.log, pid in <stage>.pid;
// the run dir is $MEMORY_PIPELINE_DIR or ./data/pipeline. KAFKA_BROKERS / SCHEMA_REGISTRY_URL /
// NEO4J_* come from the environment, else from `bash infra/env.sh`. /metrics + /healthz of the
// stages: ports 9101..9104 (MEMORY_METRICS_BASE_PORT changes the base). Every other MEMORY_*
// variable is passed through (e.g. MEMORY_STORE=neo4j for the indexer, MEMORY_TOPIC_PREFIX).
import { execFileSync, spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const STAGES = ["sensory", "segmenter", "encoder", "indexer"];
const DIR = resolve(process.env.MEMORY_PIPELINE_DIR ?? join(ROOT, "data", "pipeline"));
const BASE_PORT = Number(process.env.MEMORY_METRICS_BASE_PORT ?? 9101);

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const pidOf = (stage) => {
  const f = join(DIR, `${stage}.pid`);
  return existsSync(f) ? Number(readFileSync(f, "utf8").trim()) : undefined;
};

const infraEnv = () => {
  if (process.env.KAFKA_BROKERS && process.env.SCHEMA_REGISTRY_URL) return {};
  const out = execFileSync("bash", [join(ROOT, "infra", "env.sh")], { encoding: "utf8" });
  const env = {};
  for (const line of out.split("\n")) {
    const m = /^export ([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m) env[m[1]] = m[2].replace(/^'(.*)'$/, "$1");
  }
  return env;
};

const up = () => {
  mkdirSync(DIR, { recursive: true });
  const env = { ...process.env, ...infraEnv() };
  STAGES.forEach((stage, i) => {
    const pid = pidOf(stage);
    if (pid && alive(pid)) {
      console.log(`${stage}: already running (pid ${pid})`);
      return;
    }
    const log = openSync(join(DIR, `${stage}.log`), "a");
    const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "services", stage, "main.ts")], {
      cwd: ROOT,
      env: { ...env, MEMORY_METRICS_PORT: String(BASE_PORT + i) },
      stdio: ["ignore", log, log],
      detached: true,
    });
    child.unref();
    closeSync(log);
    writeFileSync(join(DIR, `${stage}.pid`), `${child.pid}\n`);
    console.log(`${stage}: started (pid ${child.pid}, log ${join(DIR, `${stage}.log`)}, metrics :${BASE_PORT + i})`);
  });
};

const down = async () => {
  for (const stage of STAGES) {
    const pid = pidOf(stage);
    if (!pid || !alive(pid)) {
      console.log(`${stage}: not running`);
      rmSync(join(DIR, `${stage}.pid`), { force: true });
      continue;
    }
    // SIGTERM: the stage finishes its batch, commits and exits.
    process.kill(pid, "SIGTERM");
    const end = Date.now() + 30_000;
    while (alive(pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    if (alive(pid)) process.kill(pid, "SIGKILL");
    rmSync(join(DIR, `${stage}.pid`), { force: true });
    console.log(`${stage}: stopped`);
  }
};

const status = () => {
  for (const stage of STAGES) {
    const pid = pidOf(stage);
    console.log(`${stage}: ${pid && alive(pid) ? `running (pid ${pid})` : "stopped"}`);
  }
};

const cmd = process.argv[2] ?? "status";
if (cmd === "up") up();
else if (cmd === "down") await down();
else if (cmd === "status") status();
else {
  console.error("usage: node scripts/pipeline.mjs up|down|status");
  process.exit(2);
}
