/** Shared helpers of the pipeline integration tests (real Kafka + schema registry). */
import { randomUUID } from "node:crypto";
import { type Consumer, type Kafka, Kafka as KafkaClient, type KafkaMessage, logLevel } from "kafkajs";
import { type Config, loadConfig } from "../../../services/core/config.ts";

export const brokers = process.env.KAFKA_BROKERS;
export const registryUrl = process.env.SCHEMA_REGISTRY_URL;
export const skip =
  !brokers || !registryUrl
    ? 'KAFKA_BROKERS / SCHEMA_REGISTRY_URL not set: npm run infra:up; eval "$(bash infra/env.sh)"'
    : false;

/** A per-run topic prefix, so runs never share topics, groups or transactional ids. */
export const runPrefix = (name: string): string => `t-${name}-${randomUUID().slice(0, 8)}.`;

export const testEnv = (prefix: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  MEMORY_CONFIG: "/nonexistent/memory.config.json",
  MEMORY_TOPIC_PREFIX: prefix,
  MEMORY_KAFKA_SESSION_TIMEOUT_MS: "6000",
  ...extra,
});

export const testConfig = (prefix: string, extra: Record<string, string> = {}): Config =>
  loadConfig({}, testEnv(prefix, extra));

export const testKafka = (): Kafka =>
  new KafkaClient({
    clientId: `pipeline-test-${randomUUID().slice(0, 6)}`,
    brokers: (brokers ?? "").split(","),
    logLevel: process.env.KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.NOTHING,
    retry: { retries: 10, initialRetryTime: 100 },
  });

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves when `check()` is true, polling; rejects after `ms`. */
export const until = async (what: string, check: () => boolean, ms = 60_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms}ms waiting for ${what}`);
    await sleep(50);
  }
};

export interface Collected {
  messages: { key: string; value: Buffer | null; partition: number; offset: string; message: KafkaMessage }[];
  consumer: Consumer;
}

/** A read_committed consumer collecting everything on `topic` from the beginning. */
export const collect = async (kafka: Kafka, topic: string): Promise<Collected> => {
  const consumer = kafka.consumer({ groupId: `collect-${randomUUID().slice(0, 8)}`, readUncommitted: false });
  const out: Collected = { messages: [], consumer };
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      out.messages.push({
        key: message.key?.toString() ?? "",
        value: message.value,
        partition,
        offset: message.offset,
        message,
      });
    },
  });
  return out;
};

/** Deletes the registry subjects of the run's topics (best effort). */
export const deleteSubjects = async (prefix: string): Promise<void> => {
  if (!registryUrl) return;
  try {
    const subjects = (await (await fetch(`${registryUrl}/subjects`)).json()) as string[];
    for (const s of subjects.filter((x) => x.startsWith(prefix))) {
      await fetch(`${registryUrl}/subjects/${encodeURIComponent(s)}`, { method: "DELETE" });
      await fetch(`${registryUrl}/subjects/${encodeURIComponent(s)}?permanent=true`, { method: "DELETE" });
    }
  } catch {
    // best effort
  }
};

/** Deletes every topic that starts with the prefix (best effort). */
export const deleteTopics = async (kafka: Kafka, prefix: string): Promise<void> => {
  const admin = kafka.admin();
  try {
    await admin.connect();
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
    if (topics.length > 0) await admin.deleteTopics({ topics });
  } catch {
    // best effort
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
};
