/**
 * What a pipeline test that runs stage processes on the Neo4j runtime opens first: its own topic
 * prefix and tenant, the stage processes' environment (real embedder, metrics on an ephemeral port),
 * a Kafka client, registry serdes, a producer, the Neo4j stores and the embedder. The test closes
 * what it opened (it knows when).
 */
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { openEmbedder } from "../../../services/composition/parts.ts";
import { openStores } from "../../../services/composition/stores.ts";
import { kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import { RegistrySerdes } from "../../../services/core/adapters/kafka/serde.ts";
import { loadConfig } from "../../../services/core/config.ts";
import { ROOT } from "../distributed/helpers.ts";
import { runPrefix, testEnv } from "./helpers.ts";

export const openNeo4jPipelineRun = async (name: string) => {
  const prefix = runPrefix(name);
  const tenant = `${name}-${randomUUID().slice(0, 8)}`;
  const env = testEnv(prefix, {
    MEMORY_METRICS_PORT: "0",
    MEMORY_MODEL_DIR: join(ROOT, "models"),
    MEMORY_STORE: "neo4j",
  });
  const config = loadConfig({}, env);
  const kafka = kafkaClient(config, `${name}-test`);
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const producer = kafka.producer();
  const stores = await openStores(config, "neo4j");
  const embedder = await openEmbedder(config);
  return { prefix, tenant, env, config, kafka, serdes, producer, stores, embedder };
};
