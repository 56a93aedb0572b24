import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";

const dot = (a: Float32Array, b: Float32Array): number => a.reduce((s, x, i) => s + x * b[i]!, 0);

describe("HashingEmbedder (test fake)", () => {
  it("is deterministic, 256-dimensional and unit norm", async () => {
    const e = new HashingEmbedder();
    assert.equal(e.dimension, 256);
    assert.equal(e.id, "hash:256");
    const [a, b, empty, punct] = await e.embed(["The cat sat.", "The cat sat.", "", "?!"]);
    assert.deepEqual(a, b);
    for (const v of [a!, empty!, punct!]) {
      assert.equal(v.length, 256);
      assert.ok(Math.abs(Math.sqrt(dot(v, v)) - 1) < 1e-6);
    }
    assert.deepEqual(empty, punct); // no words: the fixed empty direction
    assert.deepEqual((await new HashingEmbedder().embed(["The cat sat."]))[0], a);
  });

  it("is case-insensitive and scores shared words above unrelated text", async () => {
    const e = new HashingEmbedder();
    const [x, y, z, w] = await e.embed([
      "Alice moved to Berlin in May",
      "alice MOVED to berlin in may",
      "Alice moved to Paris in June",
      "quarterly revenue grew strongly",
    ]);
    assert.ok(Math.abs(dot(x!, y!) - 1) < 1e-6);
    assert.ok(dot(x!, z!) > dot(x!, w!));
  });

  it("uses word order through bigrams", async () => {
    const e = new HashingEmbedder();
    const [a, b] = await e.embed(["dog bites man", "man bites dog"]);
    assert.ok(dot(a!, b!) < 0.999);
  });

  it("supports other dimensions and counts stats", async () => {
    const e = new HashingEmbedder(64);
    const [v] = await e.embed(["hello"]);
    assert.equal(v!.length, 64);
    await e.embed(["a", "b"]);
    assert.deepEqual({ calls: e.stats().calls, texts: e.stats().texts }, { calls: 2, texts: 3 });
    assert.throws(() => new HashingEmbedder(1));
  });
});
