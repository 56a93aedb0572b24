import kafkajs, { type Admin, type IResourceConfigEntry } from "kafkajs";

// kafkajs is CommonJS and Node's named-export detection misses these two (its exports object ends
// in a spread), so they come off the default export.
const { ConfigResourceTypes, ConfigSource } = kafkajs;

export interface TopicSpec {
  topic: string;
  partitions: number;
  /** cleanup.policy=compact (changelogs, the update queue). */
  compacted?: boolean;
}

/** How created topics are replicated (config.kafka: replicationFactor, minInsyncReplicas, allowSingleReplica). */
export interface Replication {
  replicationFactor: number;
  minInsyncReplicas?: number | undefined;
  /** Allow replication 1 on a cluster of several brokers (refused otherwise). */
  allowSingleReplica?: boolean | undefined;
}

/** The replication settings do not fit the cluster: a configuration error, never retried. */
export class ReplicationConfigError extends Error {
  override readonly name = "ReplicationConfigError";
}

/**
 * A running service must not quietly create unreplicated topics on a real cluster: replication 1
 * against more than one broker is a configuration left at its local default, and the first
 * broker lost would lose data. Throws unless explicitly allowed.
 */
export const checkReplication = (r: Replication, brokers: number): void => {
  if (r.replicationFactor === 1 && brokers > 1 && !r.allowSingleReplica)
    throw new ReplicationConfigError(
      `refusing to create topics with replication factor 1 on a cluster of ${brokers} brokers: ` +
        "set MEMORY_KAFKA_REPLICATION (production: 3, with MEMORY_KAFKA_MIN_INSYNC_REPLICAS=2), " +
        "or MEMORY_KAFKA_ALLOW_SINGLE_REPLICA=1 if this is meant",
    );
  if (r.replicationFactor > brokers)
    throw new ReplicationConfigError(
      `replication factor ${r.replicationFactor} is more than the cluster's ${brokers} brokers`,
    );
  if (r.minInsyncReplicas !== undefined && r.minInsyncReplicas > r.replicationFactor)
    throw new ReplicationConfigError(
      `min.insync.replicas ${r.minInsyncReplicas} is more than the replication factor ${r.replicationFactor}`,
    );
};

/**
 * Topic-level settings of a compacted topic (stage changelogs, the update queue). The aim is that a
 * restore reads about one entry per live key, not the key's whole history:
 * - compaction never touches the active segment, and the broker defaults (roll after 7 days or
 *   1 GiB) keep a small changelog in its active segment for a week: everything is re-read. Rolling
 *   every 10 minutes or 64 MiB (whichever first) makes all but the last ~10 minutes cleanable.
 * - min.cleanable.dirty.ratio 0.1 (default 0.5) lets the cleaner run once a tenth of the log is
 *   superseded entries, so the log stays within ~1.1x its live size instead of ~2x.
 * - max.compaction.lag.ms 1 hour bounds how long a superseded entry can wait whatever the ratio.
 * - delete.retention.ms 1 hour (default 24 h): a tombstone must outlive any restore that could be
 *   reading past it (seconds to minutes) — an hour is a wide margin — and then it goes too, so
 *   deleted keys (idle conversations) cost nothing. Only changelogs write tombstones (the update
 *   queue carries values), so no consumer that resumes from a committed offset can miss a delete.
 * - min.compaction.lag.ms 0: no entry needs to stay readable uncompacted (the state is the latest).
 */
export const COMPACTED_TOPIC_CONFIG: Readonly<Record<string, string>> = {
  "cleanup.policy": "compact",
  "min.compaction.lag.ms": "0",
  "max.compaction.lag.ms": String(60 * 60_000),
  "segment.ms": String(10 * 60_000),
  "segment.bytes": String(64 * 1024 * 1024),
  "min.cleanable.dirty.ratio": "0.1",
  "delete.retention.ms": String(60 * 60_000),
};

const entriesOf = (config: Readonly<Record<string, string>>): IResourceConfigEntry[] =>
  Object.entries(config).map(([name, value]) => ({ name, value }));

/**
 * Brings existing compacted topics to COMPACTED_TOPIC_CONFIG (a topic created by an older version
 * had only cleanup.policy and min.compaction.lag.ms). kafkajs's alterConfigs replaces every
 * topic-level override, so the topic's other overrides are read and sent along; topics that
 * already match are left alone.
 */
