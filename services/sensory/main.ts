/**
 * Sensory stage process (distributed runtime): memory.turns.v1 -> memory.sensory.v1, each turn with
 * its embedding (the pipeline's one embedding of the turn: the segmenter and the indexer's raw-turn
 * consumer reuse it; services/core/adapters/kafka/turn-embedding.ts).
 * Env: KAFKA_BROKERS, SCHEMA_REGISTRY_URL, MEMORY_TOPIC_PREFIX, MEMORY_METRICS_PORT (default 9101), and
 * the usual MEMORY_* configuration (keep rate, compressor).
 */
import { openCompressor, openStageEmbedder, stageEmbedder } from "../composition/parts.ts";
import { runStageProcess } from "../core/adapters/kafka/process.ts";
import { loadProcessConfig } from "../core/config.ts";
import { setupTracing } from "../platform/tracing.ts";
import { sensoryStage } from "./kafka-handler.ts";

const config = loadProcessConfig();
await setupTracing("sensory"); // MEMORY_TRACING (docs/tracing.md); off by default
await runStageProcess({
  stage: "sensory",
  config,
  defaultMetricsPort: 9101,
  build: async ({ codecs, metrics }) => {
    const compressor = await openCompressor(config);
    const model = await openStageEmbedder(config);
    return {
      handler: sensoryStage({
        input: codecs.turns,
        output: codecs.sensory,
        compressor: compressor.compressor,
        keepRate: config.sensory.keepRate,
        embedder: stageEmbedder(
          model,
          (calls, texts) => metrics.embedding(calls, texts),
          config.cache.embeddingEntries,
        ),
      }),
      close: async () => {
        await compressor.close();
        await model.close();
      },
    };
  },
});
