/**
 * VectorBlock's best-k selection returns exactly the first k of the full sort (score descending,
 * label ascending), ties and duplicate scores included: the exact path's results do not change.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { bestK } from "../../services/core/adapters/hnsw/vector-block.ts";

const fullSort = (scores: Float64Array, labels: readonly number[], k: number): number[] =>
  Array.from({ length: scores.length }, (_, j) => j)
    .sort((a, b) => (scores[b] as number) - (scores[a] as number) || (labels[a] as number) - (labels[b] as number))
    .slice(0, k);

describe("bestK", () => {
  it("equals the first k of the full sort, ties by label", () => {
    fc.assert(
      fc.property(
        // Few distinct values: many ties.
        fc.array(fc.integer({ min: -4, max: 4 }), { minLength: 0, maxLength: 300 }),
        fc.integer({ min: 0, max: 320 }),
        fc.integer({ min: 0, max: 1000 }),
        (values, k, seed) => {
          const scores = Float64Array.from(values, (v) => v / 4);
          // Distinct labels in a shuffled order (labels are unique within a block).
          const labels = values.map((_, j) => (j * 7919 + seed) % 100_003);
          const got = bestK(scores, (j) => labels[j] as number, k);
          assert.deepEqual(got, fullSort(scores, labels, Math.min(k, values.length)));
        },
      ),
      { seed: 18, numRuns: 400 },
    );
  });

  it("keeps the best few of many in order", () => {
    const scores = Float64Array.from(
      { length: 5000 },
      (_, j) => Math.sin(j * 12.9898) * 43758.5453 - Math.floor(Math.sin(j * 12.9898) * 43758.5453),
    );
    const labels = Array.from({ length: 5000 }, (_, j) => 5000 - j);
    assert.deepEqual(
      bestK(scores, (j) => labels[j] as number, 13),
      fullSort(scores, labels, 13),
    );
  });
});
