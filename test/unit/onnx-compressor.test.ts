import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import {
  loadTokenClassifier,
  type OnnxTokenClassifier,
  parseTokenClassifierManifest,
} from "../../services/core/adapters/onnx/token-classifier.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { TokenClassifier } from "../../services/core/ports.ts";
import {
  aggregateWordProbabilities,
  forcedWords,
  OnnxCompressor,
  planWindows,
  selectByQuantile,
  splitWords,
} from "../../services/sensory/onnx-compressor.ts";
import { loadOnnxCompressor, openConfiguredCompressor } from "../../services/sensory/onnx-compressor-config.ts";
import { StatisticalCompressor } from "../../services/sensory/statistical-compressor.ts";
import { makeTinyTokenClassifier, tinyClassifierSkip } from "../helpers/tiny-token-classifier.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const skip = tinyClassifierSkip;

/** Lowercase words that are one vocabulary piece each and never force-kept. */
const PLAIN =
  "the dog went to the park and we saw a cat with my friend so it was really very happy about that new book and music".split(
    " ",
  );
const plainText = (n: number, offset = 0): string =>
  Array.from({ length: n }, (_, i) => PLAIN[(i * 7 + offset) % PLAIN.length]).join(" ");

const isSubsequence = (sub: readonly string[], of: readonly string[]): boolean => {
  let j = 0;
  for (const w of sub) {
    while (j < of.length && of[j] !== w) j++;
    if (j === of.length) return false;
    j++;
  }
  return true;
};

describe("pure parts of the ONNX compressor", () => {
  it("aggregates sub-token probabilities to words by mean, first or max", () => {
    // words 0..2; word 1 has three pieces, word 2 none.
    const probs = [0.9, 0.2, 0.8, 0.5];
    const wordOf = [10, 11, 11, 11];
    assert.deepEqual(aggregateWordProbabilities(probs, wordOf, 10, 3, "mean"), [0.9, 0.5, 0]);
    assert.deepEqual(aggregateWordProbabilities(probs, wordOf, 10, 3, "first"), [0.9, 0.2, 0]);
    assert.deepEqual(aggregateWordProbabilities(probs, wordOf, 10, 3, "max"), [0.9, 0.8, 0]);
    assert.throws(() => aggregateWordProbabilities([0.1], [3], 0, 2, "mean"), /outside/);
  });

  it("keeps the ceil(r*n) most probable words, force-kept words first, ties by position", () => {
    const probs = [0.1, 0.9, 0.5, 0.5, 0.3, 0.7];
    const none = probs.map(() => false);
    assert.deepEqual(selectByQuantile(probs, none, 0.5), [false, true, true, false, false, true]);
    assert.deepEqual(selectByQuantile(probs, none, 0.33), [false, true, false, false, false, true]);
    // Forced words count towards the quota and always survive, even beyond it.
    const forced = [true, false, false, false, true, false];
    assert.deepEqual(selectByQuantile(probs, forced, 0.5), [true, true, false, false, true, false]);
    assert.deepEqual(selectByQuantile(probs, forced, 0.1), [true, false, false, false, true, false]);
    assert.deepEqual(
      selectByQuantile(probs, none, 1),
      probs.map(() => true),
    );
    assert.deepEqual(selectByQuantile([], [], 0.5), []);
    // At least one word survives.
    assert.equal(selectByQuantile([0.2, 0.1], [false, false], 0.01).filter(Boolean).length, 1);
  });

  it("plans greedy word-boundary windows and truncates a word longer than a window", () => {
    const pieces = [[1, 2], [3], [4, 5, 6], [], [7], [8, 9, 10, 11, 12, 13]];
    const ws = planWindows(pieces, 4);
    assert.deepEqual(
      ws.map((w) => [w.start, w.end, w.ids, w.wordOf]),
      [
        [0, 2, [1, 2, 3], [0, 0, 1]],
        [2, 5, [4, 5, 6, 7], [2, 2, 2, 4]],
        [5, 6, [8, 9, 10, 11], [5, 5, 5, 5]],
      ],
    );
    assert.deepEqual(planWindows([], 4), []);
    assert.throws(() => planWindows(pieces, 0), /capacity/);
  });

  it("force-keeps numbers, dates and capitalised names not at a sentence start", () => {
    assert.deepEqual(forcedWords(splitWords("We met Jon on May 7. Then we left")), [
      false,
      false,
      true,
      false,
      true,
      true,
      false,
      false,
      false,
    ]);
    // A negation or a condition too: the model's scores for "not" and "if" are low, and dropping
    // either turns the statement around.
    assert.deepEqual(forcedWords(splitWords("I'm not giving up, I won't")), [false, true, false, false, false, true]);
    assert.deepEqual(forcedWords(splitWords("we go if it rains")), [false, false, true, false, false]);
  });

  it("validates the manifest, naming the bad field", () => {
    const ok = parseTokenClassifierManifest({ name: "m", max_seq_length: 512 }, "x");
    assert.equal(ok.keep_label, 1);
    assert.equal(ok.num_labels, 2);
    assert.equal(ok.logits_output, "logits");
    assert.equal(ok.word_aggregation, "mean");
    assert.equal(ok.output_attentions, false);
    assert.throws(() => parseTokenClassifierManifest({ name: "m" }, "x"), /max_seq_length/);
    assert.throws(
      () => parseTokenClassifierManifest({ name: "m", max_seq_length: 8, keep_label: 2 }, "x"),
      /keep_label/,
    );
    assert.throws(
      () => parseTokenClassifierManifest({ name: "m", max_seq_length: 8, word_aggregation: "median" }, "x"),
      /word_aggregation/,
    );
    assert.throws(
      () => parseTokenClassifierManifest({ name: "m", max_seq_length: 8, attention_outputs: [1] }, "x"),
      /attention_outputs/,
    );
  });

  it("runs over any TokenClassifier (the port), here a fake that keeps words by length", async () => {
    // One piece per word (its length), keep probability = length / 10; a window of 4 pieces.
    const calls: number[][] = [];
    const fake: TokenClassifier = {
      name: "fake",
      capacity: 4,
      prefixLength: 1,
      aggregation: "mean",
      hasAttentions: false,
      wordPieces: (word) => [word.length],
      run: async (sequences) => {
        calls.push(sequences.map((s) => s.length));
        return sequences.map((s) => ({ keep: Float32Array.from(s, (n) => n / 10), size: s.length + 2 }));
      },
      close: async () => {},
    };
    const c = new OnnxCompressor(fake);
    assert.equal(c.id, "onnx:fake:mean");
    const r = await c.compress("a bbbb cc dddddd e ff ggg hhhhh", 0.5);
    // Two windows of 4 words; each keeps its 2 longest words.
    assert.equal(r.text, "bbbb dddddd ggg hhhhh");
    assert.equal(r.keptRatio, 0.5);
    assert.deepEqual(calls, [[4, 4]]);
  });

  it("configures the statistical compressor by default", () => {
    const c = loadConfig({}, {});
    assert.deepEqual(c.sensory.compressor, {
      kind: "auto",
      modelDir: "llmlingua-2-bert-base-multilingual-cased-meetingbank",
      executionProvider: "cpu",
    });
    const env = loadConfig(
      {},
      { MEMORY_COMPRESSOR: "onnx", MEMORY_COMPRESSOR_EP: "cuda", MEMORY_COMPRESSOR_DIR: "/m" },
    );
    assert.deepEqual(env.sensory.compressor, { kind: "onnx", modelDir: "/m", executionProvider: "cuda" });
    assert.throws(() => loadConfig({}, { MEMORY_COMPRESSOR: "gpt" }), /sensory\.compressor\.kind/);
  });
});

