import type { Admin } from "kafkajs";

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
 * Idempotent topic creation at start-up: creates what is missing, leaves existing topics as they
 * are. Several stage processes start together and race to create the same topics; a loser sees
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
            configEntries: [
              ...replicaConfig,
              ...(s.compacted
                ? [
                    { name: "cleanup.policy", value: "compact" },
                    { name: "min.compaction.lag.ms", value: "0" },
                  ]
                : []),
            ],
          })),
        });
      await admin.fetchTopicMetadata({ topics: specs.map((s) => s.topic) });
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
