/**
 * The production image's install steps, rehearsed without Docker (the Dockerfile's build + deps
 * stages): in one clean folder the build stage (pruned manifest with dev dependencies, `npm ci
 * --ignore-scripts`, scripts/build.mjs); in another the deps stage (pruned manifest, `npm ci
 * --omit=dev`: locked versions, no dev dependencies, no node-llama-cpp) receiving the compiled
 * dist/. Then the compiled services start there with plain `node` (no tsx, no repository
 * node_modules) against the infra/ servers, and a smoke test goes through the gateway: ingest
 * turns, flush, wait for the pipeline to drain, query, check the answer.
 * The installed folders are kept in .tools/prod-install/<lock hash>[-build]/ for the next run; set
 * PROD_INSTALL_FRESH=1 to install again, PROD_INSTALL_NATIVE=build to compile the native addons
 * there instead of reusing the repository's binaries of the same versions (see below).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { kafkaClient } from "../../services/core/adapters/kafka/process.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { QueryResult } from "../../services/core/query-types.ts";
import {
  cleanUp,
  httpJson,
  listAllHttp,
  MODEL_DIR,
  newKey,
  type Proc,
  ROOT,
  STAGES,
  sharedEnv,
  skip,
  spawnLogged,
  waitDrained,
  waitStarted,
} from "./distributed/helpers.ts";
import { runPrefix, sleep } from "./pipeline/helpers.ts";

const lockHash = createHash("sha256")
  .update(readFileSync(join(ROOT, "package-lock.json")))
  .update(readFileSync(join(ROOT, "scripts", "prod-manifest.mjs")))
  .digest("hex")
  .slice(0, 12);
const APP = join(ROOT, ".tools", "prod-install", lockHash);
const MARKER = join(APP, ".installed");
const BUILD = join(ROOT, ".tools", "prod-install", `${lockHash}-build`);
const BUILD_MARKER = join(BUILD, ".installed");
/** Dependencies with a native addon built by their install script (onnxruntime-node ships its binaries). */
const NATIVE = ["better-sqlite3", "hnswlib-node"];

const sh = (cmd: string, args: string[], cwd: string, timeoutMs: number): void => {
  const started = Date.now();
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: "utf8",
    timeout: timeoutMs,
    env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: "skip", npm_config_fund: "false", npm_config_audit: "false" },
  });
  assert.equal(r.status, 0, `${cmd} ${args.join(" ")} failed (${r.status ?? r.signal}):\n${r.stdout}\n${r.stderr}`);
  console.log(`# ${cmd} ${args.join(" ")}: ${((Date.now() - started) / 1000).toFixed(0)} s`);
};

/** A compiled service: `node dist/services/<name>/main.js` in the installed folder, nothing else. */
const startCompiled = (name: string, env: NodeJS.ProcessEnv): Proc =>
  spawnLogged(name, [join("dist", "services", name, "main.js")], APP, env);

const tails = (procs: Proc[]): string => procs.map((p) => `--- ${p.name}\n${p.log.slice(-10).join("\n")}`).join("\n");

