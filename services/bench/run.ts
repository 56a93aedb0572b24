import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join, resolve } from "node:path";
import { openEmbedderThread, openSecondOpinionEmbedder } from "../composition/parts.ts";
import type { Config } from "../core/config.ts";
import { loadLocomo } from "../core/datasets/locomo.ts";
import { loadLongMemEval } from "../core/datasets/longmemeval.ts";
import type { Embedder } from "../core/ports.ts";
import { locomoCases, longMemEvalCases } from "./datasets.ts";
import { runHarness } from "./harness.ts";
import { disguiseConversation } from "./locomo-disguise.ts";
import { renderMarkdown } from "./report.ts";
import { budgetSweep } from "./sweep.ts";
import type { BenchCase, BenchReport, BudgetSweep, DatasetSpec } from "./types.ts";

export const DEFAULT_BUDGETS = [500, 1000, 2000];
export const ENCODERS = ["extractive", "llm"] as const;

export interface BenchRunOptions {
  data: string;
  budgets?: readonly number[];
  encoder?: string;
  /** Output folder; null writes nothing. Default ./bench-out. */
  out?: string | null;
  /** LoCoMo: sample ids to run (default all). LongMemEval: question ids. */
  ids?: readonly string[];
  /** Run at most this many cases (after the id filter). */
  limit?: number;
  progress?: boolean;
  /** Also measure our system after sleep-time consolidation. */
  consolidate?: boolean;
  /** Also run the baselines (default true); false measures our engine only. */
  baselines?: boolean;
  /** An embedder to use instead of loading the one in the model folder (it is not closed). */
  embedder?: Embedder;
  /**
   * LoCoMo: ask the questions of disguised copy n of each conversation instead (locomo-disguise.ts:
   * other speaker names, places and years), to see whether a result depends on the dev set's own
   * names and dates.
   */
  disguise?: number;
}

export interface BenchRun {
  report: BenchReport;
  markdown: string;
  files: string[];
}

/** The LLM encoder needs an LLM: asking for it without one fails instead of falling back. */
export const assertEncoder = (encoder: string, config: Config): "extractive" | "llm" => {
  if (encoder === "extractive") return encoder;
  if (encoder === "llm") {
    if (config.llm.provider === "none")
      throw new Error(
        "--encoder llm needs an LLM: set MEMORY_LLM_PROVIDER=openai (with MEMORY_LLM_BASE_URL / MEMORY_LLM_MODEL / MEMORY_LLM_API_KEY) or local",
      );
    return encoder;
  }
  throw new Error(`unknown encoder "${encoder}": expected one of ${ENCODERS.join(", ")}`);
};

export const parseBudgets = (text: string): number[] => {
  const budgets = text.split(",").map((s) => Number(s.trim()));
  for (const b of budgets)
    if (!Number.isInteger(b) || b < 50 || b > 32_000)
      throw new Error(`budgets must be integers in [50, 32000] (the query API's range), got "${text}"`);
  return [...new Set(budgets)].sort((a, b) => a - b);
};

const git = (args: string[]): string | null => {
  try {
    return execFileSync("git", args, { stdio: ["ignore", "pipe", "ignore"], encoding: "utf8" }).trim();
  } catch {
    return null;
  }
};

/** The commit checked out and whether tracked files differ from it (null outside a git checkout). */
export const gitState = (): { gitCommit: string | null; gitDirty: boolean | null } => {
  const commit = git(["rev-parse", "HEAD"]);
  const status = commit ? git(["status", "--porcelain", "--untracked-files=no"]) : null;
  return { gitCommit: commit, gitDirty: status === null ? null : status.length > 0 };
};

/** Where and when a bench ran (commit, date, Node, CPUs): the same fields in every bench's report. */
export const runEnvironment = (): {
  gitCommit: string | null;
  gitDirty: boolean | null;
  date: string;
  node: string;
  cpus: number;
} => ({ ...gitState(), date: new Date().toISOString(), node: process.version, cpus: cpus().length });

/** Writes `<out>/<name>-<date stamp>.md` and `.json`; returns the two paths. */
export const writeReportFiles = (
  out: string,
  name: string,
  date: string,
  markdown: string,
  json: unknown,
): string[] => {
  mkdirSync(out, { recursive: true });
  const base = join(out, `${name}-${date.replace(/[:.]/g, "-")}`);
  writeFileSync(`${base}.md`, markdown);
  writeFileSync(`${base}.json`, `${JSON.stringify(json, null, 2)}\n`);
  return [`${base}.md`, `${base}.json`];
};

