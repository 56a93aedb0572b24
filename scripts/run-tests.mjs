// Runs every test file under test/ with node's test runner (Node 20's --test takes no globs).
//
// Two lanes run side by side, each one file at a time:
//   - servers: test/integration and test/contract, the tests that use Kafka, the registry and
//     Neo4j (the outage test stops Neo4j and freezes the registry, so nothing else that talks to
//     them may run beside it) and most of the suite's time, which is largely waiting on brokers,
//     session timeouts and outages rather than CPU;
//   - local: unit, end-to-end (embedded runtime) and fuzz tests, which touch no server.
// The servers lane streams its output; the local lane's output is printed after it, whole, so
// the two TAP streams never interleave. MEMORY_TEST_LANES=1 runs everything in one lane, in order.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testProcessEnv } from "./test-env.mjs";

const find = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? find(join(dir, e.name)) : e.name.endsWith(".test.ts") ? [join(dir, e.name)] : [],
  );

const only = process.argv.slice(2);
const files = find("test")
  .filter((f) => only.length === 0 || only.some((o) => f.startsWith(o)))
  .sort();
if (files.length === 0) {
  console.error(`no test files under test/${only.length ? ` matching ${only.join(", ")}` : ""}`);
  process.exit(1);
}

const usesServers = (f) => f.startsWith(join("test", "integration")) || f.startsWith(join("test", "contract"));
// The multi-process Kafka tests (distributed/, pipeline/) run their stages with a short session
// timeout so that rebalances are quick; a CPU-starved stage can then miss heartbeats and be evicted.
// So the servers lane starts with the tests that do not care how busy the machine is (contract,
// infra, LLM adapters, the production install) while the local lane is still running beside it.
// node's runner sorts the files it is given, so the order is made by running the lane in phases,
// one runner process after the other.
const timingSensitive = (f) => ["distributed", "pipeline"].some((d) => f.startsWith(join("test", "integration", d)));
const laneCount = process.env.MEMORY_TEST_LANES === "1" ? 1 : 2;
const servers = files.filter(usesServers);
const lanes =
  laneCount === 1
    ? [{ name: "all", phases: [files] }]
    : [
        {
          name: "servers",
          phases: [servers.filter((f) => !timingSensitive(f)), servers.filter(timingSensitive)],
        },
        { name: "local", phases: [files.filter((f) => !usesServers(f))] },
      ]
        .map((l) => ({ ...l, phases: l.phases.filter((p) => p.length > 0) }))
        .filter((l) => l.phases.length > 0);

const tmp = mkdtempSync(join(tmpdir(), "memory-tests-"));
/** One runner process over some files; to this process's stdout, or to a file. */
const runPhase = (phaseFiles, out) =>
  new Promise((resolve) => {
    const args = ["--import", "tsx", "--test", "--test-concurrency=1", ...phaseFiles];
    const child = spawn(
      process.execPath,
      out ? [`--test-reporter=tap`, `--test-reporter-destination=${out}`, ...args] : args,
      { stdio: "inherit", env: testProcessEnv(process.env) },
    );
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
/** Runs one lane's phases in turn (all of them, even after a failure); the first lane streams. */
const runLane = async (lane, index) => {
  const outs = [];
  let code = 0;
  for (const [i, phase] of lane.phases.entries()) {
    const out = index === 0 ? undefined : join(tmp, `${lane.name}-${i}.tap`);
    if (out) outs.push(out);
    const c = await runPhase(phase, out);
    if (c !== 0) code = c;
  }
  return { lane, outs, code, files: lane.phases.flat().length };
};

const results = await Promise.all(lanes.map(runLane));
for (const r of results) {
  if (r.outs.length === 0) continue;
  console.log(`\n# ===== lane "${r.lane.name}" (${r.files} files), run beside the first =====`);
  for (const out of r.outs) {
    try {
      process.stdout.write(readFileSync(out, "utf8"));
    } catch (err) {
      console.log(`# lane "${r.lane.name}" wrote no output to ${out}: ${err.message}`);
    }
  }
}
rmSync(tmp, { recursive: true, force: true });
const failed = results.filter((r) => r.code !== 0);
for (const r of failed) console.error(`# lane "${r.lane.name}" failed (exit ${r.code})`);
process.exit(failed.length > 0 ? 1 : 0);
