/**
 * The embedded runtime from the configuration: its parts come from the composition root
 * (services/composition), its stores are the SQLite ones in the data folder, with the durable log
 * and the keyed state on the same database.
 */
import {
  EMBEDDER_DIR,
  encoderFrom,
  openCompressor,
  openEmbedderThread,
  openLlm,
  openSecondOpinionEmbedder,
  openTurnAttention,
  plannerFrom,
  querySettingsFrom,
  secondOpinionOf,
  segmenterSettingsFrom,
  stageEmbedder,
} from "../composition/parts.ts";
import { openSqliteStores } from "../composition/stores.ts";
import type { ConsolidationDecider } from "../consolidator/types.ts";
import { SqliteStateStore } from "../core/adapters/sqlite/state-store.ts";
import type { Config } from "../core/config.ts";
import { isLlmMetricsTarget } from "../core/llm-metering.ts";
import type { Compressor, Embedder, LlmUsageSink, QueryPlanner, SegmentEncoder, TurnAttention } from "../core/ports.ts";
import { DurableLog } from "./durable-log.ts";
import { EmbeddedEngine, type EngineSettings, type PipelineObserver } from "./engine.ts";

export { EMBEDDER_DIR };

/**
 * Texts per forward pass of the embedded engine's embedder. The model runs on a worker thread
 * (composition/parts.ts openEmbedderThread), one call at a time: a question's embedding waits in
 * its queue behind the ingest's pass in progress, so passes of 8 texts instead of 32 keep a query
 * waiting a quarter as long behind one, for little throughput (CPU inference gains little from
 * larger batches). On the main thread (onnxruntime-node runs session.run on the calling thread)
 * each pass held the event loop: acks, probes and queries waited behind it.
 */
export const EMBEDDED_EMBED_BATCH = 8;

export interface OpenOptions {
  embedder?: Embedder;
  /** The second-opinion model (default: bge-small-en-v1.5 from the model folder when config.secondOpinion is on). */
  secondEmbedder?: Embedder;
  compressor?: Compressor;
  /** Default: the deterministic extractor (no LLM). */
  encoder?: SegmentEncoder;
  /** Default: the deterministic planner. */
  planner?: QueryPlanner;
  /**
   * Where LLM calls (config.llm) are reported: stage, tenant, tokens, ms. Default: the observer
   * when it takes LLM calls (platform Metrics does).
   */
  llmUsage?: LlmUsageSink;
  observer?: PipelineObserver & { embedding?(calls: number, texts: number): void };
  settings?: Partial<EngineSettings>;
  /** Consolidation strategy (default: the deterministic rules). */
  decider?: ConsolidationDecider;
  /** The segmenter's turn attention (default: attention.onnx from the model folder when the boundaries use it). */
  attention?: TurnAttention;
}

export interface OpenedEngine {
  engine: EmbeddedEngine;
  embedder: Embedder;
  /** The second-opinion model, when config.secondOpinion is on (or one was given). */
  secondEmbedder?: Embedder;
  /** Drains, stops the stages, persists the vector index and closes the database. */
  close(): Promise<void>;
}

export const engineSettingsFrom = (config: Config): EngineSettings => ({
  keepRate: config.sensory.keepRate,
  segmenter: segmenterSettingsFrom(config),
  query: querySettingsFrom(config),
  queueCapacity: config.runtime.queueCapacity,
  batchSize: 32,
  conversationStates: config.cache.conversationStates,
  attentionPairs: config.cache.attentionPairs,
  consolidation: config.consolidation,
});

/** The embedded default: SQLite + HNSW in the data folder, the ONNX embedder from the model folder. */
export const openEmbeddedEngine = async (config: Config, options: OpenOptions = {}): Promise<OpenedEngine> => {
  // The engine is built below; a dead worker thread halts it (engine.halt) instead of failing every
  // turn after it, which the poison rules would dead-letter.
  let halt: ((err: Error) => void) | undefined;
  let failedEarly: Error | undefined;
  const embedder =
    options.embedder ??
    (await openEmbedderThread(config, {
      batchSize: EMBEDDED_EMBED_BATCH,
      onFailure: (err) => {
        const failure = new Error(`the embedding model's worker thread failed: ${err.message}`);
        if (halt) halt(failure);
        else failedEarly = failure;
      },
    }));
  const secondEmbedder =
    options.secondEmbedder ??
    (await openSecondOpinionEmbedder(config, {
      onFailure: (err) => {
        const failure = new Error(`the second-opinion model's worker thread failed: ${err.message}`);
        if (halt) halt(failure);
        else failedEarly = failure;
      },
    }).catch(async (err: unknown) => {
      // The first model's worker thread would otherwise outlive the failed open.
      if (!options.embedder) await embedder.close?.();
      throw err;
    }));
  // Counted, cached and traced as the first model is: the bench's and the observer's embedding
  // calls are both models' work.
  const secondOpinion = secondOpinionOf(
    config,
    secondEmbedder
      ? stageEmbedder(
          secondEmbedder,
          options.observer?.embedding?.bind(options.observer),
          config.cache.embeddingEntries,
        )
      : undefined,
  );
  const compressor = options.compressor
    ? { compressor: options.compressor, close: async () => {} }
    : await openCompressor(config);
  const stores = openSqliteStores(config);
  const { db, graph, vectors } = stores;
  const state = new SqliteStateStore(db);
  const log = new DurableLog(db);
  // The LLM, when config.llm asks a stage for it and no explicit encoder/planner replaces that stage.
  const usage = options.llmUsage ?? (isLlmMetricsTarget(options.observer) ? options.observer : undefined);
  const llm = await openLlm(config, { encoder: !options.encoder, planner: !options.planner }, usage);
  const encoder = options.encoder ?? encoderFrom(config, llm);
  const planner = options.planner ?? plannerFrom(config, llm);
  const settings = { ...engineSettingsFrom(config), ...options.settings };
  const opened = options.attention ? undefined : await openTurnAttention(config, settings.segmenter.boundaries);
  const attention = options.attention ?? opened;
  const engine = new EmbeddedEngine(
    {
      log,
      graph,
      vectors,
      state,
      embedder: stageEmbedder(
        embedder,
        options.observer?.embedding?.bind(options.observer),
        config.cache.embeddingEntries,
      ),
      ...(secondOpinion ? { secondOpinion } : {}),
      compressor: compressor.compressor,
      encoder,
      ...(planner ? { planner } : {}),
      ...(options.observer ? { observer: options.observer } : {}),
      ...(options.decider ? { decider: options.decider } : {}),
      ...(attention ? { attention } : {}),
    },
    settings,
  );
  halt = (err) => engine.halt(err);
  if (failedEarly) engine.halt(failedEarly);
  await engine.start();
  return {
    engine,
    embedder,
    ...(secondEmbedder ? { secondEmbedder } : {}),
    close: async () => {
      await engine.close();
      await stores.close();
      await llm?.close?.();
      if (!options.embedder) await embedder.close?.();
      if (!options.secondEmbedder) await secondEmbedder?.close?.();
      await opened?.close();
      await compressor.close();
    },
  };
};
