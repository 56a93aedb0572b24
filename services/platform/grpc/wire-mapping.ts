/**
 * Domain shapes (services/core) <-> the generated messages of schemas/memory.proto, field by field,
 * with no validation: incoming requests are validated in request-parsing.ts. proto3 has no absent
 * strings, so an empty string on the wire stands for an absent optional value in the domain, and a
 * record or a query answer that crosses the wire twice comes back deep-equal.
 */
import type { RecordPage, RecordQuery } from "../../core/ports.ts";
import type { ContextItem, QueryPlan, QueryResult, RouteName } from "../../core/query-types.ts";
import type { QueryRequest } from "../../core/requests.ts";
import type { Entity, MemoryRecord, RecordType, Source } from "../../core/types.ts";
import type {
  ContextItem as ContextItemMessage,
  ListRecordsReply,
  ListRecordsRequest,
  QueryReply,
  QueryRequest as QueryRequestMessage,
  Record as RecordMessage,
  Source as SourceMessage,
} from "./generated/memory.ts";

// ---------------------------------------------------------------------------------------------------
// Domain -> wire (what a server answers, what a client asks)

const sourceToWire = (s: Source): SourceMessage => ({
  tenant: s.tenant,
  conversation: s.conversation,
  segment_id: s.segmentId,
  turn_ids: s.turnIds,
  speakers: s.speakers,
  session_id: s.sessionId,
  said_at: s.saidAt,
});

export const recordToWire = (r: MemoryRecord): RecordMessage => ({
  id: r.id,
  type: r.type,
  text: r.text,
  entities: r.entities.map((e) => ({ name: e.name, kind: e.kind, aliases: e.aliases })),
  topics: r.topics,
  time: { at: r.time.at ?? "", from: r.time.from ?? "", to: r.time.to ?? "" },
  source: sourceToWire(r.source),
  valid: { from: r.valid.from, to: r.valid.to ?? "", superseded_by: r.valid.supersededBy ?? "" },
  merged_sources: (r.mergedSources ?? []).map(sourceToWire),
});

export const recordPageToWire = (page: RecordPage): ListRecordsReply => ({
  records: page.records.map(recordToWire),
  next_cursor: page.nextCursor ?? "",
});

const itemToWire = (i: ContextItem): ContextItemMessage => ({
  kind: i.kind,
  id: i.id,
  text: i.text,
  date: i.date,
  date_to: i.dateTo ?? "",
  conversation: i.conversation,
  turn_ids: i.turnIds,
  speakers: i.speakers,
  routes: i.routes.map((r) => ({ route: r.route, rank: r.rank, score: r.score })),
  fused_score: i.fusedScore,
  tokens: i.tokens,
});

export const queryResultToWire = (q: QueryResult): QueryReply => {
  const routeMs: Record<string, number> = {};
  for (const [k, v] of Object.entries(q.cost.routeMs)) if (typeof v === "number") routeMs[k] = v;
  return {
    context: q.context,
    context_tokens: q.contextTokens,
    budget: q.budget,
    items: q.items.map(itemToWire),
    plan: {
      question_type: q.plan.questionType,
      entities: q.plan.entities,
      topics: q.plan.topics,
      time_window: q.plan.timeWindow ? { from: q.plan.timeWindow.from, to: q.plan.timeWindow.to } : undefined,
      routes: q.plan.routes,
      rewrites: q.plan.rewrites,
    },
    cost: {
      embedding_calls: q.cost.embeddingCalls,
      llm_calls: q.cost.llmCalls,
      input_tokens: q.cost.inputTokens,
      output_tokens: q.cost.outputTokens,
      ms: q.cost.ms,
      route_ms: routeMs,
    },
  };
};

export const queryRequestToWire = (req: QueryRequest): QueryRequestMessage => ({
  question: req.question,
  conversation: req.conversation ?? "",
  budget: req.budget ?? 0,
  as_of: req.asOf ?? "",
});

