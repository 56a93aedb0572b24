/**
 * A small typed client of memory.v1.Memory (schemas/memory.proto): replies come back in the domain
 * shapes of services/core (QueryResult, MemoryRecord, RecordPage), so an answer over gRPC compares
 * directly with the HTTP one. Used by tests and by the gateway to reach the query service
 * (GrpcQueryBackend).
 */
import { type CallOptions, type Client, credentials, Metadata, type ServiceError, status } from "@grpc/grpc-js";
import { ValidationError, type ValidationIssue } from "../core/errors.ts";
import type { RecordPage, RecordQuery } from "../core/ports.ts";
import type { ContextItem, QueryPlan, QueryResult, RouteName } from "../core/query-types.ts";
import type { QueryRequest, TurnInput } from "../core/requests.ts";
import type { Entity, MemoryRecord, RecordType, Source } from "../core/types.ts";
import {
  type ContextItemWire,
  encodeTenantMetadata,
  type FlushReplyWire,
  type IngestRequestWire,
  type IngestSummaryWire,
  ISSUES_METADATA_KEY,
  type ListRecordsReplyWire,
  memoryServiceConstructor,
  type QueryReplyWire,
  type RecordWire,
  type SourceWire,
  TENANT_METADATA_KEY,
} from "./grpc-server.ts";

// ---------------------------------------------------------------------------------------------------
// Wire -> domain

const opt = (s: string | undefined | null): string | undefined => (s ? s : undefined);

const sourceFromWire = (s: SourceWire | null): Source => ({
  tenant: s?.tenant ?? "",
  conversation: s?.conversation ?? "",
  segmentId: s?.segment_id ?? "",
  turnIds: s?.turn_ids ?? [],
  speakers: s?.speakers ?? [],
  sessionId: s?.session_id ?? "",
  saidAt: s?.said_at ?? "",
});

