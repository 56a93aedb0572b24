/**
 * `memory bench compressor`: speed and kept share of the sensory compressors on LoCoMo turns, the
 * statistical default as the baseline in the same process. Systems run interleaved (A B C A B C
 * ...) for `repeats` rounds; each system's median round is reported, with its throughput as a
 * ratio to the baseline's, because the machines are noisy and only same-run ratios compare.
 *
 *   statistical   StatisticalCompressor.compress, one turn per call (the baseline)
 *   onnx          OnnxCompressor.compress, one turn per call (how the engine calls it)
 *   onnx-batched  OnnxCompressor.compressMany, one call per conversation (windows share runs)
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import {
  DEFAULT_BATCH,
  DEFAULT_THREADS,
  type ExecutionProvider,
  loadTokenClassifier,
} from "../core/adapters/onnx/token-classifier.ts";
import type { Config } from "../core/config.ts";
import { loadLocomo } from "../core/datasets/locomo.ts";
import type { CompressionResult, Compressor } from "../core/ports.ts";
import { countTokens } from "../core/tokens.ts";
import { OnnxCompressor, splitWords } from "../sensory/onnx-compressor.ts";
import { compressorModelDir } from "../sensory/onnx-compressor-config.ts";
import { StatisticalCompressor } from "../sensory/statistical-compressor.ts";
import { locomoCases } from "./datasets.ts";
import { runEnvironment, select, writeReportFiles } from "./run.ts";
import { fmt, fmtInt, markdownTable } from "./table.ts";

export const COMPRESSOR_SYSTEMS = ["statistical", "onnx", "onnx-batched"] as const;
export type CompressorSystem = (typeof COMPRESSOR_SYSTEMS)[number];

export const NO_MODEL_HINT =
  "No token-classifier model: only the statistical baseline was measured. Point at a model folder with `--model <dir>` (docs/compressor.md explains the LLMLingua-2 export; `infra/models/make_tiny_token_classifier.py` makes random-weight shape proxies).";

export interface CompressorBenchOptions {
  /** LoCoMo-format file. */
  data: string;
  /** Sample ids (default all in the file). */
  conversations?: readonly string[];
  /** Token-classifier folder (manifest.json, model, tokenizer); absent: baseline only. */
  modelDir?: string;
  /** Where modelDir came from, for the report ("--model", "config"). */
  modelSource?: string;
  keepRate: number;
  /** Sequences per session.run (default the classifier's, 16). */
  batch?: number;
  /** intra-op threads of the ONNX session (default 2). */
  threads?: number;
  executionProvider?: ExecutionProvider;
  /** Interleaved rounds; the median round is reported (default 3). */
  repeats?: number;
  /** Output folder; null writes nothing. */
  out: string | null;
  /** Progress lines (one per round). */
  log?: (line: string) => void;
}

export interface CompressorRow {
  system: CompressorSystem;
  /** The compressor's id. */
  compressor: string;
  turns: number;
  words: number;
  /** o200k tokens of the input turns (the same for every row). */
  tokensIn: number;
  /** The classifier's content sub-tokens over all windows (ONNX rows only). */
  modelTokens?: number;
  /** The median round's seconds. */
  seconds: number;
  /** Every round's seconds, in order. */
  roundSeconds: number[];
  turnsPerSecond: number;
  /** o200k input tokens per second. */
  tokensPerSecond: number;
  modelTokensPerSecond?: number;
  keptWords: number;
  /** Words kept / words, over all turns. */
  keptRatio: number;
  /** Mean over turns with words of the turn's words kept / words. */
  meanTurnKeptRatio: number;
  /** This row's throughput / the statistical baseline's (1 for the baseline). */
  ratioToBaseline: number;
}

export interface CompressorBenchReport {
  config: {
    bench: "compressor";
    dataFile: string;
    dataSha256: string;
    conversations: string[];
    keepRate: number;
    repeats: number;
    model: {
      dir: string;
      source: string;
      name: string;
      window: number;
      capacity: number;
      aggregation: string;
      batch: number;
      threads: number;
      executionProviders: string[];
    } | null;
    gitCommit: string | null;
    gitDirty: boolean | null;
    date: string;
    node: string;
    cpus: number;
    /** os.loadavg() before and after the timed rounds: how busy the machine was. */
    loadAverage: { before: number[]; after: number[] };
    wallSeconds: number;
  };
  rows: CompressorRow[];
  /** Present when no model was measured. */
  hint?: string;
}

export interface CompressorBenchRun {
  report: CompressorBenchReport;
  markdown: string;
  files: string[];
}

/**
 * The model folder to measure: the --model flag, else config.sensory.compressor's folder when it
 * holds a manifest.json; undefined when neither.
 */
export const resolveCompressorModel = (
  config: Config,
  flag: string | undefined,
): { dir: string; source: string } | undefined => {
  if (flag !== undefined) return { dir: resolve(flag), source: "--model" };
  const dir = compressorModelDir(config.sensory.compressor, config.modelDir);
  return existsSync(join(dir, "manifest.json"))
    ? { dir: resolve(dir), source: "config sensory.compressor.modelDir" }
    : undefined;
};

