import type { TurnInput } from "../core/requests.ts";
import type { CategoryAggregate } from "./scoring.ts";

/** "ours-consolidated": our engine again after sleep-time consolidation (only with --consolidate). */
export const SYSTEMS = [
  "ours",
  "ours-consolidated",
  "bm25-turns",
  "dense-turns",
  "window5-dense",
  "full-context",
] as const;
export type SystemName = (typeof SYSTEMS)[number];
export type BaselineName = Exclude<SystemName, "ours" | "ours-consolidated">;

/** What a question's recall is measured against: turn ids, or session ids (via the turns' sessions). */
export interface Target {
  level: "turn" | "session";
  ids: string[];
}

export interface BenchQuestion {
  id: string;
  question: string;
  /** Column the question is reported under (LoCoMo category number, LongMemEval question type). */
  category: string;
  answer: string;
  /** Targets by metric name ("evidence"; "session", "turn"). */
  targets: Record<string, Target>;
  /** When the question is asked (ISO), where the dataset says (LongMemEval); otherwise at the case's last turn. */
  askedAt?: string;
}

/** One conversation (or haystack) ingested into a fresh tenant, and the questions asked of it. */
export interface BenchCase {
  id: string;
  turns: TurnInput[];
  questions: BenchQuestion[];
}

export interface DatasetSpec {
  name: "locomo" | "longmemeval";
  /** Metrics every question may carry; the first is the one shown per category. */
  metrics: string[];
  /** Category columns in report order, with a label. */
  categories: { id: string; label: string }[];
  /** Questions the dataset had that are not scored, with the reason (e.g. category 5). */
  skipped: { count: number; reason: string }[];
}

/** One system's context for one question at one budget. */
export interface QuestionResult {
  case: string;
  question: string;
  category: string;
  budget: number;
  system: SystemName;
  tokens: number;
  ms: number;
  /** Recall per metric; null where the question had nothing to find. */
  recall: Record<string, number | null>;
  /** Answer coverage of the context (scoring.ts answerCoverage); null where the answer has no content term. */
  coverage: number | null;
  /** Distinct turn-level targets of the first metric found in the context (null when it is not turn-level). */
  found: number | null;
}

export interface SystemSummary {
  meanTokens: number;
  metrics: Record<string, CategoryAggregate>;
  /** Answer coverage per category and overall. */
  coverage: CategoryAggregate;
  /** Turn-level targets of the first metric found per 1,000 context tokens (sum over sum); null when not turn-level. */
  foundPerKTokens: number | null;
}

export interface CaseCost {
  case: string;
  turns: number;
  questions: number;
  embedderTexts: number;
  embedderSeconds: number;
  ingestSeconds: number;
  segments: number;
  records: number;
  deadLetters: number;
  fullContextTokens: number;
}

export interface CostReport {
  ours: {
    constructionLlmCalls: number;
    constructionInputTokens: number;
    constructionOutputTokens: number;
    queryLlmCalls: number;
    ingestEmbeddingCalls: number;
    ingestEmbeddedTexts: number;
    queryEmbeddingCalls: number;
    segments: number;
    records: number;
    deadLetters: number;
    /** Mean over turns of words kept by sensory compression / words in the turn. */
    keptRatio: number | null;
    turns: number;
    ingestSeconds: number;
    /** Of which the embedders' own time (stats().ms; both models' with the second opinion on). */
    ingestEmbeddingSeconds: number;
    ingestTurnsPerSecond: number;
    queryMsP50: number | null;
    queryMsP95: number | null;
    /** The engine's own query cost.ms, p50. */
    engineQueryMsP50: number | null;
  };
  embedder: { id: string; texts: number; seconds: number; sentencesPerSecond: number };
  baselines: Record<
    BaselineName,
    {
      embeddingCalls: number;
      embeddedTexts: number;
      units: number;
      buildSeconds: number;
      queryMsP50: number | null;
      queryMsP95: number | null;
    }
  >;
  fullContextUnbounded: {
    meanTokens: number;
    metrics: Record<string, CategoryAggregate>;
    coverage?: CategoryAggregate;
  };
  perCase: CaseCost[];
  /** With --consolidate: what consolidation did to each case's records before "ours-consolidated" was asked. */
  consolidation?: {
    case: string;
    examined: number;
    merged: number;
    superseded: number;
    linked: number;
    unchanged: number;
    seconds: number;
  }[];
}

export interface BenchConfig {
  dataset: string;
  dataFile: string;
  dataSha256: string;
  /** The disguised copy of the conversations asked (bench locomo --disguise); absent: the file as it is. */
  disguise?: number;
  budgets: number[];
  encoder: string;
  embedder: string;
  /** The second-opinion model's id when it was on (MEMORY_SECOND_OPINION). */
  secondOpinion?: string;
  keepRate: number;
  /** The sensory compressor the engine ran with (its id). */
  compressor: string;
  segmenter: { threshold: number; hardCapTokens: number; bufferTokens: number; boundaries?: string };
  cases: string[];
  gitCommit: string | null;
  gitDirty: boolean | null;
  date: string;
  node: string;
  wallSeconds: number;
}

/** Means over the budgets of the per-budget means; undefined where no budget had a scored question. */
export interface SweepMeans {
  recall: number | undefined;
  coverage: number | undefined;
}

export interface SystemSweep {
  overall: SweepMeans;
  byCategory: Record<string, SweepMeans>;
  byCase: Record<string, SweepMeans>;
}

export interface BudgetSweep {
  /** The budgets averaged over, ascending. */
  budgets: number[];
  /** The metric whose recall is averaged (the dataset's first). */
  metric: string;
  /** Systems that had results, in the summaries' order. */
  systems: Partial<Record<SystemName, SystemSweep>>;
}

export interface BenchReport {
  config: BenchConfig;
  spec: DatasetSpec;
  /** summary[budget][system] */
  summary: Record<string, Record<SystemName, SystemSummary>>;
  /** byCase[case][budget][system]: the same summary per conversation / item. */
  byCase: Record<string, Record<string, Record<SystemName, SystemSummary>>>;
  cost: CostReport;
  /** With more than three budgets: each system's means over them (sweep.ts). */
  sweep?: BudgetSweep;
  questions: QuestionResult[];
}
