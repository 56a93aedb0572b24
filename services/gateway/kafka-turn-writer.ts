/**
 * The distributed runtime's write side (a MemoryWriter), behind the gateway's front doors:
 * - ingest: every turn is completed and validated (services/core/turn-validation.ts: tenant from the
 *   credential, the conversation, `@` + a random UUID when it has no id: the reserved namespace of
 *   services/core/turn-ids.ts) and produced to memory.turns.v1 through the schema registry's Avro
 *   codec, keyed tenant/conversation, by an idempotent producer with acks=all. The call resolves
 *   once Kafka has acknowledged every turn: an accepted turn is durable.
 * - flush: the control message (null value, header `memory-control: flush`) on the turns topic, so
 *   it keeps its place in the conversation's order. Without a conversation: every conversation of
 *   the tenant that this gateway instance has produced to since it started (a bounded set; with
 *   several gateway instances, flush per conversation).
 * - publishErasure: the erase controls behind an erasure (topics.ts says what each stage does on
 *   them). For a conversation, one "erase" keyed like its turns: turns produced before it are
 *   ahead of it in the partition (in flight), turns after it are new. For a tenant, one
 *   "erase-tenant" on every partition of the turns topic, each keyed so that the key hashes to that
 *   partition (the stages forward it by key, and every pipeline topic has the turns' partition count).
 *   The controls carry the ids of the records the stores' erasure removed (ERASED_IDS_HEADER), so
 *   the indexer tombstones their update-queue keys after every candidate set it wrote for them. With
 *   them, in the same produce batch, an early tombstone (null value, header `memory-control: erase`,
 *   as the indexer writes them) per id, so the queue shows the erasure before the pipeline gets there.
 *   Not a Kafka transaction: the turns topic stays non-transactional (a commit marker at the end of a
 *   turns partition would count as lag of the sensory stage until the next turn, and the lag feeds
 *   the consolidator's off-peak trigger); the tombstones go first, so a failed call leaves at worst
 *   tombstones without the control, and the caller's retry publishes the control.
 */
import { randomUUID } from "node:crypto";
import { SpanKind } from "@opentelemetry/api";
import type { Kafka, Producer } from "kafkajs";
import { partitionCount } from "../core/adapters/kafka/admin.ts";
import { ensurePipelineTopics, kafkaClient } from "../core/adapters/kafka/process.ts";
import { RegistrySerdes, SCHEMA_FILES, type TopicCodec } from "../core/adapters/kafka/serde.ts";
import {
  CONTROL_HEADER,
  type ControlKind,
  ERASED_IDS_HEADER,
  ERASED_IDS_PER_CONTROL,
  eraseTenantKeys,
  type TopicNames,
} from "../core/adapters/kafka/topics.ts";
import type { Config } from "../core/config.ts";
import type { IngestResult, MemoryWriter } from "../core/memory-service.ts";
import type { TurnInput } from "../core/requests.ts";
import { SERVER_TURN_ID_PREFIX } from "../core/turn-ids.ts";
import { validateTurns } from "../core/turn-validation.ts";
import { keyOf, type Turn, TurnSchema } from "../core/types.ts";
import type { LogFn } from "../platform/log.ts";
import { inSpan, traceHeaders } from "../platform/trace-context.ts";
import { RecentConversations } from "./recent-conversations.ts";

/**
 * Conversations remembered for a tenant-wide flush, over all tenants together (least recently
 * written forgotten first; recent-conversations.ts says what forgetting costs).
 */
export const MAX_TRACKED_CONVERSATIONS = 100_000;

/**
 * Update-queue tombstones per produce call: a send puts each partition's
 * messages in one record batch, which the broker refuses over its message limit (1 MB by default);
 * a tombstone is a key (a record id) and a header, about 100 bytes.
 */
export const TOMBSTONES_PER_SEND = 2000;

export interface KafkaTurnWriterOptions {
  config: Config;
  /** Default: a client from config.kafka. */
  kafka?: Kafka;
  log?: LogFn;
}

export class KafkaTurnWriter implements MemoryWriter {
  private connected = false;
  private closed = false;
  private readonly seen = new RecentConversations(MAX_TRACKED_CONVERSATIONS);

  private constructor(
    private readonly producer: Producer,
    private readonly codec: TopicCodec<Turn>,
    private readonly topics: TopicNames,
    private readonly serdes: RegistrySerdes,
    private readonly kafka: Kafka,
  ) {
    producer.on(producer.events.CONNECT, () => {
      this.connected = true;
    });
    producer.on(producer.events.DISCONNECT, () => {
      this.connected = false;
    });
  }

