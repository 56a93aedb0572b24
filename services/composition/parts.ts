/**
 * The composition root's model half: the one place that turns a validated Config into the parts
 * the stages run on (embedder, compressor, LLM, encoder, planner) and into each stage's settings.
 * The embedded runtime, every stage process, the query service and the CLI build their parts here,
 * so one setting means the same thing in every process. Stores: ./stores.ts.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { type ClosableLlm, createLlm } from "../core/adapters/llm-factory.ts";
import { loadOnnxTurnAttention, type OnnxTurnAttention } from "../core/adapters/onnx/attention.ts";
import { loadOnnxEmbedder, type OnnxEmbedder, type OnnxVariant } from "../core/adapters/onnx/embedder.ts";
import { loadThreadedOnnxEmbedder, type ThreadedOnnxEmbedder } from "../core/adapters/onnx/embedder-thread.ts";
import { CachingEmbedder } from "../core/caching-embedder.ts";
import type { Config } from "../core/config.ts";
import { type LlmMetricsTarget, metricsUsageSink } from "../core/llm-metering.ts";
import type { Embedder, EmbedderStats, LlmUsageSink, QueryPlanner, SegmentEncoder } from "../core/ports.ts";
import { ExtractiveEncoder } from "../encoder/encode-segment.ts";
import { LlmEncoder } from "../encoder/llm-encoder.ts";
import { type CandidateSettings, DEFAULT_CANDIDATE_SETTINGS } from "../indexer/candidates.ts";
import { LlmPlanner } from "../query/llm-planner.ts";
import type { QuerySettings } from "../query/query.ts";
import type { SecondOpinion } from "../query/second-opinion.ts";
import { type BoundaryMode, DEFAULT_ATTENTION } from "../segmenter/attention-rule.ts";
import { DEFAULT_GATE } from "../segmenter/gate.ts";
import type { SegmenterConfig } from "../segmenter/segment-state.ts";
import { type OpenedCompressor, openConfiguredCompressor } from "../sensory/onnx-compressor-config.ts";
import { tracedPortIfOn } from "./traced-port.ts";

/** The sentence embedder's folder under the model folder. */
export const EMBEDDER_DIR = "all-MiniLM-L6-v2";

/** onnxruntime intra-op threads of a process that embeds alone (embedded runtime, query, CLI, benches). */
export const EMBEDDER_THREADS = 2;

/**
 * Intra-op threads of a pipeline stage process's embedder (sensory, segmenter, indexer) when
 * MEMORY_EMBEDDER_THREADS is unset. The stages scale by processes and partitions, and two of them
 * embed at the same time (sensory: each turn, indexer: each record text): with 2 threads each they
 * ask for twice the cores a host gives them, and a second intra-op thread costs CPU to hand work
 * over and wake up. Measured on conv-26's 419 turn texts, in one process, alternated, 2 loaded
 * cores: 1 thread used 9–16% less CPU than 2 for the same, bit-identical vectors (docs/benchmarks.md,
 * "Stage CPU per turn (fourth pass)").
 */
export const STAGE_EMBEDDER_THREADS = 1;

/** The embedder's model folder under the configured model folder. */
const embedderDirOf = (config: Pick<Config, "modelDir">): string => join(config.modelDir, EMBEDDER_DIR);

/** The configured model file and intra-op threads (the process kind's default when unset), for either loader. */
const embedderOptionsOf = (
  config: Partial<Pick<Config, "embedder">>,
  defaultThreads: number,
): { variant?: OnnxVariant; threads: number } => ({
  ...(config.embedder ? { variant: config.embedder.variant } : {}),
  threads: embedderThreadsOf(config, defaultThreads),
});

/**
 * The ONNX sentence embedder from the model folder (nothing is downloaded). Its intra-op threads:
 * config.embedder.threads when set, else options.defaultThreads, else EMBEDDER_THREADS.
 */
export const openEmbedder = (
  config: Pick<Config, "modelDir"> & Partial<Pick<Config, "embedder">>,
  options: { batchSize?: number; defaultThreads?: number } = {},
): Promise<OnnxEmbedder> => {
  const { defaultThreads, ...rest } = options;
  return loadOnnxEmbedder(embedderDirOf(config), {
    ...embedderOptionsOf(config, defaultThreads ?? EMBEDDER_THREADS),
    ...rest,
  });
};

/** The embedder's intra-op threads: the configured count, else the process kind's default. */
export const embedderThreadsOf = (config: Partial<Pick<Config, "embedder">>, defaultThreads: number): number =>
  config.embedder?.threads ?? defaultThreads;

