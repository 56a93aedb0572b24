/**
 * Indexer stage process (distributed runtime): memory.records.v1 -> the stores (MEMORY_STORE=
 * embedded|neo4j, MEMORY_VECTOR_STORE) and memory.update-queue.v1. A sink: store writes are
 * idempotent upserts, the update-queue entries and the consumed offsets commit in one transaction.
 * MEMORY_METRICS_PORT defaults to 9104.
 */
import { candidateSettingsFrom, openEmbedder, stageEmbedder } from "../composition/parts.ts";
import { openStores } from "../composition/stores.ts";
import { runStageProcess } from "../core/adapters/kafka/process.ts";
import { loadProcessConfig } from "../core/config.ts";
import { setupTracing } from "../platform/tracing.ts";
import { indexerStage } from "./kafka-handler.ts";

const config = loadProcessConfig();
await setupTracing("indexer"); // MEMORY_TRACING (docs/tracing.md); off by default
await runStageProcess({
  stage: "indexer",
  config,
  defaultMetricsPort: 9104,
  build: async ({ codecs, metrics, log }) => {
    const model = await openEmbedder(config);
    const stores = await openStores(config);
    log("info", "stores opened", { store: stores.kind, where: stores.label });
    return {
      handler: indexerStage({
        input: codecs.records,
        output: codecs.updateQueue,
        graph: stores.graph,
        vectors: stores.vectors,
        embedder: stageEmbedder(model),
        candidates: candidateSettingsFrom(config),
        onIndexed: (n) => metrics.recordsWritten(n),
        onErased: (e) => log("info", "erased again", { ...e }),
      }),
      close: async () => {
        await stores.close();
        await model.close();
      },
    };
  },
});