  /** Creates missing topics, registers the turn schema, connects the producer. */
  static async open(options: KafkaTurnWriterOptions): Promise<KafkaTurnWriter> {
    const { config } = options;
    const kafka = options.kafka ?? kafkaClient(config, "gateway");
    const topics = await ensurePipelineTopics(kafka, config);
    const serdes = new RegistrySerdes(config.kafka.registryUrl);
    try {
      const codec = await serdes.codec(topics.turns, SCHEMA_FILES.turns, TurnSchema);
      // Idempotent: no duplicates or reordering on retries; kafkajs needs acks=all and one request in flight.
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
      const writer = new KafkaTurnWriter(producer, codec, topics, serdes, kafka);
      await producer.connect();
      writer.connected = true;
      options.log?.("info", "producing turns", { topic: topics.turns, schemaId: codec.schemaId });
      return writer;
    } catch (err) {
      await serdes.close().catch(() => undefined);
      throw err;
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new Error("KafkaTurnWriter is closed");
  }

  async ingest(tenant: string, conversation: string, turns: readonly TurnInput[]): Promise<IngestResult> {
    this.assertOpen();
    // The gateway keeps no per-conversation counter: a random id in the reserved namespace.
    const full = validateTurns(tenant, conversation, turns, () => `${SERVER_TURN_ID_PREFIX}${randomUUID()}`);
    if (full.length === 0) return { accepted: 0, turnIds: [] };
    const key = keyOf(tenant, conversation);
    // The produce span's W3C context rides in each turn's headers (docs/tracing.md); none while tracing is off.
    await inSpan(
      "gateway produce",
      {
        kind: SpanKind.PRODUCER,
        attributes: {
          "messaging.system": "kafka",
          "messaging.destination.name": this.topics.turns,
          "messaging.batch.message_count": full.length,
          "memory.tenant": tenant,
        },
      },
      async () => {
        const headers = traceHeaders();
        const traced = Object.keys(headers).length > 0;
        const messages = await Promise.all(
          full.map(async (t) => ({
            key,
            value: await this.codec.encode(t),
            ...(traced ? { headers: { ...headers } } : {}),
          })),
        );
        await this.producer.send({ topic: this.topics.turns, acks: -1, messages });
      },
    );
    this.seen.remember(tenant, conversation);
    return { accepted: full.length, turnIds: full.map((t) => t.turnId) };
  }

  async flush(tenant: string, conversation?: string, kind: ControlKind = "flush"): Promise<void> {
    this.assertOpen();
    const conversations = conversation !== undefined ? [conversation] : this.seen.of(tenant);
    if (conversations.length === 0) return;
    await this.producer.send({
      topic: this.topics.turns,
      acks: -1,
      messages: conversations.map((c) => ({
        key: keyOf(tenant, c),
        value: null,
        headers: { ...traceHeaders(), [CONTROL_HEADER]: kind },
      })),
    });
  }

  /**
   * Produces the erase control(s) of a conversation, or of the whole tenant, to the turns topic and
   * a tombstone per erased record id to the update queue (acks=all: resolved once durable; the
   * tombstones in the control's produce batch, or ahead of it when there are many). The stores are
   * erased by the caller (the query service), which names the records it erased; this makes every
   * stage drop the keyed state, the indexer erase again what in-flight turns wrote, and the update
   * queue forget the erased records' candidates (after compaction, or read to its end).
   */
  async publishErasure(
    tenant: string,
    conversation?: string,
    erasedRecordIds: readonly string[] = [],
  ): Promise<{ messages: number }> {
    this.assertOpen();
    const ids = [...new Set(erasedRecordIds)];
    // The erased ids ride on the controls (ERASED_IDS_HEADER), in slices of ERASED_IDS_PER_CONTROL:
    // the indexer tombstones them after every candidate set it wrote ahead of the control.
    const slices: string[][] = [];
    for (let i = 0; i < ids.length; i += ERASED_IDS_PER_CONTROL) slices.push(ids.slice(i, i + ERASED_IDS_PER_CONTROL));
    if (slices.length === 0) slices.push([]);
    const headersOf = (kind: ControlKind, slice: readonly string[]): Record<string, string> => ({
      [CONTROL_HEADER]: kind,
      ...(slice.length > 0 ? { [ERASED_IDS_HEADER]: JSON.stringify(slice) } : {}),
    });
    let messages: { key: string; value: null; partition?: number; headers: Record<string, string> }[];
    if (conversation !== undefined) {
      const key = keyOf(tenant, conversation);
      messages = slices.map((slice) => ({ key, value: null, headers: headersOf("erase", slice) }));
      this.seen.forget(tenant, conversation);
    } else {
      const admin = this.kafka.admin();
      await admin.connect();
      let partitions: number;
      try {
        partitions = await partitionCount(admin, this.topics.turns);
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
      // The partition is also named, so the first hop does not depend on the hash; the stages
      // downstream forward by key, which hashes to the same partition. Every partition's control
      // carries every id: whichever partition's indexer wrote a record's candidate set, its own
      // control comes after it.
      messages = eraseTenantKeys(tenant, partitions).flatMap((key, partition) =>
        slices.map((slice) => ({ key, value: null, partition, headers: headersOf("erase-tenant", slice) })),
      );
      this.seen.forgetTenant(tenant);
    }
    // Keyed like the indexer's candidate sets, so the default partitioner puts each on its partition.
    const tombstones = (chunk: readonly string[]) => ({
      topic: this.topics.updateQueue,
      messages: chunk.map((key) => ({ key, value: null, headers: { [CONTROL_HEADER]: "erase" } })),
    });
    const chunks: string[][] = [];
    for (let i = 0; i < ids.length; i += TOMBSTONES_PER_SEND) chunks.push(ids.slice(i, i + TOMBSTONES_PER_SEND));
    for (const chunk of chunks) await this.producer.sendBatch({ acks: -1, topicMessages: [tombstones(chunk)] });
    // One send per slice of ids: a partition's record batch stays under the broker's message limit
    // however many records were erased (the idempotent producer keeps the sends in order).
    // (messages are laid out slice-minor: message j carries slice j % slices.length)
    for (let i = 0; i < slices.length; i++) {
      const ofSlice = messages.filter((_, j) => j % slices.length === i);
      await this.producer.sendBatch({ acks: -1, topicMessages: [{ topic: this.topics.turns, messages: ofSlice }] });
    }
    return { messages: messages.length + ids.length };
  }

  /** Ready to produce: open and the producer connected; the detail names the topic. */
  health(): { ok: boolean; detail: string } {
    return {
      ok: this.connected && !this.closed,
      detail: this.connected ? `producer connected (${this.topics.turns})` : "producer disconnected",
    };
  }

  /** Disconnects the producer (pending sends finish first) and the registry client. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.producer.disconnect().catch(() => undefined);
    await this.serdes.close().catch(() => undefined);
  }
}
