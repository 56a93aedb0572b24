// Which config file is read: a process reads MEMORY_CONFIG, else ./memory.config.json; a library
// call (tests, the bench) reads only MEMORY_CONFIG, so a memory.config.json that happens to lie in
// the working directory never changes a test; the test runner also empties MEMORY_CONFIG.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testProcessEnv } from "../../scripts/test-env.mjs";
import { DEFAULT_CONFIG_FILE, loadConfig, loadProcessConfig } from "../../services/core/config.ts";

describe("config file", () => {
  const cwd = process.cwd();
  let dir = "";
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "config-file-"));
    // A stray file in the working directory, with values no test expects.
    writeFileSync(join(dir, DEFAULT_CONFIG_FILE), JSON.stringify({ query: { budget: 4321 }, grpc: { port: 7001 } }));
    process.chdir(dir);
  });
  after(() => {
    process.chdir(cwd);
    rmSync(dir, { recursive: true, force: true });
  });

  it("a library call ignores a memory.config.json in the working directory", () => {
    assert.equal(loadConfig({}, {}).query.budget, 1000);
    assert.equal(loadConfig({ dataDir: "d" }).query.budget, 1000);
  });

  it("a process reads ./memory.config.json; the environment wins over it", () => {
    const c = loadProcessConfig({}, {});
    assert.equal(c.query.budget, 4321);
    assert.equal(c.grpc.port, 7001);
    assert.equal(loadProcessConfig({}, { MEMORY_QUERY_BUDGET: "500" }).query.budget, 500);
  });

  it("MEMORY_CONFIG names another file, or none when empty", () => {
    const other = join(dir, "other.json");
    writeFileSync(other, JSON.stringify({ query: { budget: 777 } }));
    assert.equal(loadConfig({}, { MEMORY_CONFIG: other }).query.budget, 777);
    assert.equal(loadProcessConfig({}, { MEMORY_CONFIG: other }).query.budget, 777);
    assert.equal(loadProcessConfig({}, { MEMORY_CONFIG: "" }).query.budget, 1000);
  });

  it("the test runner's environment reads no file, even in a process a test starts", () => {
    const env = testProcessEnv({ ...process.env, MEMORY_CONFIG: join(dir, "other.json") });
    assert.equal(env.MEMORY_CONFIG, "");
    assert.equal(loadProcessConfig({}, env).query.budget, 1000);
  });

  it("stops on a file that is not a JSON object, naming MEMORY_CONFIG and the file", () => {
    const bad = join(dir, "bad.json");
    writeFileSync(bad, "{ not json");
    assert.throws(() => loadConfig({}, { MEMORY_CONFIG: bad }), /MEMORY_CONFIG file .*bad\.json/);
    writeFileSync(bad, "[1, 2]");
    assert.throws(
      () => loadConfig({}, { MEMORY_CONFIG: bad }),
      /MEMORY_CONFIG file .*bad\.json: expected a JSON object/,
    );
  });
});
