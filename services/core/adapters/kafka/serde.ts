/**
 * Avro serdes through the schema registry (docs/design.md §3). At start-up every topic's schema
 * (schemas/avro/*.avsc) is registered under its TopicNameStrategy subject `<topic>-value`, with the
 * subject's compatibility set to BACKWARD first, so a later schema version that old readers' data
 * cannot be read with is refused by the registry. Values are written in the Confluent wire format
 * (magic byte, schema id, Avro body) with the id registered here (never auto-registered at
 * produce time), read with the writer's schema from the registry, and validated with the zod
 * schemas of services/core/types.ts. A value that cannot be decoded or fails validation is not
 * an exception: decode() says why, and the runtime turns it into a dead letter. The registry
 * being unreachable is no fault of the value: that error is thrown, and the runtime retries.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  AvroDeserializer,
  AvroSerializer,
  Compatibility,
  SchemaRegistryClient,
  SerdeType,
} from "@confluentinc/schemaregistry";
import { z } from "zod";
import { DeadLetterSchema, RecordsEventSchema, SegmentSchema, TurnSchema, UpdateCandidateSchema } from "../../types.ts";
import { classifyError } from "./error-class.ts";
import type { TopicNames } from "./topics.ts";
import { SensoryEventSchema } from "./turn-embedding.ts";

export const SCHEMA_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..", "schemas", "avro");

/** Schema file of each topic role. */
export const SCHEMA_FILES = {
  turns: "turn.avsc",
  sensory: "sensory.avsc",
  segments: "segment.avsc",
  records: "records.avsc",
  updateQueue: "update-queue.avsc",
  dlq: "dlq.avsc",
  state: "stage-state.avsc",
} as const;

/** A dead letter on memory.dlq.v1: DeadLetterSchema plus where the message came from. */
export const DlqEntrySchema = DeadLetterSchema.extend({
  sourceTopic: z.string().optional(),
  sourcePartition: z.number().int().optional(),
  sourceOffset: z.string().optional(),
  attempts: z.number().int().min(1).default(1),
});
export type DlqEntry = z.infer<typeof DlqEntrySchema>;

/** memory.update-queue.v1: the update candidates of one new record (key: record id). */
export const UpdateCandidatesEventSchema = z.object({
  recordId: z.string().min(1),
  tenant: z.string().min(1),
  candidates: z.array(UpdateCandidateSchema),
});
export type UpdateCandidatesEvent = z.infer<typeof UpdateCandidatesEventSchema>;

/** Envelope of a changelog entry; the state itself is versioned JSON (see stage-state.avsc). */
export const StageStateEnvelopeSchema = z.object({
  stage: z.string().min(1),
  key: z.string().min(1),
  stateVersion: z.number().int().min(1),
  payload: z.string(),
  updatedAt: z.string(),
});
export type StageStateEnvelope = z.infer<typeof StageStateEnvelopeSchema>;

export type Decoded<T> = { ok: true; value: T } | { ok: false; reason: string };

/** Encode / decode of one topic's values. */
export interface TopicCodec<T> {
  readonly topic: string;
  readonly schemaId: number;
  encode(value: T): Promise<Buffer>;
  decode(bytes: Buffer | null): Promise<Decoded<T>>;
}

/** Avro has no `undefined`: optional fields come back as null; zod's optional() wants them absent. */
const dropNulls = (v: unknown): unknown => {
  if (Array.isArray(v)) return v.map(dropNulls);
  if (v !== null && typeof v === "object" && !Buffer.isBuffer(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (x !== null) out[k] = dropNulls(x);
    return out;
  }
  return v;
};

const issues = (err: z.ZodError): string =>
  err.issues.map((i) => `${i.path.join(".") || "(value)"}: ${i.message}`).join("; ");

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export const readSchema = (file: string): string => {
  const text = readFileSync(join(SCHEMA_DIR, file), "utf8");
  return JSON.stringify(JSON.parse(text));
};

/** Attempts at a call the registry answers 409 (see retryOnConflict). */
const CONFLICT_ATTEMPTS = 6;

/**
 * Stages start together and register the same subjects: Apicurio answers 409 ("already exists") to
 * the loser of two concurrent first-time creations (of a subject's rule, or of the subject itself),
 * and again for a moment while the winner's creation is still being stored. The same call again is
 * then an update or finds the existing id, so a 409 is retried a few times with a short growing
 * pause (about 6 s in all). (An incompatible schema is also a 409; it is thrown after the attempts.)
 */
const retryOnConflict = async <T>(call: () => Promise<T>): Promise<T> => {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if ((err as { status?: number }).status !== 409 || attempt >= CONFLICT_ATTEMPTS) throw err;
      await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
    }
  }
};

/** The registry client and the codecs made with it. */
export class RegistrySerdes {
  readonly client: SchemaRegistryClient;
  private readonly deserializer: AvroDeserializer;

  constructor(registryUrl: string) {
    this.client = new SchemaRegistryClient({ baseURLs: [registryUrl], maxRetries: 3, retriesWaitMs: 200 });
    this.deserializer = new AvroDeserializer(this.client, SerdeType.VALUE, {});
  }

