import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { lengthBatches, loadOnnxEmbedder, type OnnxEmbedder } from "../../services/core/adapters/onnx/embedder.ts";

const MODEL_DIR = fileURLToPath(new URL("../../models/all-MiniLM-L6-v2", import.meta.url));
const present = existsSync(join(MODEL_DIR, "manifest.json"));
const skip = present ? false : `model folder ${MODEL_DIR} is absent; run \`npm run setup\` to fetch it`;

const dot = (a: Float32Array, b: Float32Array): number => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
};
const maxAbsDiff = (a: Float32Array, b: Float32Array): number => {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};

describe("lengthBatches: forward passes of texts of similar length", () => {
  const of = (...lengths: number[]) => lengths.map((n) => ({ ids: Array.from({ length: n }, () => 1) }));
  const shape = (batches: { ids: number[] }[][]) => batches.map((b) => b.map((e) => e.ids.length));

  it("starts a pass once a text is under three quarters of the pass's longest, or at batchSize", () => {
    assert.deepEqual(shape(lengthBatches(of(100, 90, 76, 75, 40, 31, 30, 29, 28), 32)), [
      [100, 90, 76, 75],
      [40, 31, 30],
      [29, 28],
    ]);
    assert.deepEqual(shape(lengthBatches(of(10, 10, 10, 10, 10), 2)), [[10, 10], [10, 10], [10]]);
    assert.deepEqual(lengthBatches([], 8), []);
  });

  it("pads at most a quarter of each pass", () => {
    const lengths = Array.from({ length: 200 }, (_, i) => 3 + ((i * 37) % 120)).sort((a, b) => b - a);
    for (const batch of lengthBatches(of(...lengths), 32)) {
      const longest = batch[0]?.ids.length ?? 0;
      const real = batch.reduce((n, e) => n + e.ids.length, 0);
      assert.ok(real >= 0.75 * longest * batch.length, `${real} real tokens in a ${batch.length} × ${longest} pass`);
    }
  });
});