test("the production install (npm ci --omit=dev + compiled dist/) starts every service and answers a query", {
  skip,
  timeout: 25 * 60_000,
}, async () => {
  // 1. Install (or reuse) the production dependencies in a clean folder, then compile into it.
  if (process.env.PROD_INSTALL_FRESH === "1" || !existsSync(MARKER)) {
    rmSync(APP, { recursive: true, force: true });
    sh(process.execPath, [join(ROOT, "scripts", "prod-manifest.mjs"), APP], ROOT, 60_000);
    // Install scripts run below: the native addons are the slow part (better-sqlite3 compiles
    // sqlite3.c when its prebuilt binary cannot be downloaded: over 20 minutes on a loaded 2-core
    // machine). The same versions are already built for this Node in the repository's node_modules:
    // reuse those binaries unless PROD_INSTALL_NATIVE=build asks for the image's full path.
    sh(
      "npm",
      ["ci", "--omit=dev", "--ignore-scripts", "--prefer-offline", "--no-audit", "--no-fund"],
      APP,
      10 * 60_000,
    );
    for (const pkg of NATIVE) {
      const from = join(ROOT, "node_modules", pkg);
      const to = join(APP, "node_modules", pkg);
      const version = (dir: string) =>
        (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { version: string }).version;
      const built = join(from, "build", "Release");
      if (process.env.PROD_INSTALL_NATIVE !== "build" && existsSync(built) && version(from) === version(to)) {
        for (const f of readdirSync(built).filter((n) => n.endsWith(".node")))
          cpSync(join(built, f), join(to, "build", "Release", f));
      } else sh("npm", ["rebuild", pkg], APP, 40 * 60_000);
    }
    writeFileSync(MARKER, `${new Date().toISOString()}\n`);
  }
  // Folders of earlier lock files are stale: remove them.
  const installs = join(ROOT, ".tools", "prod-install");
  for (const name of existsSync(installs) ? readdirSync(installs) : [])
    if (!name.startsWith(lockHash)) rmSync(join(installs, name), { recursive: true, force: true });
  // The image's build stage: dev dependencies (node-llama-cpp for its types only), then tsc, in a
  // folder holding only what the Dockerfile copies.
  if (process.env.PROD_INSTALL_FRESH === "1" || !existsSync(BUILD_MARKER)) {
    rmSync(BUILD, { recursive: true, force: true });
    sh(
      process.execPath,
      [join(ROOT, "scripts", "prod-manifest.mjs"), BUILD, "--dev", "--local-llm-types"],
      ROOT,
      60_000,
    );
    sh("npm", ["ci", "--ignore-scripts", "--prefer-offline", "--no-audit", "--no-fund"], BUILD, 10 * 60_000);
    writeFileSync(BUILD_MARKER, `${new Date().toISOString()}\n`);
  }
  for (const path of ["services", "schemas", "tsconfig.json", "tsconfig.build.json", "scripts/build.mjs"]) {
    rmSync(join(BUILD, path), { recursive: true, force: true });
    cpSync(join(ROOT, path), join(BUILD, path), { recursive: true });
  }
  sh(process.execPath, [join(BUILD, "scripts", "build.mjs"), "--out", join(APP, "dist")], BUILD, 5 * 60_000);

  const installed = JSON.parse(readFileSync(join(APP, "package.json"), "utf8")) as Record<string, unknown>;
  assert.equal(installed.devDependencies, undefined, "no dev dependencies in the image");
  assert.ok(!existsSync(join(APP, "node_modules", "tsx")), "tsx is a dev dependency");
  assert.ok(!existsSync(join(APP, "node_modules", "node-llama-cpp")), "the local LLM runtime is left out");

  // 2. Start the compiled services on a run-unique topic prefix against the infra/ servers.
  const prefix = runPrefix("prod-install");
  const key = newKey();
  const tenant = `tenant-${prefix.slice(2, -1)}`;
  const env = { ...sharedEnv(prefix, { [key]: tenant }), NODE_ENV: "production", MEMORY_MODEL_DIR: MODEL_DIR };
  const kafka = kafkaClient(loadConfig({}, env), "prod-install-test");
  const procs: Proc[] = [];
  try {
    for (const stage of STAGES) procs.push(startCompiled(stage, env));
    const query = startCompiled("query", { ...env, MEMORY_INTERNAL_TOKEN: "smoke-internal-token" });
    procs.push(query);
    await waitStarted([query], 180_000);
    const gateway = startCompiled("gateway", {
      ...env,
      MEMORY_QUERY_ADDR: String(query.started?.grpc),
      MEMORY_INTERNAL_TOKEN: "smoke-internal-token",
    });
    procs.push(gateway);
    await waitStarted(procs, 240_000).catch((err: unknown) => {
      throw new Error(`${err instanceof Error ? err.message : String(err)}\n${tails(procs)}`);
    });
    const http = String(gateway.started?.http);

    // 3. Ingest, flush, drain, query.
    const turns = [
      ["Caroline", "I adopted a grey cat named Pixel from the shelter last week."],
      ["Melanie", "Oh nice! How is Pixel settling in?"],
      ["Caroline", "Pixel sleeps on my keyboard every morning while I work."],
    ].map(([speaker, text], i) => ({
      turnId: `t${i + 1}`,
      speaker,
      role: "user",
      text,
      timestamp: new Date(Date.UTC(2024, 2, 4, 9, 0) + i * 60_000).toISOString(),
      sessionId: "s1",
    }));
    const ingest = await httpJson(http, key, "POST", "/v1/conversations/smoke/turns:batch", { turns });
    assert.equal(ingest.status, 202, JSON.stringify(ingest.body));
    assert.equal((await httpJson(http, key, "POST", "/v1/flush")).status, 202);
    // A broker's metadata can lag right after the run's topics were created ("not the leader"):
    // KafkaJS marks such errors retriable; anything else fails at once.
    for (let attempt = 1; ; attempt++) {
      try {
        await waitDrained(kafka, prefix, 240_000);
        break;
      } catch (err) {
        if (attempt < 5 && (err as { retriable?: boolean }).retriable === true) continue;
        throw new Error(`${err instanceof Error ? err.message : String(err)}\n${tails(procs)}`);
      }
    }
    const records = await listAllHttp(http, key);
    assert.ok(records.length > 0, `no records after the drain\n${tails(procs)}`);
    const q = await httpJson<QueryResult>(http, key, "POST", "/v1/query", { question: "What is the cat's name?" });
    assert.equal(q.status, 200, JSON.stringify(q.body));
    assert.match(JSON.stringify(q.body.items), /Pixel/, "the answer context names the cat");
    // The probe paths k8s/ uses, served by the compiled services.
    assert.equal((await fetch(`${http}/readyz`)).status, 200, "gateway /readyz");
    assert.equal((await fetch(`${http}/healthz`)).status, 200, "gateway /healthz");
    // With MEMORY_METRICS_PORT set, tenant-labelled metrics are on that port only, not the public one.
    assert.equal((await fetch(`${http}/metrics`)).status, 404, "gateway public /metrics");
    assert.match(
      await (await fetch(`${String(gateway.started?.metrics)}/metrics`)).text(),
      /memory_http_requests_total/,
      "gateway metrics port",
    );
    for (const p of procs.filter((x) => x.name !== "gateway")) {
      const metrics = String(p.started?.metrics);
      assert.equal((await fetch(`${metrics}/healthz`)).status, 200, `${p.name} /healthz`);
      assert.equal((await fetch(`${metrics}/readyz`)).status, 200, `${p.name} /readyz`);
      if (p.name !== "query")
        assert.match(await (await fetch(`${metrics}/metrics`)).text(), /memory_consumer_lag\{/, `${p.name} lag`);
    }
  } finally {
    for (const p of [...procs].reverse()) if (!p.exited) p.child.kill("SIGTERM");
    const end = Date.now() + 30_000;
    while (procs.some((p) => !p.exited) && Date.now() < end) await sleep(100);
    for (const p of procs) if (!p.exited) p.child.kill("SIGKILL");
    await cleanUp(kafka, prefix, [tenant]).catch(() => undefined);
  }
});
