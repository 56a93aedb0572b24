import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { loadTokenClassifier, type OnnxTokenClassifier } from "../../services/core/adapters/onnx/token-classifier.ts";
import {
  attentionBoundaries,
  intersectBoundaries,
  localMinima,
  pairLengths,
  previousSpanAttention,
  refineBoundaries,
  type Span,
  turnAttentionScores,
} from "../../services/segmenter/attention-boundaries.ts";
import { makeTinyTokenClassifier, tinyClassifierSkip } from "../helpers/tiny-token-classifier.ts";

const skip = tinyClassifierSkip;

const close = (a: number, b: number, eps = 1e-9): boolean => Math.abs(a - b) <= eps;

/**
 * An attention matrix over [CLS] s0 s0 s1 s1 s2 s2 [SEP] (size 8) where row t is given as
 * weights over the 8 keys (normalised here).
 */
const matrix = (rows: number[][]): Float32Array => {
  const n = rows.length;
  const m = new Float32Array(n * n);
  rows.forEach((r, i) => {
    const s = r.reduce((a, b) => a + b, 0);
    r.forEach((v, j) => {
      m[i * n + j] = v / s;
    });
  });
  return m;
};

describe("sentence-to-previous-sentence attention (pure)", () => {
  const spans: Span[] = [
    { start: 1, end: 3 },
    { start: 3, end: 5 },
    { start: 5, end: 7 },
  ];
  const uniform = [1, 1, 1, 1, 1, 1, 1, 1];

  it("averages over a sentence's tokens the share of attention on the previous sentence, specials masked", () => {
    const m = matrix([
      uniform,
      uniform,
      uniform,
      // s1 tokens: one puts 3/4 of its non-special mass on s0, the other 1/4.
      [5, 3, 0, 1, 0, 0, 0, 5],
      [9, 1, 0, 2, 1, 0, 0, 0],
      // s2 tokens: nothing on s1, everything on themselves and the specials.
      [4, 0, 0, 0, 0, 1, 0, 4],
      [4, 0, 0, 0, 0, 0, 1, 4],
      uniform,
    ]);
    const s = previousSpanAttention(m, 8, spans);
    assert.equal(s.length, 3);
    assert.ok(Number.isNaN(s[0]!));
    assert.ok(close(s[1]!, (3 / 4 + 1 / 4) / 2, 1e-6), String(s[1]));
    assert.ok(close(s[2]!, 0, 1e-6), String(s[2]));
    // Specials are masked: moving mass between [CLS]/[SEP] changes nothing.
    const m2 = matrix([
      uniform,
      uniform,
      uniform,
      [0, 3, 0, 1, 0, 0, 0, 10],
      [1, 1, 0, 2, 1, 0, 0, 8],
      [8, 0, 0, 0, 0, 1, 0, 0],
      [1, 0, 0, 0, 0, 0, 1, 7],
      uniform,
    ]);
    assert.deepEqual(
      previousSpanAttention(m2, 8, spans).map((x) => (Number.isNaN(x) ? "NaN" : x.toFixed(6))),
      s.map((x) => (Number.isNaN(x) ? "NaN" : x.toFixed(6))),
    );
  });

  it("gives NaN for an empty sentence or an empty previous sentence, and checks shapes", () => {
    const m = matrix(Array.from({ length: 8 }, () => uniform));
    const s = previousSpanAttention(m, 8, [
      { start: 1, end: 3 },
      { start: 3, end: 3 },
      { start: 3, end: 7 },
    ]);
    assert.ok(s.every(Number.isNaN));
    assert.throws(() => previousSpanAttention(m, 7, spans), /expected 7x7/);
    assert.throws(() => previousSpanAttention(m, 8, [{ start: 5, end: 9 }]), /outside/);
  });

  it("finds local minima, skipping undefined scores, counting a flat valley once", () => {
    assert.deepEqual(localMinima([Number.NaN, 0.5, 0.2, 0.4, 0.1, 0.3]), [2, 4]);
    assert.deepEqual(localMinima([Number.NaN, 0.5, 0.2, 0.2, 0.4]), [2]);
    assert.deepEqual(localMinima([0.5, 0.2, 0.2, 0.1]), [3]); // a step down is no valley
    assert.deepEqual(localMinima([0.3, 0.3, 0.3]), []);
    assert.deepEqual(localMinima([0.2, 0.5, 0.6]), [0]); // an end point compares with its one neighbour
    assert.deepEqual(localMinima([0.6, Number.NaN, 0.2, Number.NaN, 0.5]), [2]);
    assert.deepEqual(localMinima([0.4]), []);
    assert.deepEqual(localMinima([]), []);
    // Depth: the shallower side must rise at least minDepth.
    assert.deepEqual(localMinima([0.5, 0.45, 0.6, 0.1, 0.5], { minDepth: 0.1 }), [3]);
    assert.deepEqual(localMinima([0.5, 0.3, 0.3, 0.6], { minDepth: 0.15 }), [1]);
  });

  it("intersects attention candidates with the similarity gate's cuts", () => {
    assert.deepEqual(intersectBoundaries([2, 5, 9], [5, 2, 7, 5]), [2, 5]);
    assert.deepEqual(intersectBoundaries([4, 10], [5, 7, 12]), []);
    assert.deepEqual(intersectBoundaries([4, 10], [5, 7, 12], 1), [5]);
    assert.deepEqual(intersectBoundaries([], [1, 2]), []);
    assert.deepEqual(intersectBoundaries([1, 2], []), []);
    assert.throws(() => intersectBoundaries([1], [1], -1), /tolerance/);
    const r = refineBoundaries([Number.NaN, 0.5, 0.1, 0.6, 0.2, 0.7], [2, 3]);
    assert.deepEqual(r, { candidates: [2, 4], boundaries: [2] });
  });

  it("splits a window between a previous and a current turn", () => {
    assert.deepEqual(pairLengths(5, 7, 30), { prev: 5, cur: 7 });
    assert.deepEqual(pairLengths(40, 7, 30), { prev: 23, cur: 7 });
    assert.deepEqual(pairLengths(5, 40, 30), { prev: 5, cur: 25 });
    assert.deepEqual(pairLengths(40, 40, 30), { prev: 15, cur: 15 });
  });
});