/** The cases with the given ids (all when none), at most `limit`; unknown ids are an error. */
export const select = (
  cases: BenchCase[],
  ids: readonly string[] | undefined,
  limit: number | undefined,
): BenchCase[] => {
  let out = cases;
  if (ids && ids.length > 0) {
    const known = new Set(cases.map((c) => c.id));
    const missing = ids.filter((id) => !known.has(id));
    if (missing.length > 0)
      throw new Error(
        `unknown id(s) ${missing.join(", ")}; the file has ${cases
          .slice(0, 20)
          .map((c) => c.id)
          .join(", ")}${cases.length > 20 ? ", …" : ""}`,
      );
    const wanted = new Set(ids);
    out = cases.filter((c) => wanted.has(c.id));
  }
  return limit !== undefined ? out.slice(0, limit) : out;
};

const load = (
  dataset: DatasetSpec["name"],
  file: string,
  disguise: number | undefined,
): { spec: DatasetSpec; cases: BenchCase[] } => {
  if (dataset !== "locomo") {
    if (disguise !== undefined) throw new Error("--disguise applies to LoCoMo files only");
    return longMemEvalCases(loadLongMemEval(file));
  }
  const conversations = loadLocomo(file);
  return locomoCases(
    disguise === undefined ? conversations : conversations.map((c) => disguiseConversation(c, disguise)),
  );
};

const sweepField = (sweep: BudgetSweep | undefined): { sweep?: BudgetSweep } => (sweep ? { sweep } : {});

/** Loads the data, runs the engine and the baselines, and writes the markdown and JSON reports. */
export const runBench = async (
  dataset: DatasetSpec["name"],
  config: Config,
  options: BenchRunOptions,
): Promise<BenchRun> => {
  const started = performance.now();
  // The checkout as the run began: the tree may move on while a long run goes.
  const checkout = gitState();
  const encoder = assertEncoder(options.encoder ?? "extractive", config);
  const engineConfig: Config = { ...config, llm: { ...config.llm, encoder } };
  const budgets = [...(options.budgets ?? DEFAULT_BUDGETS)];
  const dataFile = resolve(options.data);
  const bytes = readFileSync(dataFile);
  const { spec, cases: all } = load(dataset, dataFile, options.disguise);
  const cases = select(all, options.ids, options.limit);
  if (cases.length === 0) throw new Error(`no cases to run in ${dataFile}`);

  // On a worker thread, as the embedded engine opens its own (embedded/open.ts): the engine's store
  // work and the model overlap as they do in use. The baselines share it and pay the thread hop too.
  const embedder = options.embedder ?? (await openEmbedderThread(config));
  // MEMORY_SECOND_OPINION=1: one second model for every conversation's engine.
  const secondEmbedder = await openSecondOpinionEmbedder(config);
  let result: Awaited<ReturnType<typeof runHarness>>;
  try {
    result = await runHarness(spec, cases, {
      config: engineConfig,
      budgets,
      embedder,
      ...(secondEmbedder ? { secondEmbedder } : {}),
      progress: options.progress ?? false,
      consolidate: options.consolidate ?? false,
      baselines: options.baselines ?? true,
    });
  } finally {
    if (!options.embedder) await embedder.close?.();
    await secondEmbedder?.close();
  }
  const report: BenchReport = {
    config: {
      dataset,
      dataFile,
      dataSha256: createHash("sha256").update(bytes).digest("hex"),
      ...(options.disguise !== undefined ? { disguise: options.disguise } : {}),
      budgets,
      encoder,
      embedder: embedder.id,
      ...(secondEmbedder ? { secondOpinion: secondEmbedder.id } : {}),
      keepRate: config.sensory.keepRate,
      compressor: result.compressor,
      segmenter: {
        threshold: config.segmenter.threshold,
        hardCapTokens: config.segmenter.hardCapTokens,
        bufferTokens: config.segmenter.bufferTokens,
        boundaries: config.segmenter.boundaries,
      },
      cases: cases.map((c) => c.id),
      ...checkout,
      date: new Date().toISOString(),
      node: process.version,
      wallSeconds: (performance.now() - started) / 1000,
    },
    spec,
    summary: result.summary,
    byCase: result.byCase,
    cost: result.cost,
    ...sweepField(
      budgetSweep(
        result.summary,
        result.byCase,
        spec.metrics[0] ?? "",
        spec.categories.map((c) => c.id),
      ),
    ),
    questions: result.questions,
  };
  const markdown = renderMarkdown(report);
  const out = options.out === undefined ? "bench-out" : options.out;
  const files = out === null ? [] : writeReportFiles(out, dataset, report.config.date, markdown, report);
  return { report, markdown, files };
};
