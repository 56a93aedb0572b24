// package.json "bin" → bin/memory.js: `npx memory` runs the CLI from any working directory, with
// its output and exit status (0, and 2 for a usage error) passed through unchanged.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { NO_LLM_MESSAGE } from "../../services/cli/ask.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const BIN = join(ROOT, "bin", "memory.js");
const dir = mkdtempSync(join(tmpdir(), "memory-bin-"));
const dataDir = join(dir, "data");

/** `node bin/memory.js ...` run from a folder outside the package, with no config file. */
const memory = (args: string[]) => {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd: dir,
    encoding: "utf8",
    timeout: 60_000,
    env: { ...process.env, MEMORY_CONFIG: join(dir, "no-such-config.json"), MEMORY_DATA_DIR: dataDir },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};

describe("bin/memory.js", { timeout: 180_000 }, () => {
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("is the package's memory command and is executable", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { bin: Record<string, string> };
    assert.equal(join(ROOT, pkg.bin.memory!), BIN);
    assert.ok(existsSync(BIN));
    assert.ok((statSync(BIN).mode & 0o111) !== 0, "bin/memory.js must be executable");
    assert.match(readFileSync(BIN, "utf8"), /^#!\/usr\/bin\/env node\n/);
  });

  it("--help lists the commands, from outside the package", () => {
    const r = memory(["--help"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^Usage: memory \[options\] \[command\]/);
    for (const command of ["ingest", "query", "ask", "serve", "consolidate", "erase"]) {
      assert.match(r.stdout, new RegExp(`\\n {2}${command} `), command);
    }
  });

  it("passes a usage error's exit status and message through; nothing is opened", () => {
    const bad = memory(["query", ""]);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /<question>: /);
    const ask = memory(["ask", "What did Melanie paint?"]);
    assert.equal(ask.code, 2, ask.stderr);
    assert.equal(ask.stderr.trim(), NO_LLM_MESSAGE);
    assert.equal(ask.stdout, "");
    assert.ok(!existsSync(dataDir) || readdirSync(dataDir).length === 0);
  });
});
