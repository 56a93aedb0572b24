/**
 * The distributed runtime's MemoryService, behind the gateway's HTTP and gRPC front doors:
 * - ingest: every turn is completed (tenant from the credential, conversation, `@` + a random UUID
 *   when it has no id: the reserved namespace of services/core/turn-ids.ts), validated with TurnSchema, and produced to memory.turns.v1 through the schema
 *   registry's Avro codec, keyed tenant/conversation, by an idempotent producer with acks=all. The
 *   call resolves once Kafka has acknowledged every turn: an accepted turn is durable.
 * - flush: the control message (null value, header `memory-control: flush`) on the turns topic, so
 *   it keeps its place in the conversation's order. Without a conversation: every conversation of
 *   the tenant that this gateway instance has produced to since it started (a bounded set; with
 *   several gateway instances, flush per conversation).
 * - query / listRecords / getRecord: the query service (a QueryBackend, over gRPC).
 * - health: the producer is connected and the query backend is reachable.
 */
import { randomUUID } from "node:crypto";
import type { Kafka, Producer } from "kafkajs";
import { ensurePipelineTopics, kafkaClient, type LogFn } from "../core/adapters/kafka/process.ts";
import { RegistrySerdes, SCHEMA_FILES, type TopicCodec } from "../core/adapters/kafka/serde.ts";
import { CONTROL_HEADER, type ControlKind, type TopicNames } from "../core/adapters/kafka/topics.ts";
import type { Config } from "../core/config.ts";
import { ValidationError } from "../core/errors.ts";
import type { Health, IngestResult, MemoryService } from "../core/memory-service.ts";
import type { RecordPage, RecordQuery } from "../core/ports.ts";
import type { QueryResult } from "../core/query-types.ts";
import type { QueryRequest, TurnInput } from "../core/requests.ts";
import { assertClientTurnIds, SERVER_TURN_ID_PREFIX } from "../core/turn-ids.ts";
import { toTurn } from "../core/turn-validation.ts";
import { keyOf, type MemoryRecord, type Turn, TurnSchema } from "../core/types.ts";
import type { QueryBackend } from "./grpc-client.ts";

/** Conversations remembered per tenant for a tenant-wide flush (oldest forgotten first). */
export const MAX_TRACKED_CONVERSATIONS = 10_000;

export interface KafkaMemoryServiceOptions {
  config: Config;
  backend: QueryBackend;
  /** Default: a client from config.kafka. */
  kafka?: Kafka;
  log?: LogFn;
}

export class KafkaMemoryService implements MemoryService {
  private connected = false;
  private closed = false;
  private readonly seen = new Map<string, Set<string>>();

  private constructor(
    private readonly producer: Producer,
    private readonly codec: TopicCodec<Turn>,
    private readonly topics: TopicNames,
    private readonly serdes: RegistrySerdes,
    private readonly backend: QueryBackend,
  ) {
    producer.on(producer.events.CONNECT, () => {
      this.connected = true;
    });
    producer.on(producer.events.DISCONNECT, () => {
      this.connected = false;
    });
  }

  /** Creates missing topics, registers the turn schema, connects the producer. */
  static async open(options: KafkaMemoryServiceOptions): Promise<KafkaMemoryService> {
    const { config } = options;
    const kafka = options.kafka ?? kafkaClient(config, "gateway");
    const topics = await ensurePipelineTopics(kafka, config);
    const serdes = new RegistrySerdes(config.kafka.registryUrl);
    try {
      const codec = await serdes.codec(topics.turns, SCHEMA_FILES.turns, TurnSchema);
      // Idempotent: no duplicates or reordering on retries; kafkajs needs acks=all and one request in flight.
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
      const service = new KafkaMemoryService(producer, codec, topics, serdes, options.backend);
      await producer.connect();
      service.connected = true;
      options.log?.("info", "producing turns", { topic: topics.turns, schemaId: codec.schemaId });
      return service;
    } catch (err) {
      await serdes.close().catch(() => undefined);
      throw err;
    }
  }

  private remember(tenant: string, conversation: string): void {
    let set = this.seen.get(tenant);
    if (!set) {
      set = new Set();
      this.seen.set(tenant, set);
    }
    set.delete(conversation);
    set.add(conversation);
    if (set.size > MAX_TRACKED_CONVERSATIONS) {
      const oldest = set.values().next().value;
      if (oldest !== undefined) set.delete(oldest);
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new Error("KafkaMemoryService is closed");
  }

  async ingest(tenant: string, conversation: string, turns: readonly TurnInput[]): Promise<IngestResult> {
    this.assertOpen();
    assertClientTurnIds(turns);
    const full = turns.map((t, i) => {
      // The gateway keeps no per-conversation counter: a random id in the reserved namespace.
      const parsed = TurnSchema.safeParse(toTurn(tenant, conversation, t, `${SERVER_TURN_ID_PREFIX}${randomUUID()}`));
      if (!parsed.success) {
        const fields = parsed.error.issues.map((x) => `${x.path.join(".")}: ${x.message}`).join("; ");
        throw ValidationError.fromZod(parsed.error, `invalid turn at index ${i}: ${fields}`);
      }
      return parsed.data;
    });
    if (full.length === 0) return { accepted: 0, turnIds: [] };
    const key = keyOf(tenant, conversation);
    const messages = await Promise.all(full.map(async (t) => ({ key, value: await this.codec.encode(t) })));
    await this.producer.send({ topic: this.topics.turns, acks: -1, messages });
    this.remember(tenant, conversation);
    return { accepted: full.length, turnIds: full.map((t) => t.turnId) };
  }

  async flush(tenant: string, conversation?: string, kind: ControlKind = "flush"): Promise<void> {
    this.assertOpen();
    const conversations = conversation !== undefined ? [conversation] : [...(this.seen.get(tenant) ?? [])];
    if (conversations.length === 0) return;
    await this.producer.send({
      topic: this.topics.turns,
      acks: -1,
      messages: conversations.map((c) => ({ key: keyOf(tenant, c), value: null, headers: { [CONTROL_HEADER]: kind } })),
    });
  }

  query(tenant: string, req: QueryRequest): Promise<QueryResult> {
    return this.backend.query(tenant, req);
  }

  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage> {
    return this.backend.listRecords(tenant, query);
  }

  getRecord(tenant: string, id: string): Promise<MemoryRecord | undefined> {
    return this.backend.getRecord(tenant, id);
  }

  async health(): Promise<Health> {
    const backend = await this.backend.health();
    const ok = this.connected && backend.ok && !this.closed;
    return {
      ok,
      ready: ok,
      details: {
        kafka: this.connected ? `producer connected (${this.topics.turns})` : "producer disconnected",
        query: backend.detail,
      },
    };
  }

  /** Disconnects the producer (pending sends finish first) and the registry client; not the backend. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.producer.disconnect().catch(() => undefined);
    await this.serdes.close().catch(() => undefined);
  }
}
