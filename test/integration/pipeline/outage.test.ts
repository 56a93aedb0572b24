// Dependencies down mid-stream (issue 12), real Kafka, schema registry and Neo4j: one instance each
// of the segmenter, encoder and indexer (stage-harness.ts), the dependency limit at 5 s. Half of the
// input is fed and indexed; then Neo4j is stopped for 60 s and, 15 s into that, the registry for
// 30 s, while the rest of the input and the flushes are fed. The indexer must only wait and retry:
// /readyz answers 503 while Neo4j is down (and /healthz stays 200), 200 again once it is back; no
// dead letter at all, and the result equals the uninterrupted reference.
//
// It stops servers with the infra scripts (infra/neo4j.sh, infra/registry.sh stop|start), with this
// process's environment (INFRA_WORK_DIR and the port variables select which servers), so it skips
// unless MEMORY_TEST_RESTART_INFRA=1 says that it may. During development, point it at servers of
// your own (INFRA_WORK_DIR=... and ports for infra/up.sh, then eval "$(bash infra/env.sh)").
// The registry: infra's default Apicurio keeps its schemas in memory and comes back EMPTY from a
// stop/start, which no production registry does (they persist them), and the stages' output schema
// ids would be gone for good. So with Apicurio the registry process is frozen (SIGSTOP, pid from
// the infra's run/registry.pid) for 30 s and thawed: unreachable, its data intact. With
// REGISTRY_IMPL=node (persistent) it is stopped and started with infra/registry.sh.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { skip as infraSkip, ROOT } from "../distributed/helpers.ts";
import { sleep } from "./helpers.ts";
import { PIPE, runScenario, waitStarted } from "./stage-harness.ts";

const skip =
  infraSkip ||
  (process.env.MEMORY_TEST_RESTART_INFRA === "1"
    ? false
    : "stops Neo4j and the registry: set MEMORY_TEST_RESTART_INFRA=1 with servers it may stop");

const infra = (script: "neo4j.sh" | "registry.sh", action: "stop" | "start"): void => {
  execFileSync("bash", [join(ROOT, "infra", script), action], { env: process.env, stdio: "inherit", timeout: 300_000 });
};

/** Makes the registry unreachable (down: true) or brings it back, keeping its schemas (see above). */
const registry = (down: boolean): void => {
  if (process.env.REGISTRY_IMPL === "node") {
    infra("registry.sh", down ? "stop" : "start");
    return;
  }
  const workDir = process.env.INFRA_WORK_DIR ?? join(ROOT, "infra", ".work");
  const pid = Number(readFileSync(join(workDir, "run", "registry.pid"), "utf8").trim());
  process.kill(pid, down ? "SIGSTOP" : "SIGCONT");
};

const status = async (url: string): Promise<number> => {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(5000) })).status;
  } catch {
    return -1;
  }
};

/** Polls until the URL answers `code` (the stage decides when; nothing here sleeps for it). */
const untilStatus = async (url: string, code: number, ms: number): Promise<number> => {
  const start = Date.now();
  while ((await status(url)) !== code) {
    if (Date.now() - start > ms) throw new Error(`${url} did not answer ${code} within ${ms} ms`);
    await sleep(250);
  }
  return Date.now() - start;
};

test("Neo4j down 60 s and the registry down 30 s mid-stream: no dead letter, not ready while down, result equals the reference", {
  skip,
  timeout: 1_500_000,
}, async (t) => {
  let neo4jDown = false;
  let registryDown = false;
  try {
    await runScenario(t, "outage", async (h) => {
      const limits = { MEMORY_DEPENDENCY_DOWN_LIMIT_MS: "5000", MEMORY_STAGE_RETRY_MAX_MS: "3000" };
      const insts = PIPE.map((stage) => h.start(stage, `${stage}-1`, undefined, limits));
      await waitStarted(insts);
      const indexer = insts[2];
      assert.ok(indexer);
      const ops = String(indexer.startedFields?.metrics);
      const half = Math.ceil(h.length / 2);
      await h.feed(0, half);
      await untilStatus(`${ops}/readyz`, 200, 60_000);
      const start = Date.now();
      while (indexer.committedInputs === 0) {
        if (Date.now() - start > 300_000) throw new Error("the indexer committed nothing");
        await sleep(100);
      }

      const downAt = Date.now();
      infra("neo4j.sh", "stop");
      neo4jDown = true;
      await h.feed(half, h.length);
      await h.flush();
      await untilStatus(`${ops}/readyz`, 503, 120_000);
      assert.equal(await status(`${ops}/healthz`), 200, "healthz stays 200 while a dependency is down");
      t.diagnostic(`indexer not ready ${((Date.now() - downAt) / 1000).toFixed(1)} s after Neo4j stopped`);

      // The outages' lengths are the scenario, not a synchronisation.
      await sleep(Math.max(0, downAt + 15_000 - Date.now()));
      registry(true);
      registryDown = true;
      await sleep(30_000);
      registry(false);
      registryDown = false;
      await sleep(Math.max(0, downAt + 60_000 - Date.now()));
      assert.equal(await status(`${ops}/readyz`), 503, "still not ready while Neo4j is down");
      infra("neo4j.sh", "start");
      neo4jDown = false;
      const back = await untilStatus(`${ops}/readyz`, 200, 300_000);
      t.diagnostic(`indexer ready again ${(back / 1000).toFixed(1)} s after Neo4j was up`);
      assert.ok(
        indexer.log.some((l) => l.includes("dependency down longer than the limit") && l.includes("neo4j")),
        "a log line names Neo4j",
      );
      const metrics = await (await fetch(`${ops}/metrics`)).text();
      assert.match(metrics, /memory_dependency_down\{[^}]*dependency="neo4j"[^}]*\} 0/);
    });
  } finally {
    if (registryDown) registry(false);
    if (neo4jDown) infra("neo4j.sh", "start");
  }
});