export const recordQueryToWire = (query: RecordQuery): ListRecordsRequest => ({
  conversation: query.conversation ?? "",
  entity: query.entity ?? "",
  type: query.type ?? "",
  from: query.timeFrom !== undefined ? new Date(query.timeFrom).toISOString() : "",
  to: query.timeTo !== undefined ? new Date(query.timeTo).toISOString() : "",
  limit: query.limit,
  cursor: query.cursor ?? "",
  include_superseded: query.includeSuperseded ?? false,
});

// ---------------------------------------------------------------------------------------------------
// Wire -> domain (what a client reads back)

const opt = (s: string | undefined): string | undefined => (s ? s : undefined);

const sourceFromWire = (s: SourceMessage | undefined): Source => ({
  tenant: s?.tenant ?? "",
  conversation: s?.conversation ?? "",
  segmentId: s?.segment_id ?? "",
  turnIds: s?.turn_ids ?? [],
  speakers: s?.speakers ?? [],
  sessionId: s?.session_id ?? "",
  saidAt: s?.said_at ?? "",
});

export const recordFromWire = (r: RecordMessage): MemoryRecord => {
  const time: MemoryRecord["time"] = {};
  const at = opt(r.time?.at);
  const from = opt(r.time?.from);
  const to = opt(r.time?.to);
  if (at !== undefined) time.at = at;
  if (from !== undefined) time.from = from;
  if (to !== undefined) time.to = to;
  const valid: MemoryRecord["valid"] = { from: r.valid?.from ?? "" };
  const validTo = opt(r.valid?.to);
  const supersededBy = opt(r.valid?.superseded_by);
  if (validTo !== undefined) valid.to = validTo;
  if (supersededBy !== undefined) valid.supersededBy = supersededBy;
  return {
    id: r.id,
    type: r.type as RecordType,
    text: r.text,
    entities: r.entities.map((e) => ({ name: e.name, kind: e.kind as Entity["kind"], aliases: e.aliases })),
    topics: r.topics,
    time,
    source: sourceFromWire(r.source),
    valid,
    ...(r.merged_sources.length > 0 ? { mergedSources: r.merged_sources.map(sourceFromWire) } : {}),
  };
};

export const recordPageFromWire = (reply: ListRecordsReply): RecordPage => {
  const records = reply.records.map(recordFromWire);
  return reply.next_cursor ? { records, nextCursor: reply.next_cursor } : { records };
};

const itemFromWire = (i: ContextItemMessage): ContextItem => ({
  kind: i.kind as ContextItem["kind"],
  id: i.id,
  text: i.text,
  date: i.date,
  ...(i.date_to ? { dateTo: i.date_to } : {}),
  conversation: i.conversation,
  turnIds: i.turn_ids,
  speakers: i.speakers,
  routes: i.routes.map((r) => ({ route: r.route as RouteName, rank: r.rank, score: r.score })),
  fusedScore: i.fused_score,
  tokens: i.tokens,
});

export const queryResultFromWire = (q: QueryReply): QueryResult => {
  const plan: QueryPlan = {
    questionType: (q.plan?.question_type ?? "open") as QueryPlan["questionType"],
    entities: q.plan?.entities ?? [],
    topics: q.plan?.topics ?? [],
    routes: (q.plan?.routes ?? []) as RouteName[],
    rewrites: q.plan?.rewrites ?? [],
  };
  if (q.plan?.time_window) plan.timeWindow = { from: q.plan.time_window.from, to: q.plan.time_window.to };
  const routeMs: Partial<Record<RouteName, number>> = {};
  for (const [k, v] of Object.entries(q.cost?.route_ms ?? {})) routeMs[k as RouteName] = v;
  return {
    context: q.context,
    contextTokens: q.context_tokens,
    budget: q.budget,
    items: q.items.map(itemFromWire),
    plan,
    cost: {
      embeddingCalls: q.cost?.embedding_calls ?? 0,
      llmCalls: q.cost?.llm_calls ?? 0,
      inputTokens: q.cost?.input_tokens ?? 0,
      outputTokens: q.cost?.output_tokens ?? 0,
      ms: q.cost?.ms ?? 0,
      routeMs,
    },
  };
};
