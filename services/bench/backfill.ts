/**
 * `memory bench backfill`: what a store written before MEMORY_SECOND_OPINION was on costs its
 * queries, and what the backfill (composition/second-opinion-backfill.ts) gives back. One LoCoMo
 * conversation is ingested with the setting off into a fresh data folder; its questions are asked
 * with the setting on (each candidate without a stored second vector is embedded at query time),
 * the backfill runs, and the same questions are asked again: query latency before and after in the
 * same run, their ratio, and the second model's texts per question (a new engine each time, so the
 * embedding cache starts empty in both).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { openSecondOpinionEmbedder } from "../composition/parts.ts";
import { type BackfillReport, backfillSecondVectors } from "../composition/second-opinion-backfill.ts";
import { openSqliteStores } from "../composition/stores.ts";
import type { Config } from "../core/config.ts";
import { loadLocomo } from "../core/datasets/locomo.ts";
import { openEmbeddedEngine } from "../embedded/open.ts";
import { runEnvironment, writeReportFiles } from "./run.ts";
import { percentile } from "./scoring.ts";
import { fmt, fmtInt, markdownTable } from "./table.ts";

export interface BackfillBenchOptions {
  /** The service configuration; the run uses a fresh temporary data folder instead of config.dataDir. */
  config: Config;
  /** LoCoMo-format file. */
  data: string;
  /** Sample id (default the file's first). */
  conversation?: string;
  /** Turns ingested at most (default all). */
  turns?: number;
  /** Questions asked in each phase at most (default 100), in the file's order. */
  questions?: number;
  /** Context budget of each question (default 1000). */
  budget?: number;
  /** Output folder; null writes nothing. */
  out: string | null;
  log?: (line: string) => void;
}

export interface QueryPhase {
  questions: number;
  p50Ms: number | undefined;
  p95Ms: number | undefined;
  /** Texts the second model embedded per question: the question itself, plus candidates without a stored vector. */
  secondTextsPerQuestion: number;
}

export interface BackfillBenchReport {
  config: {
    bench: "backfill";
    dataFile: string;
    conversation: string;
    turns: number;
    budget: number;
    variant: string;
  };
  environment: ReturnType<typeof runEnvironment>;
  buildSeconds: number;
  before: QueryPhase;
  backfill: BackfillReport;
  after: QueryPhase;
  /** after / before, the lower the better. */
  ratio: { p50: number | undefined; p95: number | undefined };
}

const ratioOf = (a: number | undefined, b: number | undefined): number | undefined =>
  a !== undefined && b !== undefined && b > 0 ? a / b : undefined;

export const formatBackfillBench = (r: BackfillBenchReport): string =>
  [
    `# Second-opinion backfill: ${r.config.conversation} (${r.config.turns} turns), budget ${r.config.budget}, bge ${r.config.variant}`,
    "",
    `Built with the second opinion off in ${r.buildSeconds.toFixed(1)} s; backfill: ${fmtInt(r.backfill.set)} items in ${(r.backfill.ms / 1000).toFixed(1)} s` +
      (r.backfill.withoutText > 0 ? ` (${r.backfill.withoutText} without a stored text)` : "") +
      ".",
    "",
    markdownTable(
      ["queries (second opinion on)", "questions", "p50 ms", "p95 ms", "second-model texts / question"],
      [
        [
          "before the backfill",
          fmtInt(r.before.questions),
          fmt(r.before.p50Ms, 1),
          fmt(r.before.p95Ms, 1),
          fmt(r.before.secondTextsPerQuestion, 1),
        ],
        [
          "after the backfill",
          fmtInt(r.after.questions),
          fmt(r.after.p50Ms, 1),
          fmt(r.after.p95Ms, 1),
          fmt(r.after.secondTextsPerQuestion, 1),
        ],
        ["after / before", "", fmt(r.ratio.p50, 2), fmt(r.ratio.p95, 2), ""],
      ],
    ),
    "",
    `${r.environment.date}, commit ${r.environment.gitCommit ?? "?"}${r.environment.gitDirty ? " (dirty)" : ""}, node ${r.environment.node}, ${r.environment.cpus} CPUs`,
  ].join("\n");

export const runBackfillBench = async (
  options: BackfillBenchOptions,
): Promise<{ report: BackfillBenchReport; markdown: string; files: string[] }> => {
  const log = options.log ?? (() => {});
  const budget = options.budget ?? 1000;
  const conversations = loadLocomo(options.data);
  const conv = options.conversation ? conversations.find((c) => c.id === options.conversation) : conversations[0];
  if (!conv) throw new Error(`no conversation ${options.conversation ?? ""} in ${options.data}`);
  const turns = conv.turns.slice(0, options.turns ?? conv.turns.length);
  const questions = conv.questions.slice(0, options.questions ?? 100).map((q) => q.question);
  const dataDir = mkdtempSync(join(tmpdir(), "memory-bench-backfill-"));
  const off: Config = {
    ...options.config,
    dataDir,
    secondOpinion: { ...options.config.secondOpinion, enabled: false },
  };
  const on: Config = { ...off, secondOpinion: { ...options.config.secondOpinion, enabled: true } };
  const tenant = "bench";
  const model = await openSecondOpinionEmbedder(on);
  if (!model) throw new Error("the second-opinion model did not open");
  try {
    log(`building ${conv.id} (${turns.length} turns) with the second opinion off`);
    const started = performance.now();
    const built = await openEmbeddedEngine(off);
    try {
      await built.engine.ingest(tenant, conv.id, turns);
      await built.engine.flush(tenant, conv.id);
      await built.engine.drain();
    } finally {
      await built.close();
    }
    const buildSeconds = (performance.now() - started) / 1000;

    const ask = async (label: string): Promise<QueryPhase> => {
      log(`asking ${questions.length} questions ${label}`);
      const opened = await openEmbeddedEngine(on, { secondEmbedder: model });
      try {
        // What a serving process does before it takes requests (the models' first passes, the
        // tokenizer's table): not measured, and no candidate of the store embedded.
        await opened.engine.warmUpQueries();
        // The model's own count, below the engine's cache: the texts it really embedded.
        const texts = model.stats().texts;
        const ms: number[] = [];
        for (const question of questions) {
          const t = performance.now();
          await opened.engine.query(tenant, { question, budget });
          ms.push(performance.now() - t);
        }
        return {
          questions: ms.length,
          p50Ms: percentile(ms, 50),
          p95Ms: percentile(ms, 95),
          secondTextsPerQuestion: ms.length > 0 ? (model.stats().texts - texts) / ms.length : 0,
        };
      } finally {
        await opened.close();
      }
    };

    const before = await ask("before the backfill");
    log("backfilling");
    const stores = openSqliteStores(on);
    let backfill: BackfillReport;
    try {
      backfill = await backfillSecondVectors({ graph: stores.graph, vectors: stores.vectors, embedder: model }, tenant);
    } finally {
      await stores.close();
    }
    const after = await ask("after the backfill");
    const report: BackfillBenchReport = {
      config: {
        bench: "backfill",
        dataFile: resolve(options.data),
        conversation: conv.id,
        turns: turns.length,
        budget,
        variant: on.secondOpinion.variant,
      },
      environment: runEnvironment(),
      buildSeconds,
      before,
      backfill,
      after,
      ratio: { p50: ratioOf(after.p50Ms, before.p50Ms), p95: ratioOf(after.p95Ms, before.p95Ms) },
    };
    const markdown = formatBackfillBench(report);
    const files = options.out
      ? writeReportFiles(options.out, "backfill", report.environment.date, markdown, report)
      : [];
    return { report, markdown, files };
  } finally {
    await model.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
};
