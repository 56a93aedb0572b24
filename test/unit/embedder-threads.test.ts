// The embedder's onnxruntime intra-op threads: MEMORY_EMBEDDER_THREADS when set, else the process
// kind's default (2 for a process that embeds alone, 1 for a pipeline stage process: issue 18).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EMBEDDER_THREADS, embedderThreadsOf, STAGE_EMBEDDER_THREADS } from "../../services/composition/parts.ts";
import { loadConfig } from "../../services/core/config.ts";

const env = (vars: Record<string, string> = {}): NodeJS.ProcessEnv => ({ MEMORY_CONFIG: "", ...vars });

describe("embedder threads", () => {
  it("are left to the process when unset", () => {
    const c = loadConfig({}, env());
    assert.equal(c.embedder.threads, undefined);
    assert.equal(c.embedder.variant, "fp32");
    assert.equal(embedderThreadsOf(c, EMBEDDER_THREADS), 2);
    assert.equal(embedderThreadsOf(c, STAGE_EMBEDDER_THREADS), 1);
  });

  it("are the configured count in every process when set", () => {
    const c = loadConfig({}, env({ MEMORY_EMBEDDER_THREADS: "3" }));
    assert.equal(embedderThreadsOf(c, EMBEDDER_THREADS), 3);
    assert.equal(embedderThreadsOf(c, STAGE_EMBEDDER_THREADS), 3);
  });

  it("refuses a count below 1", () => {
    assert.throws(() => loadConfig({}, env({ MEMORY_EMBEDDER_THREADS: "0" })), /embedder\.threads/);
  });
});
