/**
 * Encoder stage process (distributed runtime): memory.segments.v1 -> memory.records.v1, keyed
 * state (disambiguation context) in memory.encoder-state.v1. The deterministic extractor unless
 * MEMORY_LLM_ENCODER=llm (with MEMORY_LLM_PROVIDER). MEMORY_METRICS_PORT defaults to 9103.
 */
import { encoderFrom, openLlm } from "../composition/parts.ts";
import { runStageProcess } from "../core/adapters/kafka/process.ts";
import { loadProcessConfig } from "../core/config.ts";
import { setupTracing } from "../platform/tracing.ts";
import { encoderStage } from "./kafka-handler.ts";

const config = loadProcessConfig();
await setupTracing("encoder"); // MEMORY_TRACING (docs/tracing.md); off by default
await runStageProcess({
  stage: "encoder",
  config,
  defaultMetricsPort: 9103,
  build: async ({ codecs, stateCodec, metrics }) => {
    const llm = await openLlm(config, { encoder: true }, metrics);
    const encoder = encoderFrom(config, llm);
    return {
      handler: encoderStage({
        input: codecs.segments,
        output: codecs.records,
        stateCodec,
        encoder,
        onCost: (tenant, cost) => metrics.constructionTokens(encoder.id, tenant, cost),
      }),
      close: async () => {
        await llm?.close?.();
      },
    };
  },
});
