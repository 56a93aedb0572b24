/**
 * What the distributed consolidator's off-peak triggers read from Kafka (admin API only, no
 * consumer): the total consumer lag of the upstream stage groups (the pipeline has caught up when
 * it is low), the ingest position (the sum of the turns topic's high watermarks; it stops moving
 * when nobody ingests) and the consolidator's own lag on the update queue.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Admin } from "kafkajs";
import type { TopicNames } from "../core/adapters/kafka/topics.ts";

/** How long a group-offset read waits out a coordinator that is not ready (a broker just started). */
const COORDINATOR_WAIT_MS = 60_000;

/**
 * A group's committed offsets on a topic. On a broker that has just started, the group coordinator
 * answers "the coordinator is loading" (or not available) while __consumer_offsets is created and
 * loaded; kafkajs marks those errors retriable but its own retries give up within a second or two,
 * so they are retried here for up to a minute with a capped backoff.
 */
export const fetchGroupOffsets = async (
  admin: Admin,
  groupId: string,
  topic: string,
): Promise<Awaited<ReturnType<Admin["fetchOffsets"]>>> => {
  const start = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await admin.fetchOffsets({ groupId, topics: [topic] });
    } catch (err) {
      const retriable = (err as { retriable?: unknown }).retriable === true;
      if (!retriable || Date.now() - start > COORDINATOR_WAIT_MS) throw err;
      await sleep(Math.min(2000, 100 * 2 ** attempt));
    }
  }
};

/** The pipeline stages before the consolidator, each with the topic its group consumes. */
export const UPSTREAM_STAGES = [
  { stage: "sensory", input: "turns" },
  { stage: "segmenter", input: "sensory" },
  { stage: "encoder", input: "segments" },
  { stage: "indexer", input: "records" },
] as const;

export interface UpstreamProbe {
  /** Messages not yet committed by the upstream stage groups, summed over stages and partitions. */
  upstreamLag: number;
  /** Sum of the turns topic's high watermarks: grows with every ingested turn. */
  ingestPosition: number;
}

/**
 * Lag of one group on one topic. Topics written in transactions end with a commit marker that no
 * consumer commits past when it arrives in a later fetch, so `slack` (1 there) is not counted as
 * lag; the turns topic is written without transactions (slack 0).
 */
export interface PartitionLag {
  partition: number;
  lag: number;
}

export const groupLag = async (
  admin: Admin,
  groupId: string,
  topic: string,
  slack: number,
): Promise<PartitionLag[]> => {
  const [committed] = await fetchGroupOffsets(admin, groupId, topic);
  const ends = await admin.fetchTopicOffsets(topic);
  return ends.map((end) => {
    const c = Math.max(0, Number(committed?.partitions.find((p) => p.partition === end.partition)?.offset ?? -1));
    return { partition: end.partition, lag: Math.max(0, Number(end.high) - c - slack) };
  });
};

/** Reads the upstream lag and the ingest position (groups are `${prefix}memory-<stage>`, as the stage processes name them). */
export const probeUpstream = async (admin: Admin, topics: TopicNames, topicPrefix: string): Promise<UpstreamProbe> => {
  let upstreamLag = 0;
  for (const { stage, input } of UPSTREAM_STAGES) {
    const lags = await groupLag(admin, `${topicPrefix}memory-${stage}`, topics[input], input === "turns" ? 0 : 1);
    upstreamLag += lags.reduce((a, p) => a + p.lag, 0);
  }
  const turnEnds = await admin.fetchTopicOffsets(topics.turns);
  const ingestPosition = turnEnds.reduce((a, e) => a + Number(e.high), 0);
  return { upstreamLag, ingestPosition };
};
