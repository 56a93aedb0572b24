/**
 * The turn attention adapter: how a window is packed (pure), and the real attention.onnx (skipped
 * when models/ lacks it): rows are softmaxes, the shares the TypeScript side computes equal the
 * ones the numpy-verified Python side recorded in attention.json, padding in a batch changes
 * nothing, and a broken manifest names its field.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import {
  fitLengths,
  loadOnnxTurnAttention,
  type OnnxTurnAttention,
  packWindow,
} from "../../services/core/adapters/onnx/attention.ts";
import { previousSpanAttention } from "../../services/segmenter/attention-boundaries.ts";

const MODEL_DIR = fileURLToPath(new URL("../../models/all-MiniLM-L6-v2", import.meta.url));
const present = existsSync(join(MODEL_DIR, "attention.onnx")) && existsSync(join(MODEL_DIR, "attention.json"));
const skip = present ? false : `${MODEL_DIR}/attention.onnx is absent; run \`npm run setup\` to build it`;

describe("window packing", () => {
  it("keeps short turns whole and shares the rest of the window equally", () => {
    assert.deepEqual(fitLengths([3, 4], 10), [3, 4]);
    assert.deepEqual(fitLengths([30, 4], 10), [6, 4]);
    assert.deepEqual(fitLengths([30, 40], 10), [5, 5]);
    assert.deepEqual(fitLengths([30, 40, 2], 11), [4, 5, 2]);
    assert.deepEqual(fitLengths([0, 5], 4), [0, 4]);
    for (const [lens, cap] of [
      [[7, 9, 1, 30], 20],
      [[100, 100], 254],
      [[1, 1, 1], 2],
    ] as const) {
      const got = fitLengths(lens, cap);
      assert.ok(got.reduce((a, b) => a + b, 0) <= cap, `${lens} in ${cap}`);
      for (const [i, g] of got.entries()) assert.ok(g <= lens[i]!);
    }
  });

  it("earlier turns keep their end, the last turn its beginning; spans start after the prefix", () => {
    const { ids, spans } = packWindow(
      [
        [1, 2, 3, 4, 5],
        [6, 7, 8, 9],
      ],
      6,
      1,
    );
    assert.deepEqual(ids, [3, 4, 5, 6, 7, 8]);
    assert.deepEqual(spans, [
      { start: 1, end: 4 },
      { start: 4, end: 7 },
    ]);
  });
});

describe("OnnxTurnAttention (attention.onnx from all-MiniLM-L6-v2)", { skip }, () => {
  let att: OnnxTurnAttention;
  before(async () => {
    att = await loadOnnxTurnAttention(MODEL_DIR);
  });
  after(async () => {
    await att?.close();
  });

  it("reads layers and window from attention.json", () => {
    const manifest = JSON.parse(readFileSync(join(MODEL_DIR, "attention.json"), "utf8")) as {
      layers: number[];
      max_seq_length: number;
    };
    assert.equal(att.capacity, manifest.max_seq_length - 2);
    assert.match(att.id, new RegExp(`layers-${manifest.layers.join("-")}$`));
  });

  it("returns softmax rows and reproduces the shares the numpy-verified build recorded", async () => {
    const manifest = JSON.parse(readFileSync(join(MODEL_DIR, "attention.json"), "utf8")) as {
      verification: { share_on_previous: { same_topic: number; topic_change: number; locomo_like: number } };
    };
    const pairs = [
      ["I adopted a puppy last week, a golden retriever.", "What did you name the puppy? Is it house trained yet?"],
      [
        "I adopted a puppy last week, a golden retriever.",
        "My quarterly tax return is due on Friday and I have not started.",
      ],
      [
        "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
        "Melanie: That sounds amazing, what did they talk about?",
      ],
    ];
    const windows = await att.attend(pairs);
    for (const w of windows) {
      assert.equal(w.attention.length, w.size * w.size);
      assert.equal(w.spans.length, 2);
      for (let r = 0; r < w.size; r++) {
        let sum = 0;
        for (let c = 0; c < w.size; c++) sum += w.attention[r * w.size + c]!;
        assert.ok(Math.abs(sum - 1) < 1e-4, `row ${r} sums to ${sum}`);
      }
    }
    const shares = windows.map((w) => previousSpanAttention(w.attention, w.size, w.spans)[1]!);
    const want = manifest.verification.share_on_previous;
    assert.ok(Math.abs(shares[0]! - want.same_topic) < 1e-4, `${shares[0]} vs ${want.same_topic}`);
    assert.ok(Math.abs(shares[1]! - want.topic_change) < 1e-4, `${shares[1]} vs ${want.topic_change}`);
    assert.ok(Math.abs(shares[2]! - want.locomo_like) < 1e-4, `${shares[2]} vs ${want.locomo_like}`);
  });

  it("gives a window the same numbers alone and padded in a batch; cuts long turns to the window", async () => {
    const short = ["Hi Mel!", "Hey Caroline, long time no see."];
    const long = ["word ".repeat(400), "another ".repeat(400)];
    const [alone] = await att.attend([short]);
    const [batched, cut] = await att.attend([short, long]);
    assert.equal(alone!.size, batched!.size);
    let diff = 0;
    for (let i = 0; i < alone!.attention.length; i++)
      diff = Math.max(diff, Math.abs(alone!.attention[i]! - batched!.attention[i]!));
    assert.ok(diff < 1e-5, `max diff ${diff}`);
    assert.equal(cut!.size, att.capacity + 2);
  });

  it("names the bad field of a broken attention.json", async () => {
    const dir = mkdtempSync(join(tmpdir(), "attn-manifest-"));
    try {
      const manifest = JSON.parse(readFileSync(join(MODEL_DIR, "attention.json"), "utf8")) as Record<string, unknown>;
      writeFileSync(join(dir, "attention.json"), JSON.stringify({ ...manifest, layers: [] }));
      await assert.rejects(loadOnnxTurnAttention(dir), /"layers"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("loadOnnxTurnAttention without the model", () => {
  it("names the setup command", async () => {
    const dir = mkdtempSync(join(tmpdir(), "attn-missing-"));
    try {
      await assert.rejects(loadOnnxTurnAttention(dir), /npm run setup/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