/** A pipeline stage process's embedder: openEmbedder with STAGE_EMBEDDER_THREADS unless configured. */
export const openStageEmbedder = (config: Pick<Config, "modelDir" | "embedder">): Promise<OnnxEmbedder> =>
  openEmbedder(config, { defaultThreads: STAGE_EMBEDDER_THREADS });

/**
 * The ONNX sentence embedder on a worker thread (embedder-thread.ts): same model, vectors and
 * options as openEmbedder, but a forward pass no longer holds the event loop. The query service
 * embeds a question while the graph routes read the stores (query/query.ts runQuery), so a query
 * takes about the longer of the two instead of their sum; the embedded engine's acks, probes and
 * queries no longer wait behind its ingest's passes. `onFailure`: the worker thread died (its owner
 * decides what a dead model means for its process).
 */
export const openEmbedderThread = (
  config: Pick<Config, "modelDir"> & Partial<Pick<Config, "embedder">>,
  options: { batchSize?: number; defaultThreads?: number; onFailure?: (err: Error) => void } = {},
): Promise<ThreadedOnnxEmbedder> => {
  const { defaultThreads, onFailure, ...rest } = options;
  return loadThreadedOnnxEmbedder(
    embedderDirOf(config),
    { ...embedderOptionsOf(config, defaultThreads ?? EMBEDDER_THREADS), ...rest },
    onFailure,
  );
};

/**
 * A pipeline stage process's embedder on a worker thread: the indexer's, whose records consumer
 * embeds a chunk's next segment while the current one's store round trips run
 * (indexer/embedding-prefetch.ts). Same threads setting as openStageEmbedder.
 */
export const openStageEmbedderThread = (
  config: Pick<Config, "modelDir" | "embedder">,
  onFailure?: (err: Error) => void,
): Promise<ThreadedOnnxEmbedder> =>
  openEmbedderThread(config, { defaultThreads: STAGE_EMBEDDER_THREADS, ...(onFailure ? { onFailure } : {}) });

/** The second-opinion model's folder under the model folder (config.secondOpinion). */
export const SECOND_OPINION_DIR = "bge-small-en-v1.5";

/**
 * The second-opinion embedder (query/second-opinion.ts) on a worker thread when
 * config.secondOpinion is on, else undefined; threads as the first embedder's. A missing model
 * folder is an error that names the setup step, not a silent fallback to one model.
 */
export const openSecondOpinionEmbedder = async (
  config: Pick<Config, "modelDir" | "secondOpinion"> & Partial<Pick<Config, "embedder">>,
  options: { defaultThreads?: number; onFailure?: (err: Error) => void } = {},
): Promise<ThreadedOnnxEmbedder | undefined> => {
  if (!config.secondOpinion.enabled) return undefined;
  const { variant } = config.secondOpinion;
  const dir = join(config.modelDir, SECOND_OPINION_DIR);
  // The setup step fetches the int8 file always and the fp32 file only when asked for it.
  const setup = `run \`${variant === "fp32" ? "MEMORY_SECOND_OPINION_VARIANT=fp32 " : ""}node scripts/setup.mjs\` (it fetches the model from Maven Central)`;
  if (!existsSync(join(dir, "manifest.json"))) {
    throw new Error(`secondOpinion is on (MEMORY_SECOND_OPINION) but ${dir}/manifest.json is missing: ${setup}`);
  }
  return loadThreadedOnnxEmbedder(
    dir,
    { variant, threads: embedderThreadsOf(config, options.defaultThreads ?? EMBEDDER_THREADS) },
    options.onFailure,
  ).catch((err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`secondOpinion (MEMORY_SECOND_OPINION) could not load its ${variant} model: ${message}; ${setup}`, {
      cause: err,
    });
  });
};

/** What the query needs of the second opinion: the model and its list's weight. */
export const secondOpinionOf = (
  config: Pick<Config, "secondOpinion">,
  embedder: Embedder | undefined,
): SecondOpinion | undefined => (embedder ? { embedder, weight: config.secondOpinion.weight } : undefined);

/**
 * The segmenter's turn attention (attention.onnx beside the embedder, built by the setup step)
 * when the configured boundaries use it, else undefined: mode gate loads nothing.
 */
export const openTurnAttention = async (
  config: Pick<Config, "modelDir">,
  boundaries: BoundaryMode = "gate",
): Promise<OnnxTurnAttention | undefined> =>
  boundaries === "gate" ? undefined : loadOnnxTurnAttention(embedderDirOf(config));

