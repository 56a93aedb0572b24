import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SingleBar } from "cli-progress";
import type { Config } from "../core/config.ts";
import type { Embedder } from "../core/ports.ts";
import { wordCount } from "../core/text/words.ts";
import { countTokens } from "../core/tokens.ts";
import type { MemoryRecord, Segment } from "../core/types.ts";
import { openEmbeddedEngine } from "../embedded/open.ts";
import { Bm25Index, denseRank, recentFirst } from "./baselines.ts";
import { type BenchTurn, greedyPack, type PackedContext, renderUnit, turnUnits, windows } from "./pack.ts";
import {
  aggregateByCategory,
  answerCoverage,
  contentTerms,
  mean,
  percentile,
  perThousandTokens,
  recall,
  sessionRecall,
  sourceStripper,
  targetsFound,
} from "./scoring.ts";
import {
  type BaselineName,
  type BenchCase,
  type BenchQuestion,
  type BenchReport,
  type CaseCost,
  type CostReport,
  type DatasetSpec,
  type QuestionResult,
  SYSTEMS,
  type SystemName,
  type SystemSummary,
} from "./types.ts";

export const EMBED_BATCH = 32;
export const WINDOW_SIZE = 5;

export interface HarnessOptions {
  config: Config;
  budgets: readonly number[];
  /** One embedder instance, shared by the engine and the baselines. */
  embedder: Embedder;
  /** The second-opinion model (config secondOpinion), one instance for every conversation's engine. */
  secondEmbedder?: Embedder;
  /** Progress bar on stderr. */
  progress?: boolean;
  /** After our system's questions, consolidate the tenant and ask them again ("ours-consolidated"). */
  consolidate?: boolean;
  /** Run the baselines too (default true); false leaves their rows and costs empty. */
  baselines?: boolean;
}

type HarnessResult = Pick<BenchReport, "summary" | "byCase" | "cost" | "questions"> & { compressor: string };

/** Counts what the embedded engine reports: segments, records, kept ratios, embeddings, dead letters. */
class BenchObserver {
  keptRatios: number[] = [];
  segments = 0;
  records = 0;
  deadLetters = 0;
  embeddingCalls = 0;
  embeddedTexts = 0;

  stageEvent(_stage: string, outcome: "ok" | "error" | "dlq"): void {
    if (outcome === "dlq") this.deadLetters++;
  }
  segmentClosed(): void {}
  recordsWritten(n: number): void {
    this.records += n;
  }
  segmentIndexed(segment: Segment, _records: readonly MemoryRecord[]): void {
    this.segments++;
    for (const t of segment.turns) {
      const total = wordCount(t.text);
      if (total > 0) this.keptRatios.push(Math.min(1, wordCount(t.compressed || t.text) / total));
    }
  }
  embedding(calls: number, texts: number): void {
    this.embeddingCalls += calls;
    this.embeddedTexts += texts;
  }
}

export const embedInBatches = async (
  embedder: Embedder,
  texts: readonly string[],
  batch = EMBED_BATCH,
): Promise<Float32Array[]> => {
  const out: Float32Array[] = [];
  for (let i = 0; i < texts.length; i += batch) out.push(...(await embedder.embed(texts.slice(i, i + batch))));
  return out;
};

export const toBenchTurns = (c: BenchCase): BenchTurn[] =>
  c.turns.map((t) => {
    if (!t.turnId) throw new Error(`case ${c.id}: every turn needs a turn id`);
    return {
      turnId: t.turnId,
      speaker: t.speaker,
      text: t.text,
      timestamp: new Date(t.timestamp).toISOString(),
      sessionId: t.sessionId,
    };
  });

const scoreTargets = (
  q: BenchQuestion,
  turnIds: readonly string[],
  sessionOf: ReadonlyMap<string, string>,
): Record<string, number | null> => {
  const set = new Set(turnIds);
  const out: Record<string, number | null> = {};
  for (const [metric, target] of Object.entries(q.targets)) {
    const v = target.level === "turn" ? recall(target.ids, set) : sessionRecall(target.ids, turnIds, sessionOf);
    out[metric] = v ?? null;
  }
  return out;
};

/** Turn-level targets of the first metric found among the context's turns (null when not turn-level). */
const foundTargets = (spec: DatasetSpec, q: BenchQuestion, turnIds: readonly string[]): number | null => {
  const first = spec.metrics[0];
  const target = first ? q.targets[first] : undefined;
  return target?.level === "turn" ? targetsFound(target.ids, new Set(turnIds)) : null;
};

