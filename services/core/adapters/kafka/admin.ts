import type { Admin } from "kafkajs";

export interface TopicSpec {
  topic: string;
  partitions: number;
  /** cleanup.policy=compact (changelogs, the update queue). */
  compacted?: boolean;
}

/**
 * Idempotent topic creation at start-up: creates what is missing, leaves existing topics as they
 * are. Several stage processes start together and race to create the same topics; a loser sees
 * "already exists" or a metadata error while the winner's topic propagates, so the whole step is
 * retried until every topic is listed with its leaders.
 */
export const ensureTopics = async (
  admin: Admin,
  specs: readonly TopicSpec[],
  replicationFactor: number,
  attempts = 8,
): Promise<void> => {
  for (let attempt = 1; ; attempt++) {
    try {
      const existing = new Set(await admin.listTopics());
      const missing = specs.filter((s) => !existing.has(s.topic));
      if (missing.length > 0)
        await admin.createTopics({
          waitForLeaders: true,
          topics: missing.map((s) => ({
            topic: s.topic,
            numPartitions: s.partitions,
            replicationFactor,
            configEntries: s.compacted
              ? [
                  { name: "cleanup.policy", value: "compact" },
                  { name: "min.compaction.lag.ms", value: "0" },
                ]
              : [],
          })),
        });
      await admin.fetchTopicMetadata({ topics: specs.map((s) => s.topic) });
      return;
    } catch (err) {
      if (attempt >= attempts) throw err;
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