export const alignCompactedTopics = async (admin: Admin, topics: readonly string[]): Promise<string[]> => {
  if (topics.length === 0) return [];
  const described = await admin.describeConfigs({
    resources: topics.map((name) => ({ type: ConfigResourceTypes.TOPIC, name })),
    includeSynonyms: false,
  });
  const changes = [];
  for (const r of described.resources) {
    const overrides = Object.fromEntries(
      r.configEntries
        .filter((e) => e.configSource === ConfigSource.TOPIC_CONFIG)
        .map((e) => [e.configName, e.configValue]),
    );
    const current = Object.fromEntries(r.configEntries.map((e) => [e.configName, e.configValue]));
    const differs = Object.entries(COMPACTED_TOPIC_CONFIG).some(([k, v]) => current[k] !== v);
    if (differs)
      changes.push({
        type: ConfigResourceTypes.TOPIC,
        name: r.resourceName,
        configEntries: entriesOf({ ...overrides, ...COMPACTED_TOPIC_CONFIG }),
      });
  }
  if (changes.length > 0) await admin.alterConfigs({ validateOnly: false, resources: changes });
  return changes.map((c) => c.name);
};

/**
 * Idempotent topic creation at start-up: creates what is missing, leaves existing topics as they
 * are, except that compacted ones get the current COMPACTED_TOPIC_CONFIG. Several stage processes start together and race to create the same topics; a loser sees
 * "already exists" or a metadata error while the winner's topic propagates, so the whole step is
 * retried until every topic is listed with its leaders.
 */
export const ensureTopics = async (
  admin: Admin,
  specs: readonly TopicSpec[],
  replication: number | Replication,
  attempts = 8,
): Promise<void> => {
  const r: Replication = typeof replication === "number" ? { replicationFactor: replication } : replication;
  const replicaConfig =
    r.minInsyncReplicas === undefined ? [] : [{ name: "min.insync.replicas", value: String(r.minInsyncReplicas) }];
  const replicationFactor = r.replicationFactor;
  for (let attempt = 1; ; attempt++) {
    try {
      const existing = new Set(await admin.listTopics());
      const missing = specs.filter((s) => !existing.has(s.topic));
      // Checked only when something is to be created; a configuration error is not retried.
      if (missing.length > 0) checkReplication(r, (await admin.describeCluster()).brokers.length);
      if (missing.length > 0)
        await admin.createTopics({
          waitForLeaders: true,
          topics: missing.map((s) => ({
            topic: s.topic,
            numPartitions: s.partitions,
            replicationFactor,
            configEntries: [...replicaConfig, ...(s.compacted ? entriesOf(COMPACTED_TOPIC_CONFIG) : [])],
          })),
        });
      await admin.fetchTopicMetadata({ topics: specs.map((s) => s.topic) });
      await alignCompactedTopics(
        admin,
        specs.filter((s) => s.compacted && existing.has(s.topic)).map((s) => s.topic),
      );
      return;
    } catch (err) {
      if (attempt >= attempts || err instanceof ReplicationConfigError) throw err;
      await new Promise((r) => setTimeout(r, 250 * attempt));
    }
  }
};

/** Partition count of an existing topic (a changelog gets as many as its stage's input topic). */
export const partitionCount = async (admin: Admin, topic: string): Promise<number> => {
  const meta = await admin.fetchTopicMetadata({ topics: [topic] });
  const n = meta.topics[0]?.partitions.length ?? 0;
  if (n === 0) throw new Error(`topic ${topic} has no partitions`);
  return n;
};

/**
 * The data topics' partition counts, which must be one: a key's partition is then the same on every
 * topic, which a stage's keyed state and erasure rely on (a tenant's erase control goes to each
 * partition and erases that partition's share: topics.ts eraseTenantShare). A topic created by hand
 * with another count would leave part of an erased tenant behind, so the process refuses to start.
 */
export const checkSharedPartitionCount = async (admin: Admin, topics: readonly string[]): Promise<number> => {
  const meta = await admin.fetchTopicMetadata({ topics: [...topics] });
  const counts = new Map(meta.topics.map((t) => [t.name, t.partitions.length]));
  const distinct = new Set(topics.map((t) => counts.get(t) ?? 0));
  if (distinct.size !== 1 || distinct.has(0))
    throw new Error(
      `the pipeline's topics must have one partition count (a key's partition must be the same on each): ${topics
        .map((t) => `${t} ${counts.get(t) ?? 0}`)
        .join(", ")}`,
    );
  return [...distinct][0] as number;
};
