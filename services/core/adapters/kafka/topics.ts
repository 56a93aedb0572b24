import { Partitioners, type PartitionMetadata } from "kafkajs";
import type { KafkaConfig } from "../../config.ts";
import { conversationKey, parseConversationKey } from "../../keys.ts";

/** Every topic of docs/design.md §3 by role, with the prefix applied. */
export interface TopicNames {
  turns: string;
  sensory: string;
  segments: string;
  records: string;
  updateQueue: string;
  dlq: string;
  /** The compacted changelog of a stage's keyed state: memory.<stage>-state.v1. */
  state(stage: string): string;
}

export const topicNames = (cfg: KafkaConfig): TopicNames => {
  const p = cfg.topicPrefix;
  return {
    turns: p + cfg.topics.turns,
    sensory: p + cfg.topics.sensory,
    segments: p + cfg.topics.segments,
    records: p + cfg.topics.records,
    updateQueue: p + cfg.topics.updateQueue,
    dlq: p + cfg.topics.dlq,
    state: (stage) => `${p}memory.${stage}-state.v1`,
  };
};

/**
 * Control messages travel on the data topics as a header on a message with a null value, so that
 * they keep their place in the partition's order: a flush requested after turn 12 of a
 * conversation is seen by the segmenter after turn 12. The gateway's flush() produces one to the
 * turns topic; sensory forwards it; the segmenter closes the open segment and releases its buffer.
 *
 * Erasure (issue 13) travels the same way, through every stage down to the indexer:
 * - "erase", keyed tenant/conversation like the conversation's turns: the turns produced before
 *   it are ahead of it in every partition, so each stage has seen them when the control arrives.
 *   Each stage drops the key's state (a tombstone in its changelog); the indexer erases the
 *   conversation from the stores again (what in-flight turns wrote after the immediate erasure).
 * - "erase-tenant", one per partition of the turns topic (a tenant's conversations spread over
 *   all of them), keyed by eraseTenantKey so that the key hashes to that partition on every topic
 *   of the pipeline (they share the partition count). Each stage drops every key of the tenant it
 *   holds for that partition; the indexer erases that partition's share of the tenant from the
 *   stores (its conversations, then the rest once no record is left: erase-in-stores.ts).
 * On the compacted update queue the indexer writes an "erase" control keyed by each erased record
 * id: a null value, so compaction removes the key (a tombstone), and a reader that decodes it
 * through the stage input path sees why. The gateway writes the same tombstones for the records the
 * query service erased at once (the indexer no longer finds them), in the control's transaction.
 */
export const CONTROL_HEADER = "memory-control";
/**
 * On an erase control: the ids of the records the stores' erasure removed (JSON array). The indexer
 * tombstones their update-queue keys when the control reaches it, that is after every candidate set
 * it wrote for segments ahead of the control, so a candidate set of an erased record cannot land
 * after its tombstone (the gateway's own early tombstones can: a race with the indexer's commit).
 */
export const ERASED_IDS_HEADER = "memory-erased-ids";
/** Erased record ids per control message (a record id is ~40 bytes: well under the 1 MB message limit). */
export const ERASED_IDS_PER_CONTROL = 5000;
export type ControlKind = "flush" | "session-end" | "idle" | "erase" | "erase-tenant";
const CONTROL_KINDS: ReadonlySet<string> = new Set<ControlKind>([
  "flush",
  "session-end",
  "idle",
  "erase",
  "erase-tenant",
]);
export const isControlKind = (s: string): s is ControlKind => CONTROL_KINDS.has(s);
/** The kinds that erase (state dropped, never a flush: an erased buffer is not released). */
export const isErasure = (kind: ControlKind): kind is "erase" | "erase-tenant" =>
  kind === "erase" || kind === "erase-tenant";

/**
 * What an erase control of `key` removes from a stage's keyed state: the key's conversation
 * ("erase"), or every conversation of the key's tenant ("erase-tenant"). Keys are parsed, not
 * prefix-matched: tenant `acme` must not match the keys of tenant `acme/eu`. Undefined when the key
 * is not tenant/conversation.
 */
export const erasedKeys = (
  kind: "erase" | "erase-tenant",
  key: string,
): { tenant: string; conversation?: string; matches(other: string): boolean } | undefined => {
  const own = parseConversationKey(key);
  if (!own) return undefined;
  if (kind === "erase") return { ...own, matches: (other) => other === key };
  return {
    tenant: own.tenant,
    matches: (other) => parseConversationKey(other)?.tenant === own.tenant,
  };
};

/**
 * The conversation part of an "erase-tenant" key for partition p of n: a name no client can send
 * (it starts with a NUL character, which turn validation refuses), with a counter the gateway
 * raises until the key hashes to p. Its tenant is the key's tenant part (parseConversationKey). The
 * partition and the count travel in it so that the indexer erases only that partition's share of
 * the tenant (eraseTenantShare).
 */
export const eraseTenantConversation = (partition: number, partitions: number, attempt: number): string =>
  `\u0000erase-tenant:${partition}/${partitions}:${attempt}`;

/**
 * The partition (of how many) an erase-tenant key was made for; undefined for another key or for
 * a key of the earlier form (`\u0000erase-tenant:<p>:<attempt>`, no count), whose control erases
 * the whole tenant.
 */
export const eraseTenantShare = (key: string): { partition: number; partitions: number } | undefined => {
  const conversation = parseConversationKey(key)?.conversation;
  if (conversation?.[0] !== "\u0000") return undefined;
  const m = /^erase-tenant:(\d+)\/(\d+):\d+$/.exec(conversation.slice(1));
  if (!m) return undefined;
  const partition = Number(m[1]);
  const partitions = Number(m[2]);
  return partition < partitions ? { partition, partitions } : undefined;
};

const defaultPartitioner = Partitioners.DefaultPartitioner();
const metadataOf = new Map<number, PartitionMetadata[]>();

/**
 * The partition of `partitions` that kafkajs' default partitioner (murmur2, as the Java client;
 * every producer of the pipeline uses it) sends a message keyed `key` to.
 */
export const partitionOfKey = (key: string, partitions: number): number => {
  let metadata = metadataOf.get(partitions);
  if (!metadata) {
    metadata = Array.from({ length: partitions }, (_, partitionId) => ({
      partitionId,
      leader: 0,
      replicas: [0],
      isr: [0],
      partitionErrorCode: 0,
    }));
    metadataOf.set(partitions, metadata);
  }
  return defaultPartitioner({ topic: "key", partitionMetadata: metadata, message: { key, value: null } });
};

/** Attempts at a key that hashes to a given partition (each hits with probability 1/partitions). */
const MAX_KEY_ATTEMPTS = 100_000;

/**
 * For each partition of a topic with `partitions` partitions, a key of the tenant's erase-tenant
 * control that the default partitioner sends to that partition.
 */
export const eraseTenantKeys = (tenant: string, partitions: number): string[] => {
  const keys: string[] = [];
  for (let p = 0; p < partitions; p++) {
    for (let attempt = 0; ; attempt++) {
      if (attempt >= MAX_KEY_ATTEMPTS) throw new Error(`no erase-tenant key found for partition ${p}`);
      const key = conversationKey(tenant, eraseTenantConversation(p, partitions, attempt));
      if (partitionOfKey(key, partitions) === p) {
        keys.push(key);
        break;
      }
    }
  }
  return keys;
};
