/**
 * Small parts for the Kafka stage handler tests that need no broker: an in-memory codec in place of
 * the schema-registry serdes (handlers only pass their codecs to the runtime), and turn / segment /
 * record builders.
 */
import type { z } from "zod";
import type { Decoded, StageStateEnvelope, TopicCodec } from "../../services/core/adapters/kafka/serde.ts";
import { recordId } from "../../services/core/ids.ts";
import type { Entity, MemoryRecord, RecordsEvent, Segment, SegmentTurn, Turn } from "../../services/core/types.ts";

/** JSON on a named topic, validated with a zod schema on decode (as the Avro serdes validate). */
export const jsonCodec = <T>(topic: string, schema: z.ZodType<T>): TopicCodec<T> => ({
  topic,
  schemaId: 1,
  encode: async (value) => Buffer.from(JSON.stringify(value)),
  decode: async (bytes): Promise<Decoded<T>> => {
    if (bytes === null) return { ok: false, reason: "empty value" };
    const parsed = schema.safeParse(JSON.parse(bytes.toString()));
    return parsed.success
      ? { ok: true, value: parsed.data }
      : { ok: false, reason: `invalid: ${parsed.error.message}` };
  },
});

/** A changelog codec: handlers only hand it to the runtime. */
export const stateCodec = (stage: string): TopicCodec<StageStateEnvelope> => ({
  topic: `memory.${stage}-state.v1`,
  schemaId: 1,
  encode: async (value) => Buffer.from(JSON.stringify(value)),
  decode: async (bytes) =>
    bytes === null
      ? { ok: false, reason: "empty value" }
      : { ok: true, value: JSON.parse(bytes.toString()) as StageStateEnvelope },
});

export const turnOf = (over: Partial<Turn> & Pick<Turn, "turnId" | "text">): Turn => ({
  tenant: "acme",
  conversation: "c1",
  speaker: "Caroline",
  role: "user",
  timestamp: "2023-05-08T09:00:00.000Z",
  sessionId: "s1",
  ...over,
});

export const segmentTurnOf = (turnId: string, text: string, timestamp = "2023-05-08T09:00:00.000Z"): SegmentTurn => ({
  turnId,
  speaker: "Caroline",
  role: "user",
  text,
  compressed: text.toLowerCase(),
  timestamp,
  sessionId: "s1",
});

export const segmentOf = (id: string, turns: SegmentTurn[], tenant = "acme", conversation = "c1"): Segment => ({
  id,
  tenant,
  conversation,
  sessionId: "s1",
  turns,
  start: (turns[0] as SegmentTurn).timestamp,
  end: (turns[turns.length - 1] as SegmentTurn).timestamp,
  tokens: 20,
  closedBy: "gate",
  decisions: [],
});

export interface RecordSpec {
  text: string;
  entities: Entity[];
  topics: string[];
  turnIds: string[];
  saidAt: string;
}

export const recordOf = (segment: Segment, s: RecordSpec): MemoryRecord => ({
  id: recordId(segment.tenant, s.text),
  type: "fact",
  text: s.text,
  entities: s.entities,
  topics: s.topics,
  time: {},
  source: {
    tenant: segment.tenant,
    conversation: segment.conversation,
    segmentId: segment.id,
    turnIds: s.turnIds,
    speakers: ["Caroline"],
    sessionId: segment.sessionId,
    saidAt: s.saidAt,
  },
  valid: { from: s.saidAt },
});

/**
 * A records event of one segment whose two records are each other's update candidates (same
 * person, same topic): what the erasure tests put in flight on the records consumer.
 */
export const candidatePairEvent = (
  tenant = "acme",
  conversation = "c1",
  city = "Paris",
  segmentId = `seg-${conversation}`,
): RecordsEvent => {
  const segment = segmentOf(
    segmentId,
    [
      segmentTurnOf("t1", `I moved to ${city} in May!`, "2023-06-01T10:00:00.000Z"),
      segmentTurnOf("t2", `I moved to ${city} in May, the city of my dreams.`, "2023-06-01T10:01:00.000Z"),
    ],
    tenant,
    conversation,
  );
  const caroline = { name: "Caroline", kind: "person" as const, aliases: [] };
  const records = [
    { text: `Caroline moved to ${city} in May 2023.`, turnId: "t1" },
    { text: `Caroline moved to ${city}, the city of her dreams, in May 2023.`, turnId: "t2" },
  ].map((r) =>
    recordOf(segment, {
      text: r.text,
      entities: [caroline],
      topics: ["moving"],
      turnIds: [r.turnId],
      saidAt: segment.start,
    }),
  );
  return {
    tenant,
    conversation,
    segment,
    records,
    context: { aliases: {}, referents: {}, speakers: ["Caroline"], recentRecords: [] },
  };
};
