/**
 * Indexer stage process (distributed runtime): memory.records.v1 -> the stores (MEMORY_STORE=
 * embedded|neo4j) and memory.update-queue.v1. A sink: store writes are idempotent upserts, the
 * update-queue entries and the consumed offsets commit in one transaction. MEMORY_METRICS_PORT
 * defaults to 9104.
 */
import { join } from "node:path";
import { metricsPortFromEnv, runStageProcess } from "../core/adapters/kafka/process.ts";
import { loadOnnxEmbedder } from "../core/adapters/onnx/embedder.ts";
import { openStores, storeKindFromEnv } from "../core/adapters/open-stores.ts";
import { CachingEmbedder } from "../core/caching-embedder.ts";
import { loadConfig } from "../core/config.ts";
import { DEFAULT_CANDIDATE_SETTINGS } from "./candidates.ts";
import { indexerStage } from "./kafka-handler.ts";

const config = loadConfig();
await runStageProcess({
  stage: "indexer",
  config,
  metricsPort: metricsPortFromEnv(9104),
  build: async ({ codecs, metrics, log }) => {
    const model = await loadOnnxEmbedder(join(config.modelDir, "all-MiniLM-L6-v2"));
    const stores = await openStores(config, storeKindFromEnv());
    log("info", "stores opened", { store: stores.kind });
    return {
      handler: indexerStage({
        input: codecs.records,
        output: codecs.updateQueue,
        graph: stores.graph,
        vectors: stores.vectors,
        embedder: new CachingEmbedder(model),
        candidates: { ...DEFAULT_CANDIDATE_SETTINGS, similarityThreshold: config.consolidation.similarityThreshold },
        onIndexed: (n) => metrics.recordsWritten(n),
      }),
      close: async () => {
        await stores.close();
        await model.close();
      },
    };
  },
});