describe("OnnxEmbedder (all-MiniLM-L6-v2 on onnxruntime-node)", { skip }, () => {
  let emb: OnnxEmbedder;

  before(async () => {
    emb = await loadOnnxEmbedder(MODEL_DIR);
  });
  after(async () => {
    await emb?.close();
  });

  it("reads dimension 384 from the model and settings from the manifest", () => {
    const manifest = JSON.parse(readFileSync(join(MODEL_DIR, "manifest.json"), "utf8")) as {
      max_seq_length: number;
      default_variant: string;
    };
    assert.equal(emb.dimension, 384);
    assert.equal(emb.maxLength, manifest.max_seq_length);
    assert.equal(emb.maxLength, 256);
    assert.equal(emb.variant, manifest.default_variant);
    assert.match(emb.id, /^onnx:all-MiniLM-L6-v2:(fp32|int8)$/);
  });

  it("returns unit-norm vectors of the model dimension, including for the empty string", async () => {
    const vs = await emb.embed(["Hello world.", "", "   ", "Café crème in Zürich"]);
    assert.equal(vs.length, 4);
    for (const v of vs) {
      assert.equal(v.length, 384);
      assert.ok(Math.abs(Math.sqrt(dot(v, v)) - 1) < 1e-5);
      assert.ok(v.every(Number.isFinite));
    }
  });

  it("is batch invariant and keeps input order", async () => {
    const texts = [
      "The meeting moved to Thursday.",
      "Short.",
      "A considerably longer sentence about the quarterly budget, the design review and the travel plans of the team.",
      "",
      "Sarah is flying to Berlin for the conference next week.",
    ];
    const batched = await emb.embed(texts);
    for (let i = 0; i < texts.length; i++) {
      const [alone] = await emb.embed([texts[i]!]);
      assert.ok(maxAbsDiff(alone!, batched[i]!) < 1e-4, `text ${i} differs alone vs in batch`);
    }
    const reversed = await emb.embed([...texts].reverse());
    for (let i = 0; i < texts.length; i++) {
      assert.ok(maxAbsDiff(reversed[texts.length - 1 - i]!, batched[i]!) < 1e-4);
    }
  });

  it("splits into batches of batchSize without changing results", async () => {
    const small = await loadOnnxEmbedder(MODEL_DIR, { batchSize: 2, threads: 1 });
    try {
      const texts = ["one", "two words", "three little words", "a b c d e f", "", "last one here."];
      const a = await small.embed(texts);
      const b = await emb.embed(texts);
      for (let i = 0; i < texts.length; i++) assert.ok(maxAbsDiff(a[i]!, b[i]!) < 1e-4);
    } finally {
      await small.close();
    }
  });

  it("orders meanings sensibly", async () => {
    const [food, bread, baby, pasta, horse] = await emb.embed([
      "A man is eating food.",
      "A man is eating a piece of bread.",
      "The girl is carrying a baby.",
      "A man is eating pasta.",
      "A man is riding a horse.",
    ]);
    assert.ok(dot(food!, bread!) > dot(food!, baby!) + 0.3);
    assert.ok(dot(pasta!, food!) > dot(pasta!, horse!) + 0.3);
    // The sentence-transformers documentation's scores for this model (semantic search example).
    assert.ok(Math.abs(dot(pasta!, food!) - 0.7035) < 0.02);
    assert.ok(Math.abs(dot(pasta!, bread!) - 0.5272) < 0.02);
  });

  it("truncates very long input to the manifest max length without throwing", async () => {
    const sentence = "Streaming memory keeps long agent conversations searchable over many sessions. ";
    const long = sentence.repeat(2000); // ~160k characters, far over 256 tokens
    const ids = emb.tokenIds(long);
    assert.equal(ids.length, 256);
    const specials = emb.tokenIds("");
    assert.equal(ids[0], specials[0]); // [CLS]
    assert.equal(ids[255], specials[1]); // [SEP]
    // The prefix shortcut yields exactly the tokens of full tokenisation.
    assert.deepEqual(ids, emb.tokenIds(sentence.repeat(40)));
    const [v] = await emb.embed([long]);
    assert.ok(Math.abs(Math.sqrt(dot(v!, v!)) - 1) < 1e-5);
    const [w] = await emb.embed([sentence.repeat(40)]);
    assert.ok(maxAbsDiff(v!, w!) < 1e-4);
  });

  it("lower-cases and strips accents as the tokenizer.json normaliser says", () => {
    assert.deepEqual(emb.tokenIds("CAFÉ Zürich"), emb.tokenIds("cafe zurich"));
  });

  it("counts calls, texts and time", async () => {
    const before = emb.stats();
    await emb.embed(["a", "b", "c"]);
    await emb.embed([]);
    const after = emb.stats();
    assert.equal(after.calls - before.calls, 2);
    assert.equal(after.texts - before.texts, 3);
    assert.ok(after.ms >= before.ms);
  });

  it("serves concurrent embed() calls", async () => {
    const texts = ["first call", "second call", "third call"];
    const results = await Promise.all(texts.map((t) => emb.embed([t])));
    const together = await emb.embed(texts);
    results.forEach(([v], i) => {
      assert.ok(maxAbsDiff(v!, together[i]!) < 1e-4);
    });
  });

  it("int8 variant stays close to fp32", async () => {
    const fp32 = await loadOnnxEmbedder(MODEL_DIR, { variant: "fp32" });
    const int8 = await loadOnnxEmbedder(MODEL_DIR, { variant: "int8" });
    try {
      assert.equal(int8.dimension, 384);
      const texts = ["The meeting moved to Thursday afternoon.", "Sarah prefers tea over coffee."];
      const a = await fp32.embed(texts);
      const b = await int8.embed(texts);
      for (let i = 0; i < texts.length; i++) assert.ok(dot(a[i]!, b[i]!) > 0.97);
    } finally {
      await fp32.close();
      await int8.close();
    }
  });
});

describe("loadOnnxEmbedder errors", () => {
  it("names the setup command when the model folder is missing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "no-model-"));
    try {
      await assert.rejects(loadOnnxEmbedder(join(dir, "all-MiniLM-L6-v2")), /npm run setup/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
