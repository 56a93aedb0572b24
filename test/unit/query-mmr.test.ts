import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { dot } from "../../services/core/vector-math.ts";
import { type MmrCandidate, maximalMarginalRelevance, VectorRows } from "../../services/query/mmr.ts";
import { near, seededRandom } from "../helpers/seeded.ts";

/** MMR as first written (objects per candidate, vector-math's dot): the order the fast one must keep. */
const reference = (candidates: readonly MmrCandidate[], lambda: number, limit: number): MmrCandidate[] => {
  const maxRel = Math.max(1e-12, ...candidates.map((c) => c.relevance));
  const pool = candidates.map((c) => ({ ...c, rel: c.relevance / maxRel, maxSim: 0 }));
  const chosen: MmrCandidate[] = [];
  while (chosen.length < limit && pool.length > 0) {
    let best = 0;
    let bestScore = Number.NEGATIVE_INFINITY;
    pool.forEach((c, i) => {
      const score = lambda * c.rel - (1 - lambda) * c.maxSim;
      if (score > bestScore) {
        bestScore = score;
        best = i;
      }
    });
    const [taken] = pool.splice(best, 1);
    if (!taken) break;
    chosen.push({ id: taken.id, relevance: taken.relevance, ...(taken.vector ? { vector: taken.vector } : {}) });
    if (taken.vector)
      for (const c of pool) if (c.vector) c.maxSim = Math.max(c.maxSim, dot(c.vector, taken.vector as Float32Array));
  }
  return chosen;
};

const candidates = (rnd: () => number, n: number, dim: number, withoutVector: number): MmrCandidate[] => {
  // A few topics, each candidate near one of them: near duplicates, as fused candidates are.
  const topics = Array.from({ length: 4 }, () => near(new Float32Array(dim), 1, rnd));
  return Array.from({ length: n }, (_, i) => {
    const vector = rnd() < withoutVector ? undefined : near(topics[i % 4] as Float32Array, 0.3, rnd);
    // Rounded relevances: ties between candidates, as RRF's sums of 1/(k + rank) give.
    const relevance = Math.round(rnd() * 8) / 8;
    return { id: `c${i}`, relevance, ...(vector ? { vector } : {}) };
  });
};

describe("maximal marginal relevance (contiguous similarities)", () => {
  it("takes the same candidates in the same order as the reference, ties and missing vectors included", () => {
    const rnd = seededRandom(7);
    for (let round = 0; round < 40; round++) {
      const dim = [4, 7, 384][round % 3] as number;
      const cands = candidates(rnd, 1 + Math.floor(rnd() * 80), dim, round % 4 === 0 ? 0.2 : 0);
      const lambda = [0.7, 0.5, 1, 0][round % 4] as number;
      const limit = round % 5 === 0 ? 10 : 80;
      assert.deepEqual(maximalMarginalRelevance(cands, lambda, limit), reference(cands, lambda, limit));
    }
  });

  it("scores candidates against the one taken four at a time, each value bit-equal to dot's", () => {
    const rnd = seededRandom(11);
    for (const dim of [1, 3, 4, 5, 384]) {
      const vectors = Array.from({ length: 23 }, () => near(new Float32Array(dim), 1, rnd));
      const rows = VectorRows.of(vectors) as VectorRows;
      const out = new Float64Array(vectors.length);
      for (const count of [0, 1, 3, 4, 7, 22]) {
        // Rows in no particular order, as the pool leaves them.
        const picked = Int32Array.from({ length: count }, (_, j) => (j * 5 + 2) % 22);
        rows.toTaken(22, picked, count, out);
        for (let j = 0; j < count; j++) {
          const expected = dot(vectors[picked[j] as number] as Float32Array, vectors[22] as Float32Array);
          assert.ok(Object.is(out[j], expected), `dim ${dim}, row ${picked[j]}: ${out[j]} against ${expected}`);
          assert.ok(Object.is(rows.similarity(picked[j] as number, 22), expected));
        }
      }
    }
  });

  it("falls back to dot's rule for vectors of different lengths", () => {
    const rnd = seededRandom(3);
    const cands = candidates(rnd, 20, 8, 0).map((c, i) =>
      i % 3 === 0 && c.vector ? { ...c, vector: c.vector.subarray(0, 5) } : c,
    );
    assert.deepEqual(maximalMarginalRelevance(cands, 0.7, 20), reference(cands, 0.7, 20));
  });
});
