import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Command } from "commander";
import { registerBenchCommands } from "../../services/bench/cli.ts";
import {
  type CompressorBenchReport,
  NO_MODEL_HINT,
  resolveCompressorModel,
  runCompressorBench,
} from "../../services/bench/compressor.ts";
import { loadConfig } from "../../services/core/config.ts";
import { makeTinyTokenClassifier, tinyClassifierSkip } from "../helpers/tiny-token-classifier.ts";

const skip = tinyClassifierSkip;

const dir = mkdtempSync(join(tmpdir(), "bench-compressor-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const session1: [string, string][] = [
  ["Alice", "Hi Bob! Guess what, we adopted a golden retriever puppy last weekend."],
  ["Bob", "No way! What did you name the puppy?"],
  ["Alice", "We named him Biscuit, because of his colour, and he already knows how to sit when we ask."],
  ["Bob", "Speaking of news, I started a new job at a bakery in Lisbon and I make pastel de nata every morning."],
];
const session2: [string, string][] = [
  ["Bob", "Hey Alice, how was your weekend?"],
  ["Alice", "I ran the Berlin marathon on Sunday and finished in four hours, which was really hard for me."],
];

const TURNS = session1.length + session2.length;

const locomoFile = (): string => {
  const toTurns = (n: number, rows: [string, string][]) =>
    rows.map(([speaker, text], i) => ({ speaker, dia_id: `D${n}:${i + 1}`, text }));
  const sample = (id: string) => ({
    sample_id: id,
    conversation: {
      speaker_a: "Alice",
      speaker_b: "Bob",
      session_1_date_time: "1:56 pm on 8 May, 2023",
      session_1: toTurns(1, session1),
      session_2_date_time: "10:00 am on 25 September, 2023",
      session_2: toTurns(2, session2),
    },
    qa: [{ question: "What is the name of Alice's puppy?", answer: "Biscuit", evidence: ["D1:3"], category: 4 }],
  });
  const p = join(dir, "tiny-locomo.json");
  writeFileSync(p, JSON.stringify([sample("tiny-1"), sample("tiny-2")]));
  return p;
};

const readJson = (files: readonly string[]): CompressorBenchReport => {
  const json = files.find((f) => f.endsWith(".json"));
  assert.ok(json, "a JSON report is written");
  return JSON.parse(readFileSync(json, "utf8")) as CompressorBenchReport;
};

describe("bench compressor", () => {
  it("without a model measures the statistical baseline only and says how to point at one", async () => {
    const out = join(dir, "out-baseline");
    const { report, markdown, files } = await runCompressorBench({
      data: locomoFile(),
      conversations: ["tiny-1"],
      keepRate: 0.7,
      repeats: 1,
      out,
    });
    assert.deepEqual(
      report.rows.map((r) => r.system),
      ["statistical"],
    );
    const [row] = report.rows;
    assert.ok(row);
    assert.equal(row.turns, TURNS);
    assert.ok(row.words > 0 && row.tokensIn > 0);
    assert.equal(row.modelTokens, undefined);
    assert.equal(row.ratioToBaseline, 1);
    assert.ok(row.keptRatio > 0 && row.keptRatio <= 1);
    assert.equal(report.config.model, null);
    assert.deepEqual(report.config.conversations, ["tiny-1"]);
    assert.match(report.config.dataSha256, /^[0-9a-f]{64}$/);
    assert.equal(report.hint, NO_MODEL_HINT);
    assert.ok(markdown.includes("--model <dir>"));
    assert.ok(markdown.includes("make_tiny_token_classifier.py"));
    assert.equal(files.length, 2);
    assert.ok(readFileSync(files.find((f) => f.endsWith(".md"))!, "utf8").includes(NO_MODEL_HINT));
    assert.deepEqual(readJson(files), JSON.parse(JSON.stringify(report)));
  });

  it("rejects unknown conversation ids", async () => {
    await assert.rejects(
      runCompressorBench({ data: locomoFile(), conversations: ["nope"], keepRate: 0.7, repeats: 1, out: null }),
      /unknown id\(s\) nope/,
    );
  });

  it("takes the model from --model, else from the configured compressor folder when it exists", () => {
    const config = loadConfig({ dataDir: join(dir, "data"), modelDir: join(dir, "no-models") }, {});
    assert.equal(resolveCompressorModel(config, undefined), undefined);
    assert.deepEqual(resolveCompressorModel(config, "/x/y"), { dir: "/x/y", source: "--model" });
  });

  it("is registered as `bench compressor` with its options", () => {
    const program = new Command();
    registerBenchCommands(program, () => loadConfig({}, {}));
    const cmd = program.commands.find((c) => c.name() === "bench")?.commands.find((c) => c.name() === "compressor");
    assert.ok(cmd, "bench compressor registered");
    const flags = cmd.options.map((o) => o.long);
    for (const f of ["--data", "--conversations", "--model", "--keep-rate", "--batch", "--repeats", "--out"])
      assert.ok(flags.includes(f), `${f} missing`);
  });
});

describe("bench compressor with a tiny ONNX model", { skip }, () => {
  let model = "";
  before(() => {
    model = join(dir, "tiny-clf");
    makeTinyTokenClassifier(model, ["--seed", "7", "--max-len", "32"]);
  });

  it("reports statistical, onnx and onnx-batched rows over the same turns, with ratios to the baseline", async () => {
    const out = join(dir, "out-onnx");
    const { report, markdown, files } = await runCompressorBench({
      data: locomoFile(),
      modelDir: model,
      keepRate: 0.5,
      batch: 4,
      repeats: 1,
      out,
    });
    assert.deepEqual(
      report.rows.map((r) => r.system),
      ["statistical", "onnx", "onnx-batched"],
    );
    const [base, single, batched] = report.rows;
    assert.ok(base && single && batched);
    for (const r of report.rows) {
      assert.equal(r.turns, 2 * TURNS, r.system);
      assert.equal(r.words, base.words, r.system);
      assert.equal(r.tokensIn, base.tokensIn, r.system);
      assert.ok(r.keptRatio > 0 && r.keptRatio <= 1, `${r.system} kept ${r.keptRatio}`);
      assert.ok(r.meanTurnKeptRatio > 0 && r.meanTurnKeptRatio <= 1, `${r.system} mean kept ${r.meanTurnKeptRatio}`);
      assert.ok(Number.isFinite(r.ratioToBaseline) && r.ratioToBaseline > 0, `${r.system} ratio ${r.ratioToBaseline}`);
      assert.ok(r.seconds > 0 && r.turnsPerSecond > 0 && r.tokensPerSecond > 0);
      assert.equal(r.roundSeconds.length, 1);
    }
    assert.equal(base.ratioToBaseline, 1);
    assert.equal(base.modelTokens, undefined);
    assert.ok((single.modelTokens ?? 0) > 0);
    assert.equal(batched.modelTokens, single.modelTokens);
    // Batching changes the speed, never the decisions.
    assert.equal(batched.keptWords, single.keptWords);
    assert.equal(batched.keptRatio, single.keptRatio);

    const m = report.config.model;
    assert.ok(m);
    assert.equal(m.window, 32);
    assert.equal(m.batch, 4);
    assert.deepEqual(m.executionProviders, ["cpu"]);
    assert.ok(m.threads >= 1);
    assert.deepEqual(report.config.conversations, ["tiny-1", "tiny-2"]);
    assert.equal(report.hint, undefined);

    assert.deepEqual(readJson(files), JSON.parse(JSON.stringify(report)));
    const md = readFileSync(files.find((f) => f.endsWith(".md"))!, "utf8");
    assert.equal(md, markdown);
    for (const r of report.rows) assert.match(md, new RegExp(`^\\| ${r.system} \\| ${r.turns} \\|`, "m"));
    assert.ok(md.includes(`${single.ratioToBaseline.toFixed(single.ratioToBaseline < 0.1 ? 4 : 2)}x`));
    assert.ok(!md.includes(NO_MODEL_HINT));
  });
});
