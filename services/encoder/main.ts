/**
 * Encoder stage process (distributed runtime): memory.segments.v1 -> memory.records.v1, keyed
 * state (disambiguation context) in memory.encoder-state.v1. The deterministic extractor unless
 * MEMORY_LLM_ENCODER=llm (with MEMORY_LLM_PROVIDER). MEMORY_METRICS_PORT defaults to 9103.
 */
import { metricsPortFromEnv, runStageProcess } from "../core/adapters/kafka/process.ts";
import { createLlm } from "../core/adapters/llm-factory.ts";
import { loadConfig } from "../core/config.ts";
import { metricsUsageSink } from "../core/llm-metering.ts";
import { ExtractiveEncoder } from "./encode-segment.ts";
import { encoderStage } from "./kafka-handler.ts";
import { LlmEncoder } from "./llm-encoder.ts";

const config = loadConfig();
await runStageProcess({
  stage: "encoder",
  config,
  metricsPort: metricsPortFromEnv(9103),
  build: async ({ codecs, stateCodec, metrics }) => {
    const llm =
      config.llm.encoder === "llm"
        ? await createLlm(config.llm, {
            modelDir: config.modelDir,
            usageSink: metricsUsageSink(metrics),
          })
        : undefined;
    const encoder = llm
      ? new LlmEncoder(llm, { contextTokenCap: config.llm.contextTokenCap, batchSegments: config.llm.batchSegments })
      : new ExtractiveEncoder();
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
