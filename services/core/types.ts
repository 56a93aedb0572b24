import { z } from "zod";
import { idSchema, metadataSchema, textSchema, timestampSchema } from "./input-rules.ts";
import { conversationKey } from "./keys.ts";

/**
 * tenant/conversation: the partition key of every stream event, and the key of its stage state and
 * dead letters; unambiguous whatever the names hold (services/core/keys.ts).
 */
export const keyOf = (tenant: string, conversation: string): string => conversationKey(tenant, conversation);

const nonEmpty = z.string().trim().min(1);
const isoTime = z.string().refine((s) => !Number.isNaN(Date.parse(s)), { message: "must be an ISO-8601 timestamp" });

export const RoleSchema = z.enum(["user", "assistant", "system", "other"]);

/** A turn on the turns topic / engine inbox: the same rules as TurnInputSchema (input-rules.ts). */
export const TurnSchema = z.object({
  tenant: nonEmpty,
  conversation: idSchema(),
  turnId: idSchema(),
  speaker: idSchema(),
  role: RoleSchema.default("user"),
  text: textSchema(),
  timestamp: timestampSchema(),
  sessionId: idSchema(),
  metadata: metadataSchema().optional(),
});
export type Turn = z.infer<typeof TurnSchema>;

export const SensoryTurnSchema = TurnSchema.extend({
  compressed: z.string(),
  keptRatio: z.number().min(0).max(1),
});
export type SensoryTurn = z.infer<typeof SensoryTurnSchema>;

/** Why the segmenter closed a segment. */
export const CloseReasonSchema = z.enum(["gate", "attention", "hard-cap", "session-end", "idle", "flush"]);
export type CloseReason = z.infer<typeof CloseReasonSchema>;

/** One boundary decision, kept so that a cut (or its absence) can be explained. */
export const BoundaryDecisionSchema = z.object({
  turnId: z.string(),
  surprise: z.number(),
  z: z.number(),
  phi: z.number(),
  cohesionDrop: z.number(),
  lengthPressure: z.number(),
  turnPressure: z.number(),
  p: z.number(),
  cut: z.boolean(),
  reason: CloseReasonSchema.optional(),
  /**
   * The attention check (docs/segmenter.md), when the segmenter's boundaries use attention:
   * share = how much of the turn's attention goes to the previous turn, z = its robust z over
   * recent shares, agrees = whether it is a dip by the mode's threshold, decision = what it did.
   */
  attention: z
    .object({
      share: z.number(),
      z: z.number(),
      agrees: z.boolean(),
      decision: z.enum(["confirmed", "vetoed", "proposed", "none"]),
    })
    .optional(),
});
export type BoundaryDecision = z.infer<typeof BoundaryDecisionSchema>;

export const SegmentTurnSchema = z.object({
  turnId: z.string(),
  speaker: z.string(),
  role: RoleSchema,
  text: z.string(),
  compressed: z.string(),
  timestamp: isoTime,
  sessionId: z.string(),
});
export type SegmentTurn = z.infer<typeof SegmentTurnSchema>;

/** A turn as a segment holds it: its SegmentTurn fields only (a sensory or arriving turn carries more). */
export const segmentTurnOf = (t: SegmentTurn): SegmentTurn => ({
  turnId: t.turnId,
  speaker: t.speaker,
  role: t.role,
  text: t.text,
  compressed: t.compressed,
  timestamp: t.timestamp,
  sessionId: t.sessionId,
});

export const SegmentSchema = z.object({
  id: z.string(),
  tenant: z.string(),
  conversation: z.string(),
  sessionId: z.string(),
  turns: z.array(SegmentTurnSchema).min(1),
  start: isoTime,
  end: isoTime,
  tokens: z.number().int().nonnegative(),
  closedBy: CloseReasonSchema,
  decisions: z.array(BoundaryDecisionSchema),
});
export type Segment = z.infer<typeof SegmentSchema>;

export const RecordTypeSchema = z.enum(["fact", "event", "preference", "plan", "relation", "other"]);
export type RecordType = z.infer<typeof RecordTypeSchema>;

export const TimeRangeSchema = z.object({
  at: isoTime.optional(),
  from: isoTime.optional(),
  to: isoTime.optional(),
});
export type TimeRange = z.infer<typeof TimeRangeSchema>;

export const EntitySchema = z.object({
  name: z.string().min(1),
  kind: z.enum(["person", "place", "organisation", "object", "other"]).default("other"),
  aliases: z.array(z.string()).default([]),
});
export type Entity = z.infer<typeof EntitySchema>;

export const SourceSchema = z.object({
  tenant: z.string(),
  conversation: z.string(),
  segmentId: z.string(),
  turnIds: z.array(z.string()).min(1),
  speakers: z.array(z.string()),
  sessionId: z.string(),
  /** Timestamp of the turn the record was said in: the date a reader sees. */
  saidAt: isoTime,
});
export type Source = z.infer<typeof SourceSchema>;

export const ValiditySchema = z.object({
  from: isoTime,
  to: isoTime.optional(),
  supersededBy: z.string().optional(),
});

/** A self-contained memory record (docs/design.md §4). */
export const MemoryRecordSchema = z.object({
  id: z.string(),
  type: RecordTypeSchema,
  text: z.string().min(1),
  entities: z.array(EntitySchema),
  topics: z.array(z.string()),
  time: TimeRangeSchema,
  source: SourceSchema,
  valid: ValiditySchema,
  /**
   * Sources of newer records merged into this one by consolidation (exact or near duplicates):
   * this record is the canonical version, the merged ones point here with `valid.supersededBy`.
   */
  mergedSources: z.array(SourceSchema).optional(),
});
export type MemoryRecord = z.infer<typeof MemoryRecordSchema>;

/** Bounded context carried from one segment to the next by the encoder. */
export const DisambiguationContextSchema = z.object({
  aliases: z.record(z.string(), z.string()),
  /** Pronoun or role -> who it refers to, e.g. "she" -> "Caroline". */
  referents: z.record(z.string(), z.string()),
  speakers: z.array(z.string()),
  recentRecords: z.array(z.string()),
});
export type DisambiguationContext = z.infer<typeof DisambiguationContextSchema>;

export const RecordsEventSchema = z.object({
  tenant: z.string(),
  conversation: z.string(),
  segment: SegmentSchema,
  records: z.array(MemoryRecordSchema),
  context: DisambiguationContextSchema,
});
export type RecordsEvent = z.infer<typeof RecordsEventSchema>;

export const UpdateCandidateSchema = z.object({
  recordId: z.string(),
  candidateId: z.string(),
  tenant: z.string(),
  similarity: z.number(),
  sharedEntities: z.array(z.string()),
  sharedTopics: z.array(z.string()),
  /**
   * Why the pair is a candidate: vector similarity over the threshold, a shared entity and topic, or
   * (entity-attribute) the same subject making a statement about the same attribute (where someone
   * lives, works, what they like).
   */
  reason: z.enum(["similarity", "entity-topic", "entity-attribute"]),
});
export type UpdateCandidate = z.infer<typeof UpdateCandidateSchema>;

export const DeadLetterSchema = z.object({
  stage: z.string(),
  key: z.string(),
  error: z.string(),
  payload: z.string(),
  at: isoTime,
});
export type DeadLetter = z.infer<typeof DeadLetterSchema>;
