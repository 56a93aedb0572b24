// Dense pseudo-relevance feedback (services/query/feedback.ts): a list question's record route is
// run once more with its vector moved toward the first round's best items. The route counts in a
// whole query are checked in query-name-free.test.ts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { dot } from "../../services/core/vector-math.ts";
import { rocchio } from "../../services/query/feedback.ts";
import { near, seededRandom } from "../helpers/seeded.ts";

const unit = (v: Float32Array): Float32Array => {
  const n = Math.sqrt(dot(v, v));
  return v.map((x) => x / n);
};

describe("rocchio", () => {
  it("gives nothing to search with when there is no feedback", () => {
    assert.equal(rocchio(new Float32Array([1, 0]), [], 0.5), undefined);
  });

  it("moves the question toward the mean of the feedback, by the weight, as a unit vector", () => {
    const q = new Float32Array([1, 0, 0]);
    const moved = rocchio(q, [new Float32Array([0, 1, 0]), new Float32Array([0, 0, 1])], 0.5) as Float32Array;
    // q + 0.5 * (0, 0.5, 0.5) = (1, 0.25, 0.25), normalised.
    const expected = unit(new Float32Array([1, 0.25, 0.25]));
    for (let i = 0; i < 3; i++) assert.ok(Math.abs((moved[i] as number) - (expected[i] as number)) < 1e-6);
    assert.ok(Math.abs(dot(moved, moved) - 1) < 1e-6);
  });

  it("ranks an item like the feedback higher than the question alone does", () => {
    const rnd = seededRandom(15);
    const dim = 32;
    const q = unit(near(new Float32Array(dim), 1, rnd));
    const theme = unit(near(new Float32Array(dim), 1, rnd));
    const found = [unit(near(theme, 0.3, rnd)), unit(near(theme, 0.3, rnd))];
    const sibling = unit(near(theme, 0.3, rnd));
    const moved = rocchio(q, found, 0.5) as Float32Array;
    assert.ok(dot(moved, sibling) > dot(q, sibling));
    // The question still leads: the weight keeps it nearer the question than the feedback's mean.
    assert.ok(dot(moved, q) > dot(moved, theme));
  });

  it("leaves the inputs as they were", () => {
    const q = new Float32Array([1, 2]);
    const f = new Float32Array([3, 4]);
    rocchio(q, [f], 1);
    assert.deepEqual([...q], [1, 2]);
    assert.deepEqual([...f], [3, 4]);
  });
});