const timed = <T>(f: () => T): { value: T; ms: number } => {
  const t = performance.now();
  const value = f();
  return { value, ms: performance.now() - t };
};

/**
 * When a case's questions are asked unless the dataset dates a question (LongMemEval's question
 * date): at the conversation's last turn (LoCoMo's questions are asked at its end), so "last year"
 * or "in June" resolve against the conversation's time, not the clock's.
 */
export const askedAtEnd = (turns: readonly BenchTurn[]): string | undefined => {
  let latest = Number.NEGATIVE_INFINITY;
  for (const t of turns) latest = Math.max(latest, Date.parse(t.timestamp));
  return Number.isFinite(latest) ? new Date(latest).toISOString() : undefined;
};

const safeTenant = (id: string): string => `bench-${id.replace(/[^A-Za-z0-9_.-]/g, "_")}`;

/**
 * Runs every case through the embedded engine (fresh data folder and tenant per case) and through
 * the baselines, at every budget, with one embedder and the real tokenizer for all.
 */
export const runHarness = async (
  spec: DatasetSpec,
  cases: readonly BenchCase[],
  options: HarnessOptions,
): Promise<HarnessResult> => {
  const { embedder, budgets } = options;
  const rows: QuestionResult[] = [];
  const perCase: CaseCost[] = [];
  const unbounded: {
    category: string;
    tokens: number;
    recall: Record<string, number | null>;
    coverage: number | null;
    found: number | null;
  }[] = [];
  const oursMs: number[] = [];
  const engineMs: number[] = [];
  const baselineMs: Record<BaselineName, number[]> = {
    "bm25-turns": [],
    "dense-turns": [],
    "window5-dense": [],
    "full-context": [],
  };
  const build: Record<BaselineName, { calls: number; texts: number; units: number; ms: number }> = {
    "bm25-turns": { calls: 0, texts: 0, units: 0, ms: 0 },
    "dense-turns": { calls: 0, texts: 0, units: 0, ms: 0 },
    "window5-dense": { calls: 0, texts: 0, units: 0, ms: 0 },
    "full-context": { calls: 0, texts: 0, units: 0, ms: 0 },
  };
  const keptRatios: number[] = [];
  const consolidations: NonNullable<CostReport["consolidation"]> = [];
  const totals = {
    llmCalls: 0,
    llmIn: 0,
    llmOut: 0,
    queryLlmCalls: 0,
    ingestCalls: 0,
    ingestTexts: 0,
    ingestEmbedMs: 0,
    queryCalls: 0,
  };
  const speed = { texts: 0, ms: 0 };
  const compressors = new Set<string>();

  const totalWork = cases.reduce((n, c) => n + c.turns.length + c.questions.length * budgets.length, 0);
  const bar = options.progress
    ? new SingleBar({
        format: "bench {phase} [{bar}] {value}/{total} | {case} | {eta_formatted} left",
        stream: process.stderr,
        hideCursor: true,
        etaBuffer: 200,
      })
    : undefined;
  let done = 0;
  bar?.start(totalWork, 0, { phase: "start", case: "" });

  try {
    // One untimed batch first, so model warm-up (first inference, allocations) is not billed to any system.
    const warmup = cases.flatMap((c) => c.turns.map((t) => t.text)).slice(0, EMBED_BATCH);
    if (warmup.length > 0) await embedder.embed(warmup);
    for (const c of cases) {
      const turns = toBenchTurns(c);
      const askedAt = askedAtEnd(turns);
      /** Our engine's request for a question at a budget, asked as of its date (askedAtEnd). */
      const ask = (q: BenchQuestion, budget: number) => ({
        question: q.question,
        conversation: c.id,
        budget,
        asOf: q.askedAt ?? askedAt,
      });
      const sessionOf = new Map(turns.map((t) => [t.turnId, t.sessionId]));
      const units = turnUnits(turns);
      const wins = windows(turns, WINDOW_SIZE);
      bar?.update(done, { phase: "embed", case: c.id });

      const withBaselines = options.baselines ?? true;
      // The embedder's own speed on this conversation's turns; the vectors serve the dense baseline.
      let s0 = embedder.stats();
      let t0 = performance.now();
      const turnVectors = withBaselines
        ? await embedInBatches(
            embedder,
            turns.map((t) => t.text),
          )
        : [];
      const embedMs = performance.now() - t0;
      let s1 = embedder.stats();
      // Without baselines nothing was embedded here: counting the turns over ~0 ms gave absurd
      // figures (hundreds of millions of sentences/s), so the speed is then left unmeasured.
      if (withBaselines) {
        speed.texts += turns.length;
        speed.ms += embedMs;
      }
      build["dense-turns"].calls += s1.calls - s0.calls;
      build["dense-turns"].texts += s1.texts - s0.texts;
      build["dense-turns"].units += units.length;
      build["dense-turns"].ms += embedMs;

      s0 = s1;
      t0 = performance.now();
      const windowVectors = withBaselines
        ? await embedInBatches(
            embedder,
            wins.map((w) => w.turns.map((t) => `${t.speaker}: ${t.text}`).join("\n")),
          )
        : [];
      s1 = embedder.stats();
      build["window5-dense"].calls += s1.calls - s0.calls;
      build["window5-dense"].texts += s1.texts - s0.texts;
      build["window5-dense"].units += wins.length;
      build["window5-dense"].ms += performance.now() - t0;

      const bm25Built = timed(
        () => new Bm25Index(units, (u) => u.turns.map((t) => `${t.speaker}: ${t.text}`).join("\n")),
      );
      const bm25 = bm25Built.value;
      build["bm25-turns"].units += units.length;
      build["bm25-turns"].ms += bm25Built.ms;

      const fullText = units.map(renderUnit).join("\n");
      const fullTokens = countTokens(fullText);
      build["full-context"].units += units.length;
      const allTurnIds = turns.map((t) => t.turnId);
      const withoutSources = sourceStripper([c.id, ...allTurnIds]);
      const coverageOf = (q: BenchQuestion, context: string): number | null =>
        answerCoverage(q.answer, withoutSources(context)) ?? null;
      // The baselines' lines carry no citations: only the ids go (a turn's own "[…]" stays).
      const withoutIds = sourceStripper([c.id, ...allTurnIds], { lineCitations: false });
      const baselineCoverageOf = (q: BenchQuestion, context: string): number | null =>
        answerCoverage(q.answer, withoutIds(context)) ?? null;
      const fullTerms = contentTerms(fullText);
      const recent = recentFirst(units);

      // Our engine, in a fresh data folder and tenant.
      const dataDir = mkdtempSync(join(tmpdir(), "memory-bench-"));
      const observer = new BenchObserver();
      const opened = await openEmbeddedEngine(
        { ...options.config, dataDir },
        {
          embedder,
          observer,
          ...(options.secondEmbedder ? { secondEmbedder: options.secondEmbedder } : {}),
        },
      ).catch((err: unknown) => {
        bm25.close();
        rmSync(dataDir, { recursive: true, force: true });
        throw err;
      });
      const tenant = safeTenant(c.id);
      let ingestSeconds = 0;
      try {
        bar?.update(done, { phase: "ingest", case: c.id });
        const base = done;
        const startTurns = opened.engine.progress.turns;
        const ingestStart = performance.now();
        // Both models' time when the second opinion is on: the build embeds every text with each.
        const modelMs = () => embedder.stats().ms + (options.secondEmbedder?.stats().ms ?? 0);
        const msBefore = modelMs();
        await opened.engine.ingest(tenant, c.id, c.turns);
        await opened.engine.flush(tenant, c.id);
        const poll = setInterval(
          () => bar?.update(base + Math.min(turns.length, opened.engine.progress.turns - startTurns)),
          250,
        );
        try {
          await opened.engine.drain();
        } finally {
          clearInterval(poll);
        }
        ingestSeconds = (performance.now() - ingestStart) / 1000;
        // Construction LLM usage as the engine measures it (zeros for the extractive encoder).
        totals.llmCalls += opened.engine.construction.llmCalls;
        totals.llmIn += opened.engine.construction.inputTokens;
        totals.llmOut += opened.engine.construction.outputTokens;
        compressors.add((await opened.engine.health()).details.compressor ?? "unknown");
        totals.ingestEmbedMs += modelMs() - msBefore;
        done = base + turns.length;
        bar?.update(done, { phase: "query", case: c.id });
        totals.ingestCalls += observer.embeddingCalls;
        totals.ingestTexts += observer.embeddedTexts;
        const callsBeforeQueries = observer.embeddingCalls;

        for (const q of c.questions) {
          const qStart = performance.now();
          const qv = withBaselines ? ((await embedder.embed([q.question]))[0] as Float32Array) : undefined;
          const embedQMs = performance.now() - qStart;
          const bm = timed(() => (withBaselines ? bm25.rank(q.question) : []));
          const dn = timed(() => (qv ? denseRank(units, turnVectors, qv) : []));
          const wn = timed(() => (qv ? denseRank(wins, windowVectors, qv) : []));
          unbounded.push({
            category: q.category,
            tokens: fullTokens,
            recall: scoreTargets(q, allTurnIds, sessionOf),
            coverage: answerCoverage(q.answer, fullTerms) ?? null,
            found: foundTargets(spec, q, allTurnIds),
          });

          for (const budget of budgets) {
            const started = performance.now();
            const result = await opened.engine.query(tenant, ask(q, budget));
            const ms = performance.now() - started;
            oursMs.push(ms);
            engineMs.push(result.cost.ms);
            totals.queryLlmCalls += result.cost.llmCalls;
            rows.push({
              case: c.id,
              question: q.id,
              category: q.category,
              budget,
              system: "ours",
              tokens: countTokens(result.context),
              ms,
              recall: scoreTargets(
                q,
                result.items.flatMap((i) => i.turnIds),
                sessionOf,
              ),
              coverage: coverageOf(q, result.context),
              found: foundTargets(
                spec,
                q,
                result.items.flatMap((i) => i.turnIds),
              ),
            });

            const baseline = (system: BaselineName, rankMs: number, pack: () => PackedContext) => {
              if (!withBaselines) return;
              const p = timed(pack);
              const total = rankMs + p.ms;
              baselineMs[system].push(total);
              rows.push({
                case: c.id,
                question: q.id,
                category: q.category,
                budget,
                system,
                tokens: p.value.tokens,
                ms: total,
                recall: scoreTargets(q, p.value.turnIds, sessionOf),
                coverage: baselineCoverageOf(q, p.value.context),
                found: foundTargets(spec, q, p.value.turnIds),
              });
            };
            baseline("bm25-turns", bm.ms, () => greedyPack(bm.value, budget));
            baseline("dense-turns", embedQMs + dn.ms, () => greedyPack(dn.value, budget));
            baseline("window5-dense", embedQMs + wn.ms, () => greedyPack(wn.value, budget));
            baseline("full-context", 0, () => greedyPack(recent, budget, "stop"));
            bar?.update(++done);
          }
        }
        totals.queryCalls += observer.embeddingCalls - callsBeforeQueries;

        if (options.consolidate) {
          bar?.update(done, { phase: "consolidate", case: c.id });
          const report = await opened.engine.consolidate(tenant);
          consolidations.push({
            case: c.id,
            examined: report.examined,
            merged: report.merged,
            superseded: report.superseded,
            linked: report.linked,
            unchanged: report.unchanged,
            seconds: report.ms / 1000,
          });
          for (const q of c.questions)
            for (const budget of budgets) {
              const started = performance.now();
              const result = await opened.engine.query(tenant, ask(q, budget));
              rows.push({
                case: c.id,
                question: q.id,
                category: q.category,
                budget,
                system: "ours-consolidated",
                tokens: countTokens(result.context),
                ms: performance.now() - started,
                recall: scoreTargets(
                  q,
                  result.items.flatMap((i) => i.turnIds),
                  sessionOf,
                ),
                coverage: coverageOf(q, result.context),
                found: foundTargets(
                  spec,
                  q,
                  result.items.flatMap((i) => i.turnIds),
                ),
              });
            }
        }
      } finally {
        bm25.close();
        await opened.close();
        rmSync(dataDir, { recursive: true, force: true });
      }
      // One question embedding serves both dense baselines; each would need it on its own, so both count it.
      for (const s of withBaselines ? (["dense-turns", "window5-dense"] as const) : []) {
        build[s].calls += c.questions.length;
        build[s].texts += c.questions.length;
      }

      keptRatios.push(...observer.keptRatios);
      perCase.push({
        case: c.id,
        turns: turns.length,
        questions: c.questions.length,
        embedderTexts: turns.length,
        embedderSeconds: embedMs / 1000,
        ingestSeconds,
        segments: observer.segments,
        records: observer.records,
        deadLetters: observer.deadLetters,
        fullContextTokens: fullTokens,
      });
    }
  } finally {
    bar?.update(done, { phase: "done", case: "" });
    bar?.stop();
  }

  const categories = spec.categories.map((c) => c.id);
  const summarise = (
    selected: readonly {
      category: string;
      tokens: number;
      recall: Record<string, number | null>;
      coverage: number | null;
      found: number | null;
    }[],
  ): SystemSummary => {
    const metrics: SystemSummary["metrics"] = {};
    for (const m of spec.metrics)
      metrics[m] = aggregateByCategory(
        selected.map((r) => ({ category: r.category, value: r.recall[m] ?? undefined })),
        categories,
      );
    const counted = selected.filter((r) => r.found !== null);
    const found = counted.reduce((n, r) => n + (r.found ?? 0), 0);
    const tokens = counted.reduce((n, r) => n + r.tokens, 0);
    return {
      meanTokens: mean(selected.map((r) => r.tokens)) ?? 0,
      metrics,
      coverage: aggregateByCategory(
        selected.map((r) => ({ category: r.category, value: r.coverage ?? undefined })),
        categories,
      ),
      foundPerKTokens: counted.length > 0 ? (perThousandTokens(found, tokens) ?? null) : null,
    };
  };
  const perBudget = (selected: readonly QuestionResult[]): Record<string, Record<SystemName, SystemSummary>> => {
    const out: Record<string, Record<SystemName, SystemSummary>> = {};
    for (const budget of budgets) {
      const perSystem = {} as Record<SystemName, SystemSummary>;
      for (const system of SYSTEMS)
        perSystem[system] = summarise(selected.filter((r) => r.budget === budget && r.system === system));
      out[String(budget)] = perSystem;
    }
    return out;
  };
  const summary: HarnessResult["summary"] = perBudget(rows);
  const byCase: HarnessResult["byCase"] = {};
  for (const c of cases) byCase[c.id] = perBudget(rows.filter((r) => r.case === c.id));

  const sum = (f: (c: CaseCost) => number) => perCase.reduce((n, c) => n + f(c), 0);
  const ingestSeconds = sum((c) => c.ingestSeconds);
  const turnsTotal = sum((c) => c.turns);
  const baselineCost = (s: BaselineName) => ({
    embeddingCalls: build[s].calls,
    embeddedTexts: build[s].texts,
    units: build[s].units,
    buildSeconds: build[s].ms / 1000,
    queryMsP50: percentile(baselineMs[s], 50) ?? null,
    queryMsP95: percentile(baselineMs[s], 95) ?? null,
  });
  const cost: CostReport = {
    ours: {
      constructionLlmCalls: totals.llmCalls,
      constructionInputTokens: totals.llmIn,
      constructionOutputTokens: totals.llmOut,
      queryLlmCalls: totals.queryLlmCalls,
      ingestEmbeddingCalls: totals.ingestCalls,
      ingestEmbeddedTexts: totals.ingestTexts,
      queryEmbeddingCalls: totals.queryCalls,
      segments: sum((c) => c.segments),
      records: sum((c) => c.records),
      deadLetters: sum((c) => c.deadLetters),
      keptRatio: mean(keptRatios) ?? null,
      turns: turnsTotal,
      ingestSeconds,
      ingestEmbeddingSeconds: totals.ingestEmbedMs / 1000,
      ingestTurnsPerSecond: ingestSeconds > 0 ? turnsTotal / ingestSeconds : 0,
      queryMsP50: percentile(oursMs, 50) ?? null,
      queryMsP95: percentile(oursMs, 95) ?? null,
      engineQueryMsP50: percentile(engineMs, 50) ?? null,
    },
    embedder: {
      id: embedder.id,
      texts: speed.texts,
      seconds: speed.ms / 1000,
      sentencesPerSecond: speed.ms > 0 ? speed.texts / (speed.ms / 1000) : 0,
    },
    baselines: {
      "bm25-turns": baselineCost("bm25-turns"),
      "dense-turns": baselineCost("dense-turns"),
      "window5-dense": baselineCost("window5-dense"),
      "full-context": baselineCost("full-context"),
    },
    fullContextUnbounded: summarise(unbounded),
    perCase,
    ...(options.consolidate ? { consolidation: consolidations } : {}),
  };
  return { summary, byCase, cost, questions: rows, compressor: [...compressors].join(", ") };
};