/** Reports every embedding call (calls, texts), whoever makes it (segmenter, indexer, query). */
export const observedEmbedder = (inner: Embedder, report?: (calls: number, texts: number) => void): Embedder =>
  report
    ? {
        id: inner.id,
        get dimension(): number {
          return inner.dimension;
        },
        stats: (): EmbedderStats => inner.stats(),
        embed: async (texts) => {
          const out = await inner.embed(texts);
          report(1, texts.length);
          return out;
        },
      }
    : inner;

/**
 * The embedder a stage uses: cached (`cacheEntries`: config cache.embeddingEntries), and counted when
 * `report` is given; a span per model call when tracing is on.
 */
export const stageEmbedder = (
  inner: Embedder,
  report?: (calls: number, texts: number) => void,
  cacheEntries?: number,
): Embedder => new CachingEmbedder(observedEmbedder(tracedPortIfOn(inner, "embedder"), report), cacheEntries);

/** The configured turn compressor (statistical unless an ONNX token classifier is configured or present). */
export const openCompressor = (config: Pick<Config, "sensory" | "modelDir">): Promise<OpenedCompressor> =>
  openConfiguredCompressor(config.sensory.compressor, config.modelDir);

/** Which of the LLM's users a process runs: it opens the LLM only when one of them is configured to use it. */
export interface LlmUsers {
  encoder?: boolean;
  planner?: boolean;
  /** `memory ask`: answers with whatever provider is configured. */
  answer?: boolean;
}

/**
 * The configured LLM when a stage this process runs asks for it (llm.encoder / llm.planner =
 * "llm"), else undefined. Calls are reported to `usage` (a sink, or a metrics registry).
 */
export const openLlm = async (
  config: Pick<Config, "llm" | "modelDir">,
  users: LlmUsers,
  usage?: LlmUsageSink | LlmMetricsTarget,
): Promise<ClosableLlm | undefined> => {
  const wanted =
    (users.encoder === true && config.llm.encoder === "llm") ||
    (users.planner === true && config.llm.planner === "llm") ||
    (users.answer === true && config.llm.provider !== "none");
  if (!wanted) return undefined;
  const usageSink = typeof usage === "function" ? usage : usage ? metricsUsageSink(usage) : undefined;
  const llm = await createLlm(config.llm, { modelDir: config.modelDir, ...(usageSink ? { usageSink } : {}) });
  return llm && tracedPortIfOn(llm, "llm");
};

/** The record encoder: the LLM's when configured and opened, else the deterministic extractor. */
export const encoderFrom = (config: Pick<Config, "llm">, llm?: ClosableLlm): SegmentEncoder =>
  llm && config.llm.encoder === "llm"
    ? new LlmEncoder(llm, { contextTokenCap: config.llm.contextTokenCap, batchSegments: config.llm.batchSegments })
    : new ExtractiveEncoder();

/** The query planner: the LLM's when configured and opened, else undefined (the deterministic default). */
export const plannerFrom = (config: Pick<Config, "llm">, llm?: ClosableLlm): QueryPlanner | undefined =>
  llm && config.llm.planner === "llm" ? new LlmPlanner(llm) : undefined;

/** Query settings (budget, fusion, diversity, depths): config.query, whose schema holds the defaults. */
export const querySettingsFrom = (config: Pick<Config, "query">): QuerySettings => ({
  budget: config.query.budget,
  rrfK: config.query.rrfK,
  mmrLambda: config.query.mmrLambda,
  routeDepth: config.query.routeDepth,
  candidates: config.query.candidates,
});

/** The segmenter's boundary gate and short-term buffer. */
export const segmenterSettingsFrom = (config: Pick<Config, "segmenter">): SegmenterConfig => ({
  gate: { ...DEFAULT_GATE, threshold: config.segmenter.threshold, hardCapTokens: config.segmenter.hardCapTokens },
  boundaries: config.segmenter.boundaries,
  attention: DEFAULT_ATTENTION,
  bufferTokens: config.segmenter.bufferTokens,
  idleTimeoutMs: config.segmenter.idleTimeoutMs,
});

/** How the indexer picks update candidates for the consolidator. */
export const candidateSettingsFrom = (config: Pick<Config, "consolidation">): CandidateSettings => ({
  ...DEFAULT_CANDIDATE_SETTINGS,
  similarityThreshold: config.consolidation.similarityThreshold,
});
