import { join } from "node:path";
import type { ConsolidationDecider } from "../consolidator/types.ts";
import { HnswVectorStore } from "../core/adapters/hnsw/vector-store.ts";
import {
  type ClosableLlm,
  createLlm,
  isLlmMetricsTarget,
  type LlmUsageSink,
  metricsUsageSink,
} from "../core/adapters/llm-factory.ts";
import { loadOnnxEmbedder } from "../core/adapters/onnx/embedder.ts";
import { SqliteGraphStore } from "../core/adapters/sqlite/graph-store.ts";
import { SqliteStateStore } from "../core/adapters/sqlite/state-store.ts";
import { openSqlite } from "../core/adapters/sqlite-db.ts";
import { CachingEmbedder } from "../core/caching-embedder.ts";
import { type Config, cursorSecretOf } from "../core/config.ts";
import type { Compressor, Embedder, EmbedderStats, QueryPlanner, SegmentEncoder } from "../core/ports.ts";
import { ExtractiveEncoder } from "../encoder/encode-segment.ts";
import { LlmEncoder } from "../encoder/llm-encoder.ts";
import { LlmPlanner } from "../query/llm-planner.ts";
import { DEFAULT_GATE } from "../segmenter/gate.ts";
import { openConfiguredCompressor } from "../sensory/onnx-compressor-config.ts";
import { DurableLog } from "./durable-log.ts";
import { EmbeddedEngine, type EngineSettings, type PipelineObserver } from "./engine.ts";

export const EMBEDDER_DIR = "all-MiniLM-L6-v2";

/**
 * Texts per forward pass of the embedded engine's embedder. onnxruntime-node (1.30) runs
 * session.run on the main thread (a setImmediate, then a synchronous run), so each pass holds the
 * event loop; the loop turns between passes. Passes of 8 texts instead of 32 keep acks and /healthz
 * waiting a quarter as long behind one, for little throughput (CPU inference gains little from
 * larger batches).
 */
export const EMBEDDED_EMBED_BATCH = 8;

export interface OpenOptions {
  embedder?: Embedder;
  compressor?: Compressor;
  /** Default: the deterministic extractor (no LLM). */
  encoder?: SegmentEncoder;
  /** Default: the deterministic planner. */
  planner?: QueryPlanner;
  /**
   * Where LLM calls (config.llm) are reported: stage, tenant, tokens, ms. Default: the observer
   * when it takes LLM calls (gateway Metrics does).
   */
  llmUsage?: LlmUsageSink;
  observer?: PipelineObserver & { embedding?(calls: number, texts: number): void };
  settings?: Partial<EngineSettings>;
  /** Consolidation strategy (default: the deterministic rules). */
  decider?: ConsolidationDecider;
}

export interface OpenedEngine {
  engine: EmbeddedEngine;
  embedder: Embedder;
  /** Drains, stops the stages, persists the vector index and closes the database. */
  close(): Promise<void>;
}

/** Reports every embedding call to the observer, whoever makes it (segmenter, indexer, query). */
const observed = (inner: Embedder, report?: (calls: number, texts: number) => void): Embedder =>
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

export const engineSettingsFrom = (config: Config): EngineSettings => ({
  keepRate: config.sensory.keepRate,
  segmenter: {
    gate: { ...DEFAULT_GATE, threshold: config.segmenter.threshold, hardCapTokens: config.segmenter.hardCapTokens },
    bufferTokens: config.segmenter.bufferTokens,
    idleTimeoutMs: config.segmenter.idleTimeoutMs,
  },
  query: {
    budget: config.query.budget,
    rrfK: config.query.rrfK,
    mmrLambda: config.query.mmrLambda,
    routeDepth: 40,
    candidates: 80,
  },
  queueCapacity: config.runtime.queueCapacity,
  batchSize: 32,
  consolidation: config.consolidation,
});

/** The embedded default: SQLite + HNSW in the data folder, the ONNX embedder from the model folder. */
export const openEmbeddedEngine = async (config: Config, options: OpenOptions = {}): Promise<OpenedEngine> => {
  const embedder =
    options.embedder ??
    (await loadOnnxEmbedder(join(config.modelDir, EMBEDDER_DIR), { batchSize: EMBEDDED_EMBED_BATCH }));
  // The configured compressor (statistical unless an ONNX token classifier is configured or present).
  const compressor = options.compressor
    ? { compressor: options.compressor, close: async () => {} }
    : await openConfiguredCompressor(config.sensory.compressor, config.modelDir);
  const db = openSqlite(config.dataDir);
  const graph = new SqliteGraphStore(db, { cursorSecret: cursorSecretOf(config) });
  const state = new SqliteStateStore(db);
  const vectors = new HnswVectorStore(db, config.dataDir, { compactDeletedRatio: config.vectors.compactDeletedRatio });
  const log = new DurableLog(db);
  // The LLM, when config.llm asks a stage for it and no explicit encoder/planner replaces that stage.
  const wantsLlm =
    (config.llm.encoder === "llm" && !options.encoder) || (config.llm.planner === "llm" && !options.planner);
  const usageSink =
    options.llmUsage ?? (isLlmMetricsTarget(options.observer) ? metricsUsageSink(options.observer) : undefined);
  const llm: ClosableLlm | undefined = wantsLlm
    ? await createLlm(config.llm, { modelDir: config.modelDir, ...(usageSink ? { usageSink } : {}) })
    : undefined;
  const encoder =
    options.encoder ??
    (llm && config.llm.encoder === "llm"
      ? new LlmEncoder(llm, { contextTokenCap: config.llm.contextTokenCap, batchSegments: config.llm.batchSegments })
      : new ExtractiveEncoder());
  const planner = options.planner ?? (llm && config.llm.planner === "llm" ? new LlmPlanner(llm) : undefined);
  const engine = new EmbeddedEngine(
    {
      log,
      graph,
      vectors,
      state,
      embedder: new CachingEmbedder(observed(embedder, options.observer?.embedding?.bind(options.observer))),
      compressor: compressor.compressor,
      encoder,
      ...(planner ? { planner } : {}),
      ...(options.observer ? { observer: options.observer } : {}),
      ...(options.decider ? { decider: options.decider } : {}),
    },
    { ...engineSettingsFrom(config), ...options.settings },
  );
  await engine.start();
  return {
    engine,
    embedder,
    close: async () => {
      await engine.close();
      await vectors.close();
      await graph.close();
      db.close();
      await llm?.close?.();
      if (!options.embedder) await embedder.close?.();
      await compressor.close();
    },
  };
};
