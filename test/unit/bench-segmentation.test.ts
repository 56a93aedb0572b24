/**
 * The segmentation bench's pure parts: the distribution summary, and segmentStream, which feeds one
 * stream through the segmenter (no session ends, no flush) and reports where each mode cut, why,
 * and how many gate cuts attention vetoed.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { distribution, segmentStream } from "../../services/bench/segmentation.ts";
import type { SensoryTurn } from "../../services/core/types.ts";
import { DEFAULT_GATE } from "../../services/segmenter/gate.ts";
import { defaultSegmenterConfig } from "../../services/segmenter/segment-state.ts";

const turns: SensoryTurn[] = Array.from({ length: 9 }, (_, i) => ({
  tenant: "bench",
  conversation: "c",
  turnId: `t${i}`,
  speaker: i % 2 ? "Ana" : "Ben",
  role: "user",
  text: `turn number ${i}`,
  timestamp: "2023-05-08T09:00:00.000Z",
  sessionId: "stream",
  compressed: `turn number ${i}`,
  keptRatio: 1,
}));
const embeddings = turns.map(() => Float32Array.from([1, 0, 0, 0]));
const shares = [Number.NaN, 0.5, 0.45, 0.55, 0.6, 0.05, 0.62, 0.58, 0.65];
const attention = { dipZ: -1, confirmZ: 0, historySize: 8, minHistory: 3 };

describe("segmentation bench", () => {
  it("summarises a distribution with interpolated quartiles", () => {
    assert.deepEqual(distribution([4, 1, 3, 2]), { min: 1, p25: 1.75, median: 2.5, p75: 3.25, max: 4, mean: 2.5 });
    assert.ok(Number.isNaN(distribution([]).median));
  });

  it("reports each mode's cuts on one stream, their reasons and the vetoed gate cuts", () => {
    const always = { ...DEFAULT_GATE, threshold: 0 };
    const never = { ...DEFAULT_GATE, threshold: 2 };
    const gate = segmentStream(turns, embeddings, shares, defaultSegmenterConfig({ gate: always, attention }));
    assert.deepEqual(gate.cuts, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.ok(gate.reasons.every((r) => r === "gate"));
    const att = segmentStream(
      turns,
      embeddings,
      shares,
      defaultSegmenterConfig({ gate: never, attention, boundaries: "attention" }),
    );
    assert.deepEqual(att.cuts, [5]);
    assert.deepEqual(att.reasons, ["attention"]);
    const both = segmentStream(
      turns,
      embeddings,
      shares,
      defaultSegmenterConfig({ gate: always, attention, boundaries: "both" }),
    );
    assert.deepEqual(both.cuts, [1, 2, 3, 5]);
    assert.equal(both.vetoed, 4);
  });
});
