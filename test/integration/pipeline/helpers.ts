/** Shared helpers of the pipeline integration tests (real Kafka + schema registry). */
import { randomUUID } from "node:crypto";
import { type Consumer, type Kafka, Kafka as KafkaClient, type KafkaMessage, logLevel } from "kafkajs";
import { CONTROL_HEADER } from "../../../services/core/adapters/kafka/topics.ts";
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

/**
 * Everything on `topic` (read_committed unless asked, from the beginning) up to the partitions' high watermarks
 * taken now: resolves once the reader has passed every partition's end, commit markers included
 * (kafkajs reports them through END_BATCH_PROCESS even when a batch holds no data message), so
 * nothing that was committed before the call can be missing and nothing is waited for by sleeping.
 */
export const readAll = async (
  kafka: Kafka,
  topic: string,
  ms = 60_000,
  readUncommitted = false,
): Promise<{ key: string; value: Buffer | null; control: boolean; partition: number; offset: string }[]> => {
  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic);
  const target = new Map(ends.map((e) => [e.partition, BigInt(e.high)]));
  const seen = new Map<number, bigint>();
  const out: { key: string; value: Buffer | null; control: boolean; partition: number; offset: string }[] = [];
  const groupId = `read-${randomUUID().slice(0, 8)}`;
  const consumer = kafka.consumer({ groupId, readUncommitted });
  consumer.on(consumer.events.END_BATCH_PROCESS, (e) => {
    const last = BigInt(e.payload.lastOffset);
    if (last > (seen.get(e.payload.partition) ?? -1n)) seen.set(e.payload.partition, last);
  });
  try {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        out.push({
          key: message.key?.toString() ?? "",
          value: message.value,
          control: message.headers?.[CONTROL_HEADER] !== undefined,
          partition,
          offset: message.offset,
        });
      },
    });
    await until(
      `${topic} read to its end`,
      () => [...target].every(([p, high]) => (seen.get(p) ?? -1n) >= high - 1n),
      ms,
    );
  } finally {
    await consumer.disconnect().catch(() => undefined);
    await admin.deleteGroups([groupId]).catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
  }
  return out.sort((a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)));
};

/**
 * Resolves when every given consumer group has committed up to the end of its input topic, twice
 * in a row. Inputs written in transactions end with a commit marker that takes an offset no
 * consumer commits past, so committed >= high watermark - 1 counts as drained.
 */
export const waitGroupsDrained = async (
  kafka: Kafka,
  groups: readonly { groupId: string; topic: string }[],
  ms = 90_000,
): Promise<void> => {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const end = Date.now() + ms;
    let streak = 0;
    let behind: Record<string, number> = {};
    while (streak < 2) {
      if (Date.now() > end) throw new Error(`not drained after ${ms} ms: ${JSON.stringify(behind)}`);
      behind = {};
      for (const { groupId, topic } of groups) {
        const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
        for (const e of await admin.fetchTopicOffsets(topic)) {
          const c = Number(committed?.partitions.find((p) => p.partition === e.partition)?.offset ?? -1);
          const gap = Number(e.high) - 1 - Math.max(0, c);
          if (gap > 0) behind[groupId] = (behind[groupId] ?? 0) + gap;
        }
      }
      streak = Object.keys(behind).length === 0 ? streak + 1 : 0;
      if (streak < 2) await sleep(250);
    }
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
};
