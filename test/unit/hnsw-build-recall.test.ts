/**
 * The HNSW store's default build parameters keep recall@10 against exact search at or above 0.95,
 * unfiltered and with a filter admitting half of the points (the store's filtered walk), on seeded
 * clustered vectors: cluster centres with perturbed copies around them, like the scale bench's
 * perturbed real embeddings (services/bench/scale-data.ts perturb). Prints the recall measured.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { perturb } from "../../services/bench/scale-data.ts";
import { exactTopK, measureBuildRecall } from "../../services/core/adapters/hnsw/build-recall.ts";
import { DEFAULT_HNSW_EF_CONSTRUCTION, DEFAULT_HNSW_M } from "../../services/core/adapters/hnsw/vector-store.ts";
import { seededRandom } from "../../services/core/seeded-random.ts";

const DIM = 384;

describe("HNSW build parameters", () => {
  it("keep recall@10 at or above 0.95 against exact search", (t) => {
    const rnd = seededRandom(18);
    const centres = Array.from({ length: 200 }, () => perturb(new Float32Array(DIM), 1, rnd));
    const pick = (): Float32Array => centres[Math.floor(rnd() * centres.length)] as Float32Array;
    const points = Array.from({ length: 4000 }, () => perturb(pick(), 0.5, rnd));
    const queries = Array.from({ length: 100 }, () => perturb(pick(), 0.5, rnd));
    const even = (label: number): boolean => label % 2 === 0;
    const options = { m: DEFAULT_HNSW_M, efConstruction: DEFAULT_HNSW_EF_CONSTRUCTION, efSearch: 64, k: 10 };
    const all = measureBuildRecall(points, queries, exactTopK(points, queries, 10), options);
    const half = measureBuildRecall(points, queries, exactTopK(points, queries, 10, even), {
      ...options,
      admissible: even,
    });
    t.diagnostic(
      `m ${options.m}, efConstruction ${options.efConstruction}: recall@10 ${all.recall.toFixed(4)}, filtered ${half.recall.toFixed(4)}`,
    );
    assert.ok(all.recall >= 0.95, `recall@10 ${all.recall}`);
    assert.ok(half.recall >= 0.95, `filtered recall@10 ${half.recall}`);
    assert.ok(half.filtered && !all.filtered);
  });
});