  /**
   * Sets BACKWARD compatibility on `<topic>-value`, then registers the schema (idempotent: the
   * same schema gets its existing id). Throws when the registry refuses it as incompatible.
   */
  async register(topic: string, file: string): Promise<number> {
    const subject = `${topic}-value`;
    await retryOnConflict(() => this.client.updateConfig(subject, { compatibility: Compatibility.BACKWARD }));
    return retryOnConflict(() => this.client.register(subject, { schemaType: "AVRO", schema: readSchema(file) }));
  }

  /** Registers the topic's schema and returns its codec, validating with `schema`. */
  async codec<S extends z.ZodType>(topic: string, file: string, schema: S): Promise<TopicCodec<z.output<S>>> {
    const schemaId = await this.register(topic, file);
    const serializer = new AvroSerializer(this.client, SerdeType.VALUE, {
      autoRegisterSchemas: false,
      useSchemaId: schemaId,
    });
    const deserializer = this.deserializer;
    return {
      topic,
      schemaId,
      async encode(value) {
        const checked = schema.safeParse(value);
        if (!checked.success) throw new Error(`invalid value for ${topic}: ${issues(checked.error)}`);
        return serializer.serialize(topic, checked.data);
      },
      async decode(bytes) {
        if (bytes === null || bytes.length === 0) return { ok: false, reason: "decode: empty value" };
        let raw: unknown;
        try {
          raw = await deserializer.deserialize(topic, bytes);
        } catch (err) {
          if (classifyError(err, "registry").kind === "transient") throw err;
          return { ok: false, reason: `decode: ${message(err)}` };
        }
        const parsed = schema.safeParse(dropNulls(raw));
        if (!parsed.success) return { ok: false, reason: `validation: ${issues(parsed.error)}` };
        return { ok: true, value: parsed.data };
      },
    };
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

/** The codecs of every data topic (registered at start-up). */
export interface PipelineCodecs {
  turns: TopicCodec<z.output<typeof TurnSchema>>;
  /** Sensory turns, each with its embedding when the sensory stage computed one (turn-embedding.ts). */
  sensory: TopicCodec<z.output<typeof SensoryEventSchema>>;
  segments: TopicCodec<z.output<typeof SegmentSchema>>;
  records: TopicCodec<z.output<typeof RecordsEventSchema>>;
  updateQueue: TopicCodec<UpdateCandidatesEvent>;
  dlq: TopicCodec<DlqEntry>;
}

export const openPipelineCodecs = async (serdes: RegistrySerdes, topics: TopicNames): Promise<PipelineCodecs> => ({
  turns: await serdes.codec(topics.turns, SCHEMA_FILES.turns, TurnSchema),
  sensory: await serdes.codec(topics.sensory, SCHEMA_FILES.sensory, SensoryEventSchema),
  segments: await serdes.codec(topics.segments, SCHEMA_FILES.segments, SegmentSchema),
  records: await serdes.codec(topics.records, SCHEMA_FILES.records, RecordsEventSchema),
  updateQueue: await serdes.codec(topics.updateQueue, SCHEMA_FILES.updateQueue, UpdateCandidatesEventSchema),
  dlq: await serdes.codec(topics.dlq, SCHEMA_FILES.dlq, DlqEntrySchema),
});

/** A dead letter for a message: original key and bytes (base64), the stage and the reason. */
/**
 * Most original value bytes a dead letter carries. Base64 grows them by a third, so a value near
 * the broker's 1 MB message limit would make a dead letter over it: the transaction would fail
 * and block the partition it was meant to free. A longer value keeps its head, and the error says
 * how long it was, its sha256 and where the whole value stays (the source offset).
 */
export const DLQ_PAYLOAD_MAX_BYTES = 256 * 1024;
/** Most characters of a dead letter's error and key (a key is the producer's: it may be anything). */
export const DLQ_TEXT_MAX_CHARS = 16 * 1024;

const capText = (s: string): string =>
  s.length <= DLQ_TEXT_MAX_CHARS ? s : `${s.slice(0, DLQ_TEXT_MAX_CHARS)}… (${s.length} characters)`;

export const deadLetter = (
  stage: string,
  source: { topic: string; partition: number; offset: string; key: string; value: Buffer | null },
  reason: string,
  attempts = 1,
): DlqEntry => {
  const value = source.value;
  const truncated = value !== null && value.length > DLQ_PAYLOAD_MAX_BYTES;
  const error = truncated
    ? `${capText(reason)} [payload: the first ${DLQ_PAYLOAD_MAX_BYTES} of ${value.length} bytes; sha256 ${createHash("sha256").update(value).digest("hex")}; the whole value is at ${source.topic}/${source.partition}@${source.offset}]`
    : capText(reason);
  return {
    stage,
    key: capText(source.key),
    error,
    payload: value ? (truncated ? value.subarray(0, DLQ_PAYLOAD_MAX_BYTES) : value).toString("base64") : "",
    at: new Date().toISOString(),
    sourceTopic: source.topic,
    sourcePartition: source.partition,
    sourceOffset: source.offset,
    attempts,
  };
};
