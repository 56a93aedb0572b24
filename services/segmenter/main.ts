/**
 * Segmenter stage process (distributed runtime): memory.sensory.v1 -> memory.segments.v1, keyed
 * state in memory.segmenter-state.v1. Idle keys are flushed by a periodic tick
 * (MEMORY_IDLE_TIMEOUT_MS). Env as for every stage; MEMORY_METRICS_PORT defaults to 9102.
 */
import { openStageEmbedder, openTurnAttention, segmenterSettingsFrom, stageEmbedder } from "../composition/parts.ts";
import { runStageProcess } from "../core/adapters/kafka/process.ts";
import { loadProcessConfig } from "../core/config.ts";
import { setupTracing } from "../platform/tracing.ts";
import { AttentionScorer } from "./attention-scorer.ts";
import { segmenterStage } from "./kafka-handler.ts";

const config = loadProcessConfig();
await setupTracing("segmenter"); // MEMORY_TRACING (docs/tracing.md); off by default
await runStageProcess({
  stage: "segmenter",
  config,
  defaultMetricsPort: 9102,
  build: async ({ codecs, stateCodec, metrics }) => {
    const model = await openStageEmbedder(config);
    const attention = await openTurnAttention(config, config.segmenter.boundaries);
    return {
      handler: segmenterStage({
        input: codecs.sensory,
        output: codecs.segments,
        stateCodec,
        embedder: stageEmbedder(
          model,
          (calls, texts) => metrics.embedding(calls, texts),
          config.cache.embeddingEntries,
        ),
        cfg: segmenterSettingsFrom(config),
        ...(attention ? { attention: new AttentionScorer(attention, config.cache.attentionPairs) } : {}),
      }),
      close: async () => {
        await model.close();
        await attention?.close();
      },
    };
  },
});
