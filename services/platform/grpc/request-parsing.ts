/**
 * Incoming gRPC requests -> validated domain requests, with the same zod schemas as HTTP (one set of
 * input rules for every front door); a bad field is an InvalidArgument naming it by its proto name.
 * proto3 sends absent values as "" or 0: those become "not given" before validation, so the
 * schemas' defaults apply as they do for a JSON body without the field.
 */
import { z } from "zod";
import type { ValidationIssue } from "../../core/errors.ts";
import { idSchema } from "../../core/input-rules.ts";
import type { RecordQuery } from "../../core/ports.ts";
import {
  type QueryRequest,
  QueryRequestSchema,
  recordListingSchema,
  type TurnInput,
  TurnInputSchema,
} from "../../core/requests.ts";
import type {
  FlushRequest,
  GetRecordRequest,
  IngestRequest,
  ListRecordsRequest,
  QueryRequest as QueryRequestMessage,
} from "./generated/memory.ts";
import { InvalidArgument, protoIssues } from "./status-mapping.ts";

/** The identifier rule of every front door (input-rules.ts), as HTTP applies it to path parameters. */
const ConversationSchema = idSchema();
const RecordIdSchema = idSchema();

const blank = (s: string): string | undefined => (s === "" ? undefined : s);

/** The object without its undefined values (zod keeps an explicitly undefined optional key). */
const defined = <T extends Record<string, unknown>>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

export type TurnParse =
  | { ok: true; conversation: string; turn: TurnInput }
  | { ok: false; turnId?: string; issues: ValidationIssue[] };

/** One streamed turn, validated as a turn of the HTTP batch (plus its conversation). */
export const parseIngestRequest = (m: IngestRequest): TurnParse => {
  const conversation = ConversationSchema.safeParse(m.conversation);
  const raw = {
    turnId: blank(m.turn_id),
    speaker: m.speaker,
    role: blank(m.role),
    text: m.text,
    timestamp: m.timestamp,
    sessionId: blank(m.session_id),
    metadata: Object.keys(m.metadata).length > 0 ? m.metadata : undefined,
  };
  const turn = TurnInputSchema.safeParse(defined(raw));
  const issues: ValidationIssue[] = [
    ...(conversation.success ? [] : protoIssues(conversation.error).map((i) => ({ ...i, path: "conversation" }))),
    ...(turn.success ? [] : protoIssues(turn.error)),
  ];
  if (conversation.success && turn.success) return { ok: true, conversation: conversation.data, turn: turn.data };
  const turnId = blank(m.turn_id);
  return turnId !== undefined ? { ok: false, turnId, issues } : { ok: false, issues };
};

/** The conversation to flush; undefined: every conversation of the tenant. */
export const parseFlushRequest = (m: FlushRequest): string | undefined => {
  const raw = blank(m.conversation);
  if (raw === undefined) return undefined;
  const conversation = ConversationSchema.safeParse(raw);
  if (!conversation.success)
    throw new InvalidArgument(
      "invalid conversation",
      protoIssues(conversation.error).map((i) => ({ ...i, path: "conversation" })),
    );
  return conversation.data;
};

export const parseQueryRequest = (m: QueryRequestMessage): QueryRequest => {
  const parsed = QueryRequestSchema.safeParse(
    defined({
      question: m.question,
      conversation: blank(m.conversation),
      budget: m.budget ? m.budget : undefined,
      asOf: blank(m.as_of),
    }),
  );
  // as_of follows the HTTP rule (QueryRequestSchema): an ISO 8601 date or date-time with an offset.
  if (!parsed.success) throw new InvalidArgument("invalid query", protoIssues(parsed.error));
  return parsed.data;
};

const ListRecordsSchema = recordListingSchema(z.number().int().min(1).max(200).default(50), z.boolean().optional());

export const parseListRecordsRequest = (m: ListRecordsRequest): RecordQuery => {
  const parsed = ListRecordsSchema.safeParse({
    conversation: blank(m.conversation),
    entity: blank(m.entity),
    type: blank(m.type),
    from: blank(m.from),
    to: blank(m.to),
    limit: m.limit ? m.limit : undefined,
    cursor: blank(m.cursor),
    includeSuperseded: m.include_superseded ? true : undefined,
  });
  if (!parsed.success) throw new InvalidArgument("invalid record listing", protoIssues(parsed.error));
  return parsed.data;
};

export const parseGetRecordRequest = (m: GetRecordRequest): string => {
  const raw = blank(m.id.trim());
  if (raw === undefined) throw new InvalidArgument("invalid request", [{ path: "id", message: "is required" }]);
  const id = RecordIdSchema.safeParse(raw);
  if (!id.success)
    throw new InvalidArgument(
      "invalid request",
      protoIssues(id.error).map((i) => ({ ...i, path: "id" })),
    );
  return id.data;
};
