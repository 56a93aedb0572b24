/**
 * Sensory stage process (distributed runtime): memory.turns.v1 -> memory.sensory.v1.
 * Env: KAFKA_BROKERS, SCHEMA_REGISTRY_URL, MEMORY_TOPIC_PREFIX, MEMORY_METRICS_PORT (default 9101), and
 * the usual MEMORY_* configuration (keep rate, compressor).
 */
import { metricsPortFromEnv, runStageProcess } from "../core/adapters/kafka/process.ts";
import { loadConfig } from "../core/config.ts";
import { sensoryStage } from "./kafka-handler.ts";
import { openConfiguredCompressor } from "./onnx-compressor-config.ts";

const config = loadConfig();
await runStageProcess({
  stage: "sensory",
  config,
  metricsPort: metricsPortFromEnv(9101),
  build: async ({ codecs }) => {
    const compressor = await openConfiguredCompressor(config.sensory.compressor, config.modelDir);
    return {
      handler: sensoryStage({
        input: codecs.turns,
        output: codecs.sensory,
        compressor: compressor.compressor,
        keepRate: config.sensory.keepRate,
      }),
      close: () => compressor.close(),
    };
  },
});