/** Median of the values, the lower middle one for an even count (always a measured round). */
const medianRound = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
};

interface Conversation {
  id: string;
  texts: string[];
}

type Runner = (conversations: readonly Conversation[]) => Promise<CompressionResult[]>;

const WARMUP_TURNS = 16;

/** One `compress` call per turn, as the engine calls a compressor. */
const turnByTurn =
  (compressor: Compressor, keepRate: number): Runner =>
  async (conversations) => {
    const out: CompressionResult[] = [];
    for (const c of conversations) for (const t of c.texts) out.push(await compressor.compress(t, keepRate));
    return out;
  };

/** Loads the turns, runs the systems interleaved and writes the markdown and JSON reports. */
export const runCompressorBench = async (options: CompressorBenchOptions): Promise<CompressorBenchRun> => {
  const started = performance.now();
  const repeats = options.repeats ?? 3;
  if (!Number.isInteger(repeats) || repeats < 1) throw new Error(`repeats must be a positive integer, got ${repeats}`);
  const keepRate = options.keepRate;
  if (!(keepRate > 0 && keepRate <= 1)) throw new Error(`keep rate must be in (0, 1], got ${keepRate}`);
  const dataFile = resolve(options.data);
  const bytes = readFileSync(dataFile);
  const chosen = select(locomoCases(loadLocomo(dataFile)).cases, options.conversations, undefined);
  const conversations: Conversation[] = chosen.map((c) => ({ id: c.id, texts: c.turns.map((t) => t.text) }));
  const texts = conversations.flatMap((c) => c.texts);
  if (texts.length === 0) throw new Error(`no turns to compress in ${dataFile}`);
  const wordsPerTurn = texts.map((t) => splitWords(t).length);
  const words = wordsPerTurn.reduce((a, b) => a + b, 0);
  const tokensIn = texts.reduce((n, t) => n + countTokens(t), 0);

  const statistical = new StatisticalCompressor();
  const runners: { system: CompressorSystem; compressor: string; run: Runner; modelTokens?: number }[] = [
    {
      system: "statistical",
      compressor: statistical.id,
      run: turnByTurn(statistical, keepRate),
    },
  ];

  let onnx: OnnxCompressor | undefined;
  let model: CompressorBenchReport["config"]["model"] = null;
  try {
    if (options.modelDir !== undefined) {
      const threads = options.threads ?? DEFAULT_THREADS;
      const executionProviders: ExecutionProvider[] = options.executionProvider === "cuda" ? ["cuda", "cpu"] : ["cpu"];
      const classifier = await loadTokenClassifier(options.modelDir, {
        executionProviders,
        threads,
        batchSize: options.batch ?? DEFAULT_BATCH,
      });
      const compressor = new OnnxCompressor(classifier, { ownsClassifier: true });
      onnx = compressor;
      model = {
        dir: resolve(options.modelDir),
        source: options.modelSource ?? "--model",
        name: classifier.name,
        window: classifier.maxLength,
        capacity: classifier.capacity,
        aggregation: compressor.aggregation,
        batch: classifier.batchSize,
        threads,
        executionProviders: [...classifier.executionProviders],
      };
      // Counted outside the timed rounds (the tokenizer's piece cache is warm afterwards for all rows alike).
      const modelTokens = texts.reduce(
        (n, t) => n + compressor.windows(t).windows.reduce((m, w) => m + w.ids.length, 0),
        0,
      );
      runners.push(
        {
          system: "onnx",
          compressor: compressor.id,
          modelTokens,
          run: turnByTurn(compressor, keepRate),
        },
        {
          system: "onnx-batched",
          compressor: compressor.id,
          modelTokens,
          run: async (cs) => {
            const out: CompressionResult[] = [];
            for (const c of cs) out.push(...(await compressor.compressMany(c.texts, keepRate)));
            return out;
          },
        },
      );
    }

    // Untimed warm-up: first inferences and allocations are billed to no system.
    const warm = [{ id: "warmup", texts: texts.slice(0, WARMUP_TURNS) }];
    for (const r of runners) await r.run(warm);

    const seconds = runners.map(() => [] as number[]);
    const results: CompressionResult[][] = runners.map(() => []);
    const loadBefore = loadavg();
    for (let round = 0; round < repeats; round++) {
      for (const [i, r] of runners.entries()) {
        const t0 = performance.now();
        const res = await r.run(conversations);
        seconds[i]!.push((performance.now() - t0) / 1000);
        results[i] = res;
      }
      options.log?.(
        `round ${round + 1}/${repeats}: ${runners.map((r, i) => `${r.system} ${seconds[i]!.at(-1)!.toFixed(3)} s`).join(", ")}`,
      );
    }
    const loadAfter = loadavg();

    const rows: CompressorRow[] = runners.map((r, i) => {
      const res = results[i]!;
      if (res.length !== texts.length)
        throw new Error(`${r.system} returned ${res.length} results for ${texts.length} turns`);
      const keptPerTurn = res.map((x) => splitWords(x.text).length);
      const keptWords = keptPerTurn.reduce((a, b) => a + b, 0);
      const perTurn = keptPerTurn.flatMap((k, j) => (wordsPerTurn[j]! > 0 ? [k / wordsPerTurn[j]!] : []));
      const s = medianRound(seconds[i]!);
      return {
        system: r.system,
        compressor: r.compressor,
        turns: texts.length,
        words,
        tokensIn,
        ...(r.modelTokens !== undefined ? { modelTokens: r.modelTokens } : {}),
        seconds: s,
        roundSeconds: seconds[i]!,
        turnsPerSecond: texts.length / s,
        tokensPerSecond: tokensIn / s,
        ...(r.modelTokens !== undefined ? { modelTokensPerSecond: r.modelTokens / s } : {}),
        keptWords,
        keptRatio: words > 0 ? keptWords / words : 1,
        meanTurnKeptRatio: perTurn.length > 0 ? perTurn.reduce((a, b) => a + b, 0) / perTurn.length : 1,
        ratioToBaseline: 0,
      };
    });
    const base = rows[0]!.seconds;
    for (const row of rows) row.ratioToBaseline = base / row.seconds;

    const report: CompressorBenchReport = {
      config: {
        bench: "compressor",
        dataFile,
        dataSha256: createHash("sha256").update(bytes).digest("hex"),
        conversations: conversations.map((c) => c.id),
        keepRate,
        repeats,
        model,
        ...runEnvironment(),
        loadAverage: { before: loadBefore, after: loadAfter },
        wallSeconds: (performance.now() - started) / 1000,
      },
      rows,
      ...(model === null ? { hint: NO_MODEL_HINT } : {}),
    };
    const markdown = renderCompressorMarkdown(report);
    const files =
      options.out === null ? [] : writeReportFiles(options.out, "compressor", report.config.date, markdown, report);
    return { report, markdown, files };
  } finally {
    await onnx?.close();
  }
};

