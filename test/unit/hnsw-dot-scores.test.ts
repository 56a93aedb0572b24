/**
 * dotScores (the exact path's scoring, four items at a time) gives every item the same float64
 * score as summing its products one by one in dimension order: bit-identical, so the exact
 * search's order and ties do not change.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { dotScores } from "../../services/core/adapters/hnsw/vector-block.ts";
import { seededRandom } from "../helpers/seeded.ts";

/** One item at a time, dimension order: what VectorBlock.topK computed before. */
const oneByOne = (query: Float64Array, data: Float32Array, dim: number, slots: Int32Array): Float64Array =>
  Float64Array.from(slots, (slot) => {
    let s = 0;
    for (let i = 0; i < dim; i++) s += (query[i] as number) * (data[slot * dim + i] as number);
    return s;
  });

describe("dotScores", () => {
  it("equals the one-by-one sums bit for bit, for any count of slots and any dimension", () => {
    const rnd = seededRandom(18);
    for (const dim of [1, 3, 8, 384]) {
      const items = 61;
      const data = Float32Array.from({ length: items * dim }, () => rnd() * 2 - 1);
      for (const count of [0, 1, 3, 4, 5, 7, 8, 9, 60, 61]) {
        // Slots in a shuffled order, some repeated (the caller's admissible slots are any subset).
        const slots = Int32Array.from({ length: count }, () => Math.floor(rnd() * items));
        const query = Float64Array.from({ length: dim }, () => rnd() * 2 - 1);
        const got = dotScores(query, data, dim, slots);
        const want = oneByOne(query, data, dim, slots);
        assert.equal(got.length, count);
        for (let j = 0; j < count; j++) assert.ok(Object.is(got[j], want[j]), `dim ${dim}, ${count} slots, item ${j}`);
      }
    }
  });
});
