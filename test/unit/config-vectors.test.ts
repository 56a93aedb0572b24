import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadConfig } from "../../services/core/config.ts";

// MEMORY_CONFIG points at a file that does not exist, so only the environment given here counts.
const env = (vars: Record<string, string>): NodeJS.ProcessEnv => ({ MEMORY_CONFIG: "/nonexistent.json", ...vars });

describe("config: HNSW compaction ratio", () => {
  it("defaults to 0.2 and reads MEMORY_HNSW_COMPACT_RATIO", () => {
    assert.equal(loadConfig({}, env({})).vectors.compactDeletedRatio, 0.2);
    assert.equal(loadConfig({}, env({ MEMORY_HNSW_COMPACT_RATIO: "0.5" })).vectors.compactDeletedRatio, 0.5);
  });

  it("rejects a ratio outside (0, 1], naming the field", () => {
    for (const bad of ["0", "1.5", "x"]) {
      assert.throws(() => loadConfig({}, env({ MEMORY_HNSW_COMPACT_RATIO: bad })), /vectors\.compactDeletedRatio/);
    }
  });
});

describe("config: HNSW graph per kind", () => {
  it("defaults to 8192 points and reads MEMORY_HNSW_SPLIT_KINDS_AT", () => {
    assert.equal(loadConfig({}, env({})).vectors.splitKindsAt, 8192);
    assert.equal(loadConfig({}, env({ MEMORY_HNSW_SPLIT_KINDS_AT: "100" })).vectors.splitKindsAt, 100);
  });

  it("rejects a size below 1 or not whole, naming the field", () => {
    for (const bad of ["0", "2.5", "x"]) {
      assert.throws(() => loadConfig({}, env({ MEMORY_HNSW_SPLIT_KINDS_AT: bad })), /vectors\.splitKindsAt/);
    }
  });
});
