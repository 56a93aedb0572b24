/**
 * dotScores (the exact path's scoring, four items at a time, from the stored vectors and their
 * inverse norms) gives every item the same float64 score as summing its products one by one in
 * dimension order with the unit vector the block held before it kept the stored vectors:
 * bit-identical, so the exact search's order and ties do not change.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { dotScores, inverseNorm } from "../../services/core/adapters/hnsw/vector-block.ts";
import { seededRandom } from "../helpers/seeded.ts";

/** The block's former normalisation (unitFloat32): float sum, 1/(sqrtf + 1e-30), float products. */
const unitFloat32 = (v: Float32Array): Float32Array => {
  const f = Math.fround;
  let norm = 0;
  for (let i = 0; i < v.length; i++) norm = f(norm + f((v[i] as number) * (v[i] as number)));
  const inv = f(1 / f(f(Math.sqrt(norm)) + 1e-30));
  return Float32Array.from(v, (x) => f(x * inv));
};

/** One item at a time, dimension order, over unit vectors: what VectorBlock.topK computed before. */
const oneByOne = (query: Float64Array, unit: Float32Array, dim: number, slots: Int32Array): Float64Array =>
  Float64Array.from(slots, (slot) => {
    let s = 0;
    for (let i = 0; i < dim; i++) s += (query[i] as number) * (unit[slot * dim + i] as number);
    return s;
  });

describe("dotScores", () => {
  it("equals the one-by-one sums over the unit vectors bit for bit, for any count of slots and any dimension", () => {
    const rnd = seededRandom(18);
    for (const dim of [1, 3, 8, 384]) {
      const items = 61;
      // Not unit length, some far from it, as an embedder's vectors may be.
      const data = Float32Array.from({ length: items * dim }, () => (rnd() * 2 - 1) * (rnd() < 0.2 ? 40 : 1));
      const inverse = Float32Array.from({ length: items }, (_, j) => inverseNorm(data, j * dim, dim));
      const unit = new Float32Array(items * dim);
      for (let j = 0; j < items; j++) unit.set(unitFloat32(data.subarray(j * dim, (j + 1) * dim)), j * dim);
      for (const count of [0, 1, 3, 4, 5, 7, 8, 9, 60, 61]) {
        // Slots in a shuffled order, some repeated (the caller's admissible slots are any subset).
        const slots = Int32Array.from({ length: count }, () => Math.floor(rnd() * items));
        const query = Float64Array.from({ length: dim }, () => rnd() * 2 - 1);
        const got = dotScores(query, data, inverse, dim, slots);
        const want = oneByOne(query, unit, dim, slots);
        assert.equal(got.length, count);
        for (let j = 0; j < count; j++) assert.ok(Object.is(got[j], want[j]), `dim ${dim}, ${count} slots, item ${j}`);
      }
    }
  });
});