const load = (xs: readonly number[]): string => xs.map((x) => x.toFixed(1)).join(" ");

/** The report as markdown: the settings line, one row per system, the hint when no model ran. */
export const renderCompressorMarkdown = (report: CompressorBenchReport): string => {
  const { config: c, rows } = report;
  const m = c.model;
  const out: string[] = [];
  out.push("# Benchmark: sensory compressor");
  out.push("");
  out.push(
    `data \`${c.dataFile}\` (sha256 ${c.dataSha256.slice(0, 12)}…), conversations ${c.conversations.join(", ")}, keep rate ${c.keepRate}, ${c.repeats} interleaved round${c.repeats === 1 ? "" : "s"} (median reported), commit ${c.gitCommit?.slice(0, 10) ?? "unknown"}${c.gitDirty ? " (dirty)" : ""}, ${c.date}, node ${c.node}, ${c.cpus} CPUs, load average ${load(c.loadAverage.before)} → ${load(c.loadAverage.after)}, wall ${c.wallSeconds.toFixed(1)} s`,
  );
  if (m)
    out.push(
      `model \`${m.name}\` from \`${m.dir}\` (${m.source}): window ${m.window} tokens (${m.capacity} content), word aggregation ${m.aggregation}, batch ${m.batch} sequences per run, execution provider ${m.executionProviders.join(" → ")}, ${m.threads} intra-op thread${m.threads === 1 ? "" : "s"}.`,
    );
  out.push("");
  out.push(
    markdownTable(
      [
        "system",
        "turns",
        "words",
        "o200k tokens in",
        "model tokens",
        "seconds",
        "turns/s",
        "o200k tokens/s",
        "model tokens/s",
        "kept ratio (overall)",
        "kept ratio (mean per turn)",
        "throughput vs statistical",
      ],
      rows.map((r) => [
        r.system,
        fmtInt(r.turns),
        fmtInt(r.words),
        fmtInt(r.tokensIn),
        fmtInt(r.modelTokens),
        fmt(r.seconds, 3),
        fmt(r.turnsPerSecond, 1),
        fmtInt(r.tokensPerSecond),
        fmtInt(r.modelTokensPerSecond),
        fmt(r.keptRatio),
        fmt(r.meanTurnKeptRatio),
        `${fmt(r.ratioToBaseline, r.ratioToBaseline < 0.1 ? 4 : 2)}x`,
      ]),
    ),
  );
  out.push("");
  out.push(
    "statistical: the default compressor, one turn per call (the baseline). onnx: the token classifier one turn per call, as the engine calls it. onnx-batched: compressMany with one conversation per call, so the windows of many turns share session runs. o200k tokens/s counts the input turns' o200k tokens, the same for every row, so rows compare; model tokens are the classifier's own sub-tokens. kept ratio: words kept / words.",
  );
  if (report.hint) {
    out.push("");
    out.push(report.hint);
  }
  return `${out.join("\n")}\n`;
};