export const recordFromWire = (r: RecordWire): MemoryRecord => {
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

const itemFromWire = (i: ContextItemWire): ContextItem => ({
  kind: i.kind as ContextItem["kind"],
  id: i.id,
  text: i.text,
  date: i.date,
  conversation: i.conversation,
  turnIds: i.turn_ids,
  speakers: i.speakers,
  routes: i.routes.map((r) => ({ route: r.route as RouteName, rank: r.rank, score: r.score })),
  fusedScore: i.fused_score,
  tokens: i.tokens,
});

export const queryResultFromWire = (q: QueryReplyWire): QueryResult => {
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

/** Field issues of an INVALID_ARGUMENT (trailing metadata `memory-issues`). */
export const issuesOf = (err: ServiceError): ValidationIssue[] => {
  const raw = err.metadata?.get(ISSUES_METADATA_KEY)[0];
  if (raw === undefined) return [];
  try {
    const parsed = JSON.parse(raw.toString()) as unknown;
    return Array.isArray(parsed) ? (parsed as ValidationIssue[]) : [];
  } catch {
    return [];
  }
};

export const isServiceError = (err: unknown): err is ServiceError =>
  err instanceof Error && typeof (err as { code?: unknown }).code === "number" && "details" in err;

// ---------------------------------------------------------------------------------------------------
// The client

export interface MemoryGrpcClientOptions {
  /** host:port of the server. */
  address: string;
  /** Public gateway: the caller's API key (sent as `authorization: Bearer <key>`). */
  apiKey?: string;
  /** Internal query service: the bearer token (MEMORY_INTERNAL_TOKEN) to present. */
  internalToken?: string;
  /** Per-call deadline (default 30 s). */
  deadlineMs?: number;
}

/** A turn of an Ingest stream: a TurnInput naming its conversation (loose, so tests can send bad ones). */
export type StreamTurn = Partial<IngestRequestWire> | (TurnInput & { conversation: string });

const toWireTurn = (t: StreamTurn): Partial<IngestRequestWire> => {
  if ("turn_id" in t || "session_id" in t) return t as Partial<IngestRequestWire>;
  const x = t as Partial<TurnInput> & { conversation?: string };
  const out: Partial<IngestRequestWire> = {};
  if (x.conversation !== undefined) out.conversation = x.conversation;
  if (x.turnId !== undefined) out.turn_id = x.turnId;
  if (x.speaker !== undefined) out.speaker = x.speaker;
  if (x.role !== undefined) out.role = x.role;
  if (x.text !== undefined) out.text = x.text;
  if (x.timestamp !== undefined) out.timestamp = x.timestamp;
  if (x.sessionId !== undefined) out.session_id = x.sessionId;
  if (x.metadata !== undefined) out.metadata = x.metadata;
  return out;
};

type Unary<Req, Res> = (
  req: Req,
  md: Metadata,
  options: CallOptions,
  cb: (err: ServiceError | null, res?: Res) => void,
) => void;

interface ClientStreamCall<Req> {
  write(req: Req): boolean;
  end(): void;
  once(event: "drain", cb: () => void): void;
}
type ClientStream<Req, Res> = (
  md: Metadata,
  options: CallOptions,
  cb: (err: ServiceError | null, res?: Res) => void,
) => ClientStreamCall<Req>;

export class MemoryGrpcClient {
  private readonly client: Client;
  private readonly deadlineMs: number;

  constructor(private readonly options: MemoryGrpcClientOptions) {
    const Ctor = memoryServiceConstructor();
    this.client = new Ctor(options.address, credentials.createInsecure(), {
      "grpc.max_receive_message_length": 16 * 1024 * 1024,
    });
    this.deadlineMs = options.deadlineMs ?? 30_000;
  }

  /** Call metadata: the API key or internal token, plus `extra` (e.g. the tenant header). */
  metadata(extra: Record<string, string> = {}): Metadata {
    const md = new Metadata();
    if (this.options.apiKey) md.set("authorization", `Bearer ${this.options.apiKey}`);
    else if (this.options.internalToken) md.set("authorization", `Bearer ${this.options.internalToken}`);
    for (const [k, v] of Object.entries(extra)) md.set(k, v);
    return md;
  }

  private method<F>(name: string): F {
    const fn = (this.client as unknown as Record<string, unknown>)[name];
    if (typeof fn !== "function") throw new Error(`memory.v1.Memory has no ${name}`);
    return (fn as (...args: unknown[]) => unknown).bind(this.client) as F;
  }

  private unary<Req, Res>(name: string, req: Req, md: Metadata): Promise<Res> {
    const call = this.method<Unary<Req, Res>>(name);
    return new Promise((resolve, reject) =>
      call(req, md, { deadline: Date.now() + this.deadlineMs }, (err, res) =>
        err ? reject(err) : resolve(res as Res),
      ),
    );
  }

  /** Streams the turns (each naming its conversation) and resolves with the server's summary. */
  async ingest(turns: Iterable<StreamTurn>, md: Metadata = this.metadata()): Promise<IngestSummaryWire> {
    const open = this.method<ClientStream<Partial<IngestRequestWire>, IngestSummaryWire>>("Ingest");
    let call: ClientStreamCall<Partial<IngestRequestWire>> | undefined;
    const reply = new Promise<IngestSummaryWire>((resolve, reject) => {
      call = open(md, { deadline: Date.now() + this.deadlineMs * 4 }, (err, res) =>
        err ? reject(err) : resolve(res as IngestSummaryWire),
      );
    });
    const stream = call as unknown as ClientStreamCall<Partial<IngestRequestWire>>;
    for (const t of turns)
      if (!stream.write(toWireTurn(t))) await new Promise<void>((r) => stream.once("drain", () => r()));
    stream.end();
    return reply;
  }

  flush(conversation?: string, md: Metadata = this.metadata()): Promise<FlushReplyWire> {
    return this.unary("Flush", { conversation: conversation ?? "" }, md);
  }

  async query(req: QueryRequest, md: Metadata = this.metadata()): Promise<QueryResult> {
    const wire = await this.unary<object, QueryReplyWire>(
      "Query",
      {
        question: req.question,
        conversation: req.conversation ?? "",
        budget: req.budget ?? 0,
        as_of: req.asOf ?? "",
      },
      md,
    );
    return queryResultFromWire(wire);
  }

  async listRecords(query: RecordQuery, md: Metadata = this.metadata()): Promise<RecordPage> {
    const wire = await this.unary<object, ListRecordsReplyWire>(
      "ListRecords",
      {
        conversation: query.conversation ?? "",
        entity: query.entity ?? "",
        type: query.type ?? "",
        from: query.timeFrom !== undefined ? new Date(query.timeFrom).toISOString() : "",
        to: query.timeTo !== undefined ? new Date(query.timeTo).toISOString() : "",
        limit: query.limit,
        cursor: query.cursor ?? "",
        include_superseded: query.includeSuperseded ?? false,
      },
      md,
    );
    const records = wire.records.map(recordFromWire);
    return wire.next_cursor ? { records, nextCursor: wire.next_cursor } : { records };
  }

  /** undefined on NOT_FOUND. */
  async getRecord(id: string, md: Metadata = this.metadata()): Promise<MemoryRecord | undefined> {
    try {
      return recordFromWire(await this.unary<object, RecordWire>("GetRecord", { id }, md));
    } catch (err) {
      if (isServiceError(err) && err.code === status.NOT_FOUND) return undefined;
      throw err;
    }
  }

  /** Resolves once the channel is connected; rejects after `ms`. */
  waitForReady(ms: number): Promise<void> {
    return new Promise((resolve, reject) =>
      this.client.waitForReady(Date.now() + ms, (err) => (err ? reject(err) : resolve())),
    );
  }

  close(): void {
    this.client.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// The gateway's view of the query service

/** What the gateway needs from the read side. */
export interface QueryBackend {
  query(tenant: string, req: QueryRequest): Promise<QueryResult>;
  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage>;
  getRecord(tenant: string, id: string): Promise<MemoryRecord | undefined>;
  /** Reachable: the detail says what was checked. */
  health(): Promise<{ ok: boolean; detail: string }>;
  close(): Promise<void>;
}

/**
 * The query service over gRPC: the tenant the gateway authenticated travels in `x-memory-tenant`
 * (plus the internal token when configured). An INVALID_ARGUMENT from the query service becomes a
 * ValidationError again, so the HTTP front door answers 400 with the same issues.
 */
export class GrpcQueryBackend implements QueryBackend {
  readonly client: MemoryGrpcClient;

  constructor(
    readonly address: string,
    options: { internalToken?: string; deadlineMs?: number } = {},
  ) {
    this.client = new MemoryGrpcClient({ address, ...options });
  }

  private md(tenant: string): Metadata {
    return this.client.metadata({ [TENANT_METADATA_KEY]: encodeTenantMetadata(tenant) });
  }

  private async mapErrors<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      if (isServiceError(err) && err.code === status.INVALID_ARGUMENT)
        throw new ValidationError(err.details, issuesOf(err));
      throw err;
    }
  }

  query(tenant: string, req: QueryRequest): Promise<QueryResult> {
    return this.mapErrors(() => this.client.query(req, this.md(tenant)));
  }

  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage> {
    return this.mapErrors(() => this.client.listRecords(query, this.md(tenant)));
  }

  getRecord(tenant: string, id: string): Promise<MemoryRecord | undefined> {
    return this.mapErrors(() => this.client.getRecord(id, this.md(tenant)));
  }

  async health(): Promise<{ ok: boolean; detail: string }> {
    try {
      await this.client.waitForReady(1000);
      return { ok: true, detail: `reachable at ${this.address}` };
    } catch (err) {
      return {
        ok: false,
        detail: `unreachable at ${this.address}: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
  }

  async close(): Promise<void> {
    this.client.close();
  }
}