describe("attention boundaries on a generated tiny token classifier", { skip }, () => {
  let dir: string;
  let clf: OnnxTokenClassifier;

  const turns = [
    "I went to the park with my dog yesterday",
    "the dog saw a cat in the park",
    "my new job at the studio is great",
    "",
    "we play music and dance class every week",
    "the painting class was on Monday",
    "unbelievable trip to Paris with my family and friend last month we saw the old city and a very new book about music and the painting studio",
  ];

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "tiny-att-"));
    makeTinyTokenClassifier(dir, ["--seed", "11"]);
  });
  before(async () => {
    clf = await loadTokenClassifier(dir);
  });
  after(async () => {
    await clf?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("returns averaged [n, n] attention for the model's real outputs", async () => {
    const ids = turns[0]!.split(" ").flatMap((w) => clf.wordPieces(w));
    const [one] = await clf.run([ids], { upperLayers: 1 });
    const [both] = await clf.run([ids], { upperLayers: 2 });
    assert.equal(one!.size, ids.length + 2);
    assert.equal(one!.attention!.length, one!.size ** 2);
    assert.notDeepEqual(one!.attention, both!.attention);
    await assert.rejects(clf.run([ids], { upperLayers: 0 }), /upperLayers/);
  });

  it("scores each turn's attention to the previous one: shapes, ranges, determinism", async () => {
    const a = await turnAttentionScores(clf, turns);
    const b = await turnAttentionScores(clf, turns);
    assert.equal(a.length, turns.length);
    assert.deepEqual(a, b);
    // Turn 0 has no predecessor; the empty turn 3 and its successor have no score.
    assert.ok(Number.isNaN(a[0]!) && Number.isNaN(a[3]!) && Number.isNaN(a[4]!));
    for (const i of [1, 2, 5, 6]) assert.ok(a[i]! > 0 && a[i]! < 1, `score ${i} = ${a[i]}`);

    // The same number by hand: one pair through the model and the pure function.
    const p = turns[1]!.split(" ").flatMap((w) => clf.wordPieces(w));
    const c = turns[2]!.split(" ").flatMap((w) => clf.wordPieces(w));
    const [r] = await clf.run([[...p, ...c]], {});
    const manual = previousSpanAttention(r!.attention!, r!.size, [
      { start: 1, end: 1 + p.length },
      { start: 1 + p.length, end: 1 + p.length + c.length },
    ])[1]!;
    assert.ok(close(a[2]!, manual, 1e-6));

    const refined = await attentionBoundaries(clf, turns, [2, 5, 6]);
    assert.deepEqual(refined.scores, a);
    assert.deepEqual(refined.candidates, refineBoundaries(a, []).candidates);
    assert.ok(refined.boundaries.every((x) => [2, 5, 6].includes(x) && refined.candidates.includes(x)));
    assert.deepEqual(await turnAttentionScores(clf, []), []);
    assert.deepEqual((await turnAttentionScores(clf, ["just one"])).length, 1);
  });

  it("refuses attention from a model exported without it", async () => {
    const noAtt = mkdtempSync(join(tmpdir(), "tiny-noatt-"));
    try {
      for (const f of ["model.onnx", "tokenizer.json", "tokenizer_config.json"]) {
        writeFileSync(join(noAtt, f), readFileSync(join(dir, f)));
      }
      const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as Record<string, unknown>;
      writeFileSync(join(noAtt, "manifest.json"), JSON.stringify({ ...manifest, output_attentions: false }));
      const c = await loadTokenClassifier(noAtt);
      try {
        assert.equal(c.hasAttentions, false);
        await assert.rejects(turnAttentionScores(c, turns), /no attention outputs/);
      } finally {
        await c.close();
      }
    } finally {
      rmSync(noAtt, { recursive: true, force: true });
    }
  });
});
