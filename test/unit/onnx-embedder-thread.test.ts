import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { loadOnnxEmbedder, type OnnxEmbedder } from "../../services/core/adapters/onnx/embedder.ts";
import { loadThreadedOnnxEmbedder, ThreadedOnnxEmbedder } from "../../services/core/adapters/onnx/embedder-thread.ts";

const MODEL_DIR = fileURLToPath(new URL("../../models/all-MiniLM-L6-v2", import.meta.url));
const present = existsSync(join(MODEL_DIR, "manifest.json"));
const skip = present ? false : `model folder ${MODEL_DIR} is absent; run \`npm run setup\` to fetch it`;

describe("ThreadedOnnxEmbedder: the ONNX embedder on a worker thread", { skip }, () => {
  let threaded: ThreadedOnnxEmbedder;
  let inThread: OnnxEmbedder;
  before(async () => {
    [threaded, inThread] = await Promise.all([
      loadThreadedOnnxEmbedder(MODEL_DIR, { threads: 1 }),
      loadOnnxEmbedder(MODEL_DIR, { threads: 1 }),
    ]);
  });
  after(async () => {
    await threaded?.close();
    await inThread?.close();
  });

  it("gives the same vectors as the embedder on the calling thread, in order", async () => {
    const texts = ["Caroline went to the LGBTQ support group.", "", "東京で寿司を食べた 🍣", "a ".repeat(600)];
    const [a, b] = await Promise.all([threaded.embed(texts), inThread.embed(texts)]);
    assert.equal(threaded.dimension, 384);
    assert.equal(threaded.id, inThread.id);
    assert.equal(a.length, texts.length);
    for (const [i, v] of a.entries()) assert.deepEqual(v, b[i], `text ${i}`);
  });

  it("answers concurrent calls each with its own texts, and counts calls and texts", async () => {
    const before = threaded.stats();
    const calls = [["one"], ["two", "three"], []].map((t) => threaded.embed(t));
    const [one, twoThree, none] = await Promise.all(calls);
    const [ref1, ref2, ref3] = await inThread.embed(["one", "two", "three"]);
    assert.deepEqual(one, [ref1]);
    assert.deepEqual(twoThree, [ref2, ref3]);
    assert.deepEqual(none, []);
    const after = threaded.stats();
    assert.equal(after.calls - before.calls, 2, "the empty call never reaches the worker");
    assert.equal(after.texts - before.texts, 3);
  });

  it("counts the model's time once for calls posted together, not each call's wait behind the others", async () => {
    const texts = Array.from(
      { length: 48 },
      (_, i) => `sentence number ${i} about a long day at work and what came after`,
    );
    const before = threaded.stats();
    const started = performance.now();
    await Promise.all([threaded.embed(texts), threaded.embed(texts), threaded.embed(texts)]);
    const wall = performance.now() - started;
    const ms = threaded.stats().ms - before.ms;
    // Each call's time counted from when the worker got it would include the calls ahead of it in
    // the queue: about twice the wall time for three equal calls.
    assert.ok(ms > 0, "the model's time is counted");
    assert.ok(ms <= wall, `model time ${ms.toFixed(1)} ms within the ${wall.toFixed(1)} ms the three calls took`);
  });

  it("lets the event loop run while the worker embeds", async () => {
    // On the calling thread a pass holds the event loop until it ends; here a timer fires meanwhile.
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    try {
      await threaded.embed(Array.from({ length: 64 }, (_, i) => `sentence number ${i} about a long day at work`));
    } finally {
      clearInterval(timer);
    }
    assert.ok(ticks > 0, "timers ran during the embedding");
  });

  it("rejects calls after close", async () => {
    const own = await loadThreadedOnnxEmbedder(MODEL_DIR, { threads: 1 });
    await own.close();
    await assert.rejects(own.embed(["x"]), /embedder is closed/);
    await own.close(); // twice is fine
  });
});

describe("ThreadedOnnxEmbedder: a model folder that is not there", () => {
  it("fails to load with the loader's own message (the setup hint)", async () => {
    const empty = mkdtempSync(join(tmpdir(), "no-model-"));
    try {
      await assert.rejects(loadThreadedOnnxEmbedder(empty), /setup/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

describe("ThreadedOnnxEmbedder: a worker thread that dies", () => {
  it("tells its owner once, before the calls in flight are rejected, and refuses later calls", async () => {
    // A real worker thread that exits on its first request, as one whose model crashed would.
    const worker = new Worker("require('node:worker_threads').parentPort.once('message', () => process.exit(7));", {
      eval: true,
    });
    const seen: string[] = [];
    const embedder = new ThreadedOnnxEmbedder(worker, "test", 3, "fp32", 8, 4, (err) => {
      seen.push(`failure: ${err.message}`);
    });
    const call = embedder.embed(["a"]).catch((err: Error) => {
      seen.push(`rejected: ${err.message}`);
    });
    await call;
    assert.deepEqual(seen, [
      "failure: embedder worker thread exited (code 7)",
      "rejected: embedder worker thread exited (code 7)",
    ]);
    await assert.rejects(embedder.embed(["b"]), /exited \(code 7\)/);
    assert.equal(seen.length, 2, "the owner is told once");
  });
});
