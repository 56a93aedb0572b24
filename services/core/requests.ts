/**
 * What clients send, as zod schemas every front door (HTTP, gRPC, CLI) parses with: a turn, a
 * query, the record-listing filters. The field rules themselves are in input-rules.ts.
 */
import { z } from "zod";
import {
  idSchema,
  metadataSchema,
  parseIsoDateOrDateTime,
  textSchema,
  timeFilterSchema,
  timestampSchema,
} from "./input-rules.ts";
import type { RecordQuery } from "./query-types.ts";
import { isServerTurnId, RESERVED_TURN_ID_MESSAGE } from "./turn-ids.ts";
import { RecordTypeSchema } from "./types.ts";

/**
 * A turn as a client sends it: tenant comes from the credential, not the body. Ids and speaker
 * follow the identifier rule, text has its control characters stripped, the timestamp is ISO 8601
 * with an offset (services/core/input-rules.ts); toTurn (turn-validation.ts) normalises it to UTC.
 */
export const TurnInputSchema = z.object({
  /** Absent: the service assigns one, with a prefix client ids may not use (services/core/turn-ids.ts). */
  turnId: idSchema()
    .refine((id) => !isServerTurnId(id), { message: RESERVED_TURN_ID_MESSAGE })
    .optional(),
  speaker: idSchema(),
  role: z.enum(["user", "assistant", "system", "other"]).default("user"),
  text: textSchema(),
  timestamp: timestampSchema(),
  sessionId: idSchema().default("default"),
  metadata: metadataSchema().optional(),
});
export type TurnInput = z.infer<typeof TurnInputSchema>;

export const QueryRequestSchema = z.object({
  question: z.string().trim().min(1).max(4000),
  conversation: idSchema().optional(),
  budget: z.number().int().min(50).max(32_000).optional(),
  /** ISO time: answer as of this moment (records valid then). */
  asOf: timeFilterSchema().optional(),
  /** Return each route's hits and the fused order with the result (QueryResult.explain), for the explorer. */
  explain: z.boolean().optional(),
});
export type QueryRequest = z.infer<typeof QueryRequestSchema>;

const isoToMs = timeFilterSchema().transform((s) => parseIsoDateOrDateTime(s) as number);

interface ListingFields {
  conversation?: string;
  entity?: string;
  type?: RecordQuery["type"];
  from?: number;
  to?: number;
  limit: number;
  cursor?: string;
  includeSuperseded?: boolean;
}

/**
 * The record-listing filters every front door accepts (HTTP query string, gRPC message); each
 * front door adds how `limit` and `includeSuperseded` arrive on its wire.
 */
export const recordListingSchema = <L extends z.ZodType<number>, S extends z.ZodType<boolean | undefined>>(
  limit: L,
  includeSuperseded: S,
) =>
  z
    .object({
      conversation: idSchema().optional(),
      entity: idSchema().optional(),
      type: RecordTypeSchema.optional(),
      from: isoToMs.optional(),
      to: isoToMs.optional(),
      limit,
      cursor: z.string().min(1).max(4096).optional(),
      includeSuperseded,
    })
    .refine((q) => q.from === undefined || q.to === undefined || q.from <= q.to, {
      message: "must not be after `to`",
      path: ["from"],
    })
    .transform((raw): RecordQuery => {
      // The generic limit / includeSuperseded types hide the fields from inference; the shape is this.
      const p = raw as ListingFields;
      const query: RecordQuery = { limit: p.limit };
      if (p.conversation !== undefined) query.conversation = p.conversation;
      if (p.entity !== undefined) query.entity = p.entity;
      if (p.type !== undefined) query.type = p.type;
      if (p.from !== undefined) query.timeFrom = p.from;
      if (p.to !== undefined) query.timeTo = p.to;
      if (p.includeSuperseded !== undefined) query.includeSuperseded = p.includeSuperseded;
      if (p.cursor !== undefined) query.cursor = p.cursor;
      return query;
    });
