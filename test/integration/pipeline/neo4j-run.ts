/**
 * What a pipeline test that runs stage processes on the Neo4j runtime opens first: its own topic
 * prefix and tenant, the stage processes' environment (real embedder, metrics on an ephemeral port),
 * a Kafka client, registry serdes, a producer, the Neo4j stores and the embedder. `close()` erases the
 * run's tenant and closes and removes all of that; the test stops its stage processes first.
 */
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { openEmbedder } from "../../../services/composition/parts.ts";
import { openStores } from "../../../services/composition/stores.ts";
import { kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import { RegistrySerdes } from "../../../services/core/adapters/kafka/serde.ts";
import { loadConfig } from "../../../services/core/config.ts";
import { ROOT } from "../distributed/helpers.ts";
import { deleteSubjects, deleteTopics, runPrefix, testEnv } from "./helpers.ts";

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
  const close = async (): Promise<void> => {
    await stores.graph.deleteTenant(tenant).catch(() => undefined);
    await stores.vectors.deleteTenant(tenant).catch(() => undefined);
    await stores.close();
    await embedder.close();
    await producer.disconnect().catch(() => undefined);
    await serdes.close().catch(() => undefined);
    await deleteTopics(kafka, prefix);
    await deleteSubjects(prefix);
  };
  return { prefix, tenant, env, config, kafka, serdes, producer, stores, embedder, close };
};
