/**
 * Segmenter stage process (distributed runtime): memory.sensory.v1 -> memory.segments.v1, keyed
 * state in memory.segmenter-state.v1. Idle keys are flushed by a periodic tick
 * (MEMORY_IDLE_TIMEOUT_MS). Env as for every stage; MEMORY_METRICS_PORT defaults to 9102.
 */
import { join } from "node:path";
import { metricsPortFromEnv, runStageProcess } from "../core/adapters/kafka/process.ts";
import { loadOnnxEmbedder } from "../core/adapters/onnx/embedder.ts";
import { CachingEmbedder } from "../core/caching-embedder.ts";
import { loadConfig } from "../core/config.ts";
import { DEFAULT_GATE } from "./gate.ts";
import { segmenterStage } from "./kafka-handler.ts";

const config = loadConfig();
await runStageProcess({
  stage: "segmenter",
  config,
  metricsPort: metricsPortFromEnv(9102),
  build: async ({ codecs, stateCodec, metrics }) => {
    const model = await loadOnnxEmbedder(join(config.modelDir, "all-MiniLM-L6-v2"));
    const embedder = new CachingEmbedder({
      id: model.id,
      get dimension() {
        return model.dimension;
      },
      stats: () => model.stats(),
      embed: async (texts) => {
        const v = await model.embed(texts);
        metrics.embedding(1, texts.length);
        return v;
      },
    });
    return {
      handler: segmenterStage({
        input: codecs.sensory,
        output: codecs.segments,
        stateCodec,
        embedder,
        cfg: {
          gate: {
            ...DEFAULT_GATE,
            threshold: config.segmenter.threshold,
            hardCapTokens: config.segmenter.hardCapTokens,
          },
          bufferTokens: config.segmenter.bufferTokens,
          idleTimeoutMs: config.segmenter.idleTimeoutMs,
        },
      }),
      close: () => model.close(),
    };
  },
});
