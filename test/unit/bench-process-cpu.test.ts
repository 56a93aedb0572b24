import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { cpuSecondsOf, cpuSince, infraServerPids, parseCpuSeconds } from "../../services/bench/process-cpu.ts";

describe("bench process CPU: /proc stat times and the infra servers' pids", () => {
  it("reads utime + stime (clock ticks) after the command name, even one holding spaces and parentheses", () => {
    const rest = "S 1 2 3 4 5 6 7 8 9 10 1234 566 0 0 20 0 30 0 100 200 300";
    assert.equal(parseCpuSeconds(`4242 (java) ${rest}`), 18);
    assert.equal(parseCpuSeconds(`4242 (a (odd) name) ${rest}`), 18);
  });

  it("says nothing for a line that is not a stat line", () => {
    assert.equal(parseCpuSeconds(""), undefined);
    assert.equal(parseCpuSeconds("4242 (java) S 1 2"), undefined);
  });

  it("this process: some CPU on Linux, none for a pid that is not there", {
    skip: process.platform !== "linux",
  }, () => {
    const own = cpuSecondsOf(process.pid);
    assert.ok(own !== undefined && own >= 0);
    assert.equal(cpuSecondsOf(undefined), undefined);
    assert.equal(cpuSecondsOf(2 ** 22 + 1), undefined, "above Linux's largest pid");
  });

  it("counts each named process's CPU from the start, leaving out one /proc does not report", {
    skip: process.platform !== "linux",
  }, () => {
    const since = cpuSince([
      ["self", process.pid],
      ["gone", 2 ** 22 + 1],
      ["unknown", undefined],
    ]);
    let spin = 0;
    for (let i = 0; i < 2e7; i++) spin += i % 7; // bounded busy work, so some ticks pass
    const used = since();
    assert.ok(spin > 0);
    assert.deepEqual(Object.keys(used), ["self"]);
    assert.ok((used.self ?? -1) >= 0);
  });

  it("finds the servers whose pid file names a live process, and only those", {
    skip: process.platform !== "linux",
  }, () => {
    const work = mkdtempSync(join(tmpdir(), "infra-work-"));
    try {
      mkdirSync(join(work, "run"));
      writeFileSync(join(work, "run", "kafka.pid"), `${process.pid}\n`);
      writeFileSync(join(work, "run", "neo4j.pid"), `${2 ** 22 + 1}\n`);
      writeFileSync(join(work, "run", "registry.pid"), "not a pid\n");
      assert.deepEqual(infraServerPids(work), { kafka: process.pid });
      assert.deepEqual(infraServerPids(join(work, "absent")), {});
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