describe("OnnxCompressor on a generated tiny token classifier", { skip }, () => {
  let dir: string;
  let classifier: OnnxTokenClassifier;
  let compressor: OnnxCompressor;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "tiny-clf-"));
    makeTinyTokenClassifier(dir, ["--seed", "7", "--max-len", "32"]);
  });
  before(async () => {
    classifier = await loadTokenClassifier(dir, { batchSize: 16 });
    compressor = new OnnxCompressor(classifier);
  });
  after(async () => {
    await classifier?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("reads the window from the manifest and returns one keep probability per content token", async () => {
    assert.equal(classifier.maxLength, 32);
    assert.equal(classifier.capacity, 30);
    assert.equal(classifier.hasAttentions, true);
    assert.equal(compressor.id, "onnx:tiny-token-classifier:mean");
    const seqs = [[10, 11, 12], [], Array.from({ length: 30 }, (_, i) => 5 + i)];
    const out = await classifier.run(seqs);
    assert.deepEqual(
      out.map((o) => [o.keep.length, o.size, o.attention]),
      [
        [3, 5, undefined],
        [0, 2, undefined],
        [30, 32, undefined],
      ],
    );
    for (const o of out) for (const p of o.keep) assert.ok(p > 0 && p < 1);
    const withAtt = await classifier.run(seqs, { upperLayers: 2 });
    for (const o of withAtt) {
      assert.equal(o.attention?.length, o.size * o.size);
      for (let r = 0; r < o.size; r++) {
        let s = 0;
        for (let c = 0; c < o.size; c++) s += o.attention![r * o.size + c]!;
        assert.ok(Math.abs(s - 1) < 1e-4, `attention row ${r} sums to ${s}`);
      }
    }
    await assert.rejects(classifier.run([Array.from({ length: 31 }, () => 5)]), /exceeds the model window/);
  });

  it("keeps about r of the words, the most probable ones, and always the force-kept ones", async () => {
    const text = plainText(24);
    const words = splitWords(text);
    const [probsRun] = await classifier.run([words.flatMap((w) => classifier.wordPieces(w))]);
    const probs = Array.from(probsRun!.keep); // one piece per word here
    assert.equal(probs.length, words.length);
    for (const r of [0.3, 0.5, 0.7]) {
      const res = await compressor.compress(text, r);
      const kept = splitWords(res.text);
      assert.equal(kept.length, Math.ceil(r * words.length));
      assert.equal(res.keptRatio, kept.length / words.length);
      // Thresholding: every kept word is at least as probable as every dropped one.
      const flags = selectByQuantile(probs, forcedWords(words), r);
      const keptP = probs.filter((_, i) => flags[i]);
      const droppedP = probs.filter((_, i) => !flags[i]);
      assert.ok(Math.min(...keptP) >= Math.max(...droppedP));
      assert.deepEqual(
        kept,
        words.filter((_, i) => flags[i]),
      );
    }
    const withForced = "the dog met Jon and Gina at the park on Monday 12 of May in 2023 so it was great";
    const res = await compressor.compress(withForced, 0.1);
    for (const w of ["Jon", "Gina", "Monday", "12", "May", "2023"]) assert.ok(splitWords(res.text).includes(w), w);
    // Across many windows the kept share stays about r.
    const long = plainText(200, 3);
    const share = (await compressor.compress(long, 0.5)).keptRatio;
    assert.ok(share >= 0.5 && share < 0.56, `kept share ${share}`);
  });

  it("keeps or drops a multi-sub-token word whole, from the mean of its pieces", async () => {
    const text = "unbelievable playing the dog went to the park played unbelievable 20230507 we saw a cat";
    const words = splitWords(text);
    const pieces = words.map((w) => classifier.wordPieces(w));
    assert.ok(pieces.filter((p) => p.length > 1).length >= 4);
    const [run] = await classifier.run([pieces.flat()]);
    const wordOf = pieces.flatMap((p, i) => p.map(() => i));
    for (const mode of ["mean", "first", "max"] as const) {
      const c = new OnnxCompressor(classifier, { aggregation: mode });
      const res = await c.compress(text, 0.5);
      const kept = splitWords(res.text);
      assert.ok(isSubsequence(kept, words), `${mode}: ${res.text}`);
      const probs = aggregateWordProbabilities(run!.keep, wordOf, 0, words.length, mode);
      const flags = selectByQuantile(probs, forcedWords(words), 0.5);
      assert.deepEqual(
        kept,
        words.filter((_, i) => flags[i]),
        mode,
      );
    }
  });

  it("compresses an input 5x the window window by window, in order", async () => {
    const text = `${plainText(60)} 42 ${plainText(60, 5)} 7 ${plainText(30, 2)}`;
    const { words, windows } = compressor.windows(text);
    assert.ok(windows.length >= 5, `${windows.length} windows`);
    assert.equal(windows[0]!.start, 0);
    assert.equal(windows.at(-1)!.end, words.length);
    for (let i = 1; i < windows.length; i++) assert.equal(windows[i]!.start, windows[i - 1]!.end);
    for (const w of windows) assert.ok(w.ids.length <= classifier.capacity);
    const whole = await compressor.compress(text, 0.4);
    const parts: string[] = [];
    for (const w of windows) {
      const sub = words.slice(w.start, w.end).join(" ");
      assert.equal(compressor.windows(sub).windows.length, 1);
      parts.push((await compressor.compress(sub, 0.4)).text);
    }
    assert.equal(whole.text, parts.join(" "));
    assert.ok(splitWords(whole.text).includes("42") && splitWords(whole.text).includes("7"));
  });

  it("gives the same result batched as one by one", async () => {
    const texts = [plainText(10), plainText(70, 1), "we met Jon in Paris", plainText(3, 4), "", plainText(31, 2)];
    const single: string[] = [];
    for (const t of texts) single.push((await compressor.compress(t, 0.5)).text);
    const many = await compressor.compressMany(texts, 0.5);
    assert.deepEqual(
      many.map((r) => r.text),
      single,
    );
    const concurrent = await Promise.all(texts.map((t) => compressor.compress(t, 0.5)));
    assert.deepEqual(
      concurrent.map((r) => r.text),
      single,
    );
    // Batch size 1 (one window per session.run) vs 16: the same probabilities.
    const one = await loadTokenClassifier(dir, { batchSize: 1 });
    try {
      const seqs = texts.flatMap((t) => compressor.windows(t).windows.map((w) => w.ids));
      const a = await one.run(seqs);
      const b = await classifier.run(seqs);
      a.forEach((x, i) => {
        x.keep.forEach((p, j) => {
          assert.ok(Math.abs(p - b[i]!.keep[j]!) < 1e-5);
        });
      });
      assert.deepEqual(
        (await new OnnxCompressor(one).compressMany(texts, 0.5)).map((r) => r.text),
        single,
      );
    } finally {
      await one.close();
    }
  });

  it("handles empty and degenerate inputs", async () => {
    assert.deepEqual(await compressor.compress("", 0.5), { text: "", keptRatio: 1 });
    assert.deepEqual(await compressor.compress("  \n\t ", 0.5), { text: "  \n\t ", keptRatio: 1 });
    assert.deepEqual(await compressor.compress("dog", 0.1), { text: "dog", keptRatio: 1 });
    const t = plainText(12);
    assert.deepEqual(await compressor.compress(t, 1), { text: t, keptRatio: 1 });
    // Characters outside the vocabulary ([UNK]), punctuation only, a zero-width word, and a word
    // longer than the whole window.
    const odd = `café ☃ !!! ... \u200b ${"ab".repeat(40)} the dog`;
    const res = await compressor.compress(odd, 0.5);
    assert.ok(res.text.length > 0);
    assert.ok(isSubsequence(splitWords(res.text), splitWords(odd)));
    // The over-long word is a window of its own; the quota is per window.
    const { windows } = compressor.windows(odd);
    assert.equal(windows.length, 3);
    const quota = windows.reduce((n, w) => n + Math.ceil(0.5 * (w.end - w.start)), 0);
    assert.equal(splitWords(res.text).length, quota);
    await assert.rejects(compressor.compress("the dog", 0), /keepRate/);
  });

  it("fails loudly when CUDA is asked for and unavailable", async (t) => {
    const bin = join(ROOT, "node_modules/onnxruntime-node/bin");
    const cudaInstalled = existsSync(bin) && JSON.stringify(readdirSync(bin, { recursive: true })).includes("cuda");
    if (cudaInstalled) {
      t.skip("a CUDA-enabled onnxruntime is installed: CUDA is available, nothing to refuse");
      return;
    }
    await assert.rejects(
      loadTokenClassifier(dir, { executionProviders: ["cuda", "cpu"] }),
      /CUDA execution provider requested .* but unavailable/,
    );
    await assert.rejects(loadOnnxCompressor(dir, { executionProviders: ["cuda"] }), /CUDA execution provider/);
  });

  it("is picked by configuration: auto when the model is present, onnx required, statistical otherwise", async () => {
    const auto = await openConfiguredCompressor({ kind: "auto", modelDir: dir, executionProvider: "cpu" }, "/nowhere");
    assert.ok(auto.compressor instanceof OnnxCompressor);
    assert.equal((await auto.compressor.compress(plainText(10), 0.5)).keptRatio, 0.5);
    await auto.close();
    const missing = join(dir, "absent");
    const fallback = await openConfiguredCompressor(
      { kind: "auto", modelDir: "absent", executionProvider: "cpu" },
      dir,
    );
    assert.ok(fallback.compressor instanceof StatisticalCompressor);
    await assert.rejects(
      openConfiguredCompressor({ kind: "onnx", modelDir: missing, executionProvider: "cpu" }, dir),
      /manifest\.json is missing/,
    );
    const stat = await openConfiguredCompressor({ kind: "statistical", modelDir: dir, executionProvider: "cpu" }, "/");
    assert.ok(stat.compressor instanceof StatisticalCompressor);
  });

  it("rejects a model folder whose manifest names a missing output", async () => {
    const bad = mkdtempSync(join(tmpdir(), "tiny-bad-"));
    try {
      for (const f of ["model.onnx", "tokenizer.json", "tokenizer_config.json"]) {
        writeFileSync(join(bad, f), readFileSync(join(dir, f)));
      }
      const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as Record<string, unknown>;
      writeFileSync(join(bad, "manifest.json"), JSON.stringify({ ...manifest, logits_output: "scores" }));
      await assert.rejects(loadTokenClassifier(bad), /no output "scores"/);
      await assert.rejects(loadTokenClassifier(join(bad, "nothing")), /Token classifier not found/);
    } finally {
      rmSync(bad, { recursive: true, force: true });
    }
  });
});
