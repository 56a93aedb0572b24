/**
 * The gRPC front door (schemas/memory.proto, package memory.v1): the same operations as the HTTP
 * API over any MemoryService. Who the caller is comes from an Authenticator over the call metadata:
 * API keys for the public gateway (`authorization: Bearer <key>` or `x-api-key`), or the tenant
 * header the gateway sets for the internal query service. Input is validated with the same zod
 * schemas as HTTP; a bad field is INVALID_ARGUMENT with the field named in the message and, as JSON,
 * in the trailing metadata `memory-issues`.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import {
  ServerCredentials as Creds,
  type GrpcObject,
  loadPackageDefinition,
  Metadata,
  Server,
  type ServerCredentials,
  type ServerReadableStream,
  type ServerUnaryCall,
  type ServiceClientConstructor,
  type ServiceDefinition,
  type sendUnaryData,
  status,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { loadSync, type Options } from "@grpc/proto-loader";
import { Counter, Histogram } from "prom-client";
import { z } from "zod";
import {
  ConflictError,
  conflictMessage,
  isConflictError,
  issuesFromZod,
  isValidationError,
  type ValidationIssue,
} from "../core/errors.ts";
import { ingestAroundConflicts } from "../core/ingest-conflicts.ts";
import { idSchema } from "../core/input-rules.ts";
import type { MemoryService } from "../core/memory-service.ts";
import type { RecordPage, RecordQuery } from "../core/ports.ts";
import type { ContextItem, QueryResult } from "../core/query-types.ts";
import { QueryRequestSchema, recordListingSchema, type TurnInput, TurnInputSchema } from "../core/requests.ts";
import type { MemoryRecord, Source } from "../core/types.ts";
import { AuthFailureLimiter } from "./auth-failure-limiter.ts";
import type { Metrics } from "./metrics.ts";

export const PROTO_PATH = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "schemas", "memory.proto");

/** proto-loader options: field names as in the .proto, 64-bit integers as numbers, defaults filled in. */
export const PROTO_OPTIONS: Options = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true };

/** Most turns one Ingest stream may carry. */
export const MAX_STREAM_TURNS = 100_000;
/** Turns of one conversation handed to the service at a time while a stream is read. */
export const INGEST_CHUNK = 200;
/** Trailing metadata key of the field issues of an INVALID_ARGUMENT. */
export const ISSUES_METADATA_KEY = "memory-issues";

let cachedService: ServiceClientConstructor | undefined;

/** The memory.v1.Memory client constructor (its `.service` is the server's definition). */
export const memoryServiceConstructor = (): ServiceClientConstructor => {
  if (cachedService) return cachedService;
  const loaded = loadPackageDefinition(loadSync(PROTO_PATH, PROTO_OPTIONS));
  const pkg = (loaded.memory as GrpcObject | undefined)?.v1 as GrpcObject | undefined;
  const ctor = pkg?.Memory as ServiceClientConstructor | undefined;
  if (!ctor || typeof ctor !== "function") throw new Error(`memory.v1.Memory not found in ${PROTO_PATH}`);
  cachedService = ctor;
  return ctor;
};

export const memoryServiceDefinition = (): ServiceDefinition => memoryServiceConstructor().service;

// ---------------------------------------------------------------------------------------------------
// Wire shapes (keepCase: snake_case, as in the .proto; defaults filled in on decode)

export interface IssueWire {
  path: string;
  message: string;
}
export interface IngestRequestWire {
  conversation: string;
  turn_id: string;
  speaker: string;
  role: string;
  text: string;
  timestamp: string;
  session_id: string;
  metadata: Record<string, string>;
}
export interface RejectedTurnWire {
  index: number;
  turn_id: string;
  issues: IssueWire[];
}
export interface IngestSummaryWire {
  accepted: number;
  turn_ids: string[];
  rejected: RejectedTurnWire[];
}
export interface FlushRequestWire {
  conversation: string;
}
export interface FlushReplyWire {
  flushed: boolean;
  conversation: string;
}
export interface QueryRequestWire {
  question: string;
  conversation: string;
  budget: number;
  as_of: string;
}
export interface RouteHitWire {
  route: string;
  rank: number;
  score: number;
}
export interface ContextItemWire {
  kind: string;
  id: string;
  text: string;
  date: string;
  conversation: string;
  turn_ids: string[];
  speakers: string[];
  routes: RouteHitWire[];
  fused_score: number;
  tokens: number;
}
export interface QueryPlanWire {
  question_type: string;
  entities: string[];
  topics: string[];
  time_window: { from: string; to: string } | null;
  routes: string[];
  rewrites: string[];
}
export interface QueryCostWire {
  embedding_calls: number;
  llm_calls: number;
  input_tokens: number;
  output_tokens: number;
  ms: number;
  route_ms: Record<string, number>;
}
export interface QueryReplyWire {
  context: string;
  context_tokens: number;
  budget: number;
  items: ContextItemWire[];
  plan: QueryPlanWire | null;
  cost: QueryCostWire | null;
}
export interface ListRecordsRequestWire {
  conversation: string;
  entity: string;
  type: string;
  from: string;
  to: string;
  limit: number;
  cursor: string;
  include_superseded: boolean;
}
export interface EntityWire {
  name: string;
  kind: string;
  aliases: string[];
}
export interface SourceWire {
  tenant: string;
  conversation: string;
  segment_id: string;
  turn_ids: string[];
  speakers: string[];
  session_id: string;
  said_at: string;
}
export interface RecordWire {
  id: string;
  type: string;
  text: string;
  entities: EntityWire[];
  topics: string[];
  time: { at: string; from: string; to: string } | null;
  source: SourceWire | null;
  valid: { from: string; to: string; superseded_by: string } | null;
  merged_sources: SourceWire[];
}
export interface ListRecordsReplyWire {
  records: RecordWire[];
  next_cursor: string;
}
export interface GetRecordRequestWire {
  id: string;
}

// ---------------------------------------------------------------------------------------------------
// Domain -> wire

const sourceToWire = (s: Source): SourceWire => ({
  tenant: s.tenant,
  conversation: s.conversation,
  segment_id: s.segmentId,
  turn_ids: s.turnIds,
  speakers: s.speakers,
  session_id: s.sessionId,
  said_at: s.saidAt,
});

export const recordToWire = (r: MemoryRecord): RecordWire => ({
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

const itemToWire = (i: ContextItem): ContextItemWire => ({
  kind: i.kind,
  id: i.id,
  text: i.text,
  date: i.date,
  conversation: i.conversation,
  turn_ids: i.turnIds,
  speakers: i.speakers,
  routes: i.routes.map((r) => ({ route: r.route, rank: r.rank, score: r.score })),
  fused_score: i.fusedScore,
  tokens: i.tokens,
});

export const queryResultToWire = (q: QueryResult): QueryReplyWire => {
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
      time_window: q.plan.timeWindow ? { from: q.plan.timeWindow.from, to: q.plan.timeWindow.to } : null,
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

// ---------------------------------------------------------------------------------------------------
// Wire -> domain (requests): the HTTP schemas, with proto field names in the issues

/** camelCase field names of the domain schemas as the proto names them (sessionId -> session_id). */
const protoPath = (path: string): string =>
  path
    .split(".")
    .map((p) => p.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`))
    .join(".");

const protoIssues = (err: z.ZodError): ValidationIssue[] =>
  issuesFromZod(err).map((i) => ({ path: protoPath(i.path), message: i.message }));

/** A request the caller got wrong: INVALID_ARGUMENT naming each field. */
export class InvalidArgument extends Error {
  override readonly name = "InvalidArgument";
  constructor(
    message: string,
    readonly issues: ValidationIssue[],
  ) {
    super(
      issues.length > 0
        ? `${message}: ${issues.map((i) => `${i.path || "(request)"}: ${i.message}`).join("; ")}`
        : message,
    );
  }
}

/** An operation a server does not offer (Ingest and Flush on the query service): UNIMPLEMENTED. */
export class UnsupportedOperation extends Error {
  override readonly name = "UnsupportedOperation";
}

/** The identifier rule of every front door (input-rules.ts), as HTTP applies it to path parameters. */
const ConversationSchema = idSchema();
const RecordIdSchema = idSchema();
const blank = (s: string | undefined | null): string | undefined =>
  s === undefined || s === null || s === "" ? undefined : s;

/** The object without its undefined values (zod keeps an explicitly undefined optional key). */
const defined = <T extends Record<string, unknown>>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

export type TurnParse =
  | { ok: true; conversation: string; turn: TurnInput }
  | { ok: false; turnId?: string; issues: ValidationIssue[] };

/** One streamed turn, validated as a turn of the HTTP batch (plus its conversation). */
export const parseIngestRequest = (m: Partial<IngestRequestWire>): TurnParse => {
  const conversation = ConversationSchema.safeParse(m.conversation ?? "");
  const raw = {
    turnId: blank(m.turn_id),
    speaker: m.speaker ?? "",
    role: blank(m.role),
    text: m.text ?? "",
    timestamp: m.timestamp ?? "",
    sessionId: blank(m.session_id),
    metadata: m.metadata && Object.keys(m.metadata).length > 0 ? m.metadata : undefined,
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

export const parseQueryRequest = (m: Partial<QueryRequestWire>) => {
  const parsed = QueryRequestSchema.safeParse(
    defined({
      question: m.question ?? "",
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

export const parseListRecordsRequest = (m: Partial<ListRecordsRequestWire>): RecordQuery => {
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

// ---------------------------------------------------------------------------------------------------
// Authentication

/** The tenant of a call from its metadata, or undefined (UNAUTHENTICATED). */
export type Authenticator = (metadata: Metadata) => string | undefined;

const first = (md: Metadata, key: string): string | undefined => {
  const v = md.get(key)[0];
  const s = typeof v === "string" ? v.trim() : v?.toString("utf8").trim();
  return s ? s : undefined;
};

const bearerOf = (md: Metadata): string | undefined => {
  const auth = first(md, "authorization");
  return auth ? /^Bearer\s+(.+)$/i.exec(auth)?.[1]?.trim() : undefined;
};

const sha256 = (s: string): string => createHash("sha256").update(s, "utf8").digest("hex");

/** Public front door: the tenant of the API key (`authorization: Bearer <key>`, else `x-api-key`). */
export const apiKeyAuthenticator = (apiKeys: Record<string, string>): Authenticator => {
  const byHash = new Map(Object.entries(apiKeys).map(([k, t]) => [sha256(k), t]));
  return (md) => {
    const key = bearerOf(md) ?? first(md, "x-api-key");
    return key ? byHash.get(sha256(key)) : undefined;
  };
};

/**
 * Metadata key with which the gateway names the (already authenticated) tenant to the query
 * service. gRPC metadata values are printable ASCII, tenant names are Unicode: the value is the
 * name percent-encoded (encodeURIComponent), decoded by internalAuthenticator.
 */
export const TENANT_METADATA_KEY = "x-memory-tenant";

export const encodeTenantMetadata = (tenant: string): string => encodeURIComponent(tenant);

/** The tenant of a metadata value; a value that is not percent-encoding is taken as it is (older gateways). */
export const decodeTenantMetadata = (value: string): string => {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
};

/**
 * Internal services behind the gateway: the tenant the gateway resolved, in `x-memory-tenant`;
 * when a token is configured the caller must present it as `authorization: Bearer <token>`.
 */
export const internalAuthenticator = (token?: string): Authenticator => {
  const expected = token ? Buffer.from(sha256(token)) : undefined;
  return (md) => {
    if (expected) {
      const got = bearerOf(md);
      if (!got || !timingSafeEqual(Buffer.from(sha256(got)), expected)) return undefined;
    }
    const value = first(md, TENANT_METADATA_KEY);
    return value === undefined ? undefined : decodeTenantMetadata(value);
  };
};

// ---------------------------------------------------------------------------------------------------
// Errors -> status

export interface GrpcFailure {
  code: status;
  details: string;
  metadata?: Metadata;
}

const issuesMetadata = (issues: readonly ValidationIssue[]): Metadata => {
  const md = new Metadata();
  md.set(ISSUES_METADATA_KEY, JSON.stringify(issues));
  return md;
};

/** Codes from a backend (the query service) that the caller should see as they are. */
const PASS_THROUGH = new Set<number>([
  status.INVALID_ARGUMENT,
  status.NOT_FOUND,
  status.UNAVAILABLE,
  status.DEADLINE_EXCEEDED,
  status.RESOURCE_EXHAUSTED,
  status.UNIMPLEMENTED,
]);

export const toGrpcFailure = (err: unknown): GrpcFailure => {
  if (err instanceof InvalidArgument)
    return { code: status.INVALID_ARGUMENT, details: err.message, metadata: issuesMetadata(err.issues) };
  if (isValidationError(err)) {
    const issues = err.issues.map((i) => ({ path: protoPath(i.path), message: i.message }));
    const details =
      issues.length > 0 ? `${err.message} (${issues.map((i) => `${i.path}: ${i.message}`).join("; ")})` : err.message;
    return { code: status.INVALID_ARGUMENT, details, metadata: issuesMetadata(issues) };
  }
  if (isConflictError(err)) return { code: status.ALREADY_EXISTS, details: err.message };
  if (err instanceof UnsupportedOperation) return { code: status.UNIMPLEMENTED, details: err.message };
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "number" && PASS_THROUGH.has(code))
    return { code, details: (err as { details?: string }).details ?? String(err) };
  return { code: status.INTERNAL, details: "internal error" };
};

// ---------------------------------------------------------------------------------------------------
// The service implementation

export type GrpcLog = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;

export interface GrpcServiceDeps {
  service: MemoryService;
  authenticate: Authenticator;
  /**
   * Failed authentications per client address per minute before calls from it are refused with
   * RESOURCE_EXHAUSTED and a `retry-after` trailer (as HTTP's 429); absent or 0: no limit.
   */
  authFailuresPerMinute?: number;
  metrics?: Metrics;
  log?: GrpcLog;
}

type Outcome = { code: status };

/** Request count and latency per method and status code, on the service's metrics registry. */
class GrpcMetrics {
  private readonly requests: Counter<"method" | "code">;
  private readonly latency: Histogram<"method">;
  constructor(private readonly metrics: Metrics) {
    const registers = [metrics.registry];
    this.requests = new Counter({
      name: "memory_grpc_requests_total",
      help: "gRPC calls served, by method and status code.",
      labelNames: ["method", "code"],
      registers,
    });
    this.latency = new Histogram({
      name: "memory_grpc_request_duration_seconds",
      help: "gRPC call latency by method.",
      labelNames: ["method"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
  }
  observe(method: string, outcome: Outcome, seconds: number): void {
    this.requests.inc({ method, code: status[outcome.code] ?? String(outcome.code) });
    this.latency.observe({ method }, seconds);
    if (method === "Query") this.metrics.query(outcome.code === status.OK ? "ok" : "error", seconds);
  }
}

/** The client address of a gRPC peer ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:..."), without the port. */
export const peerAddressOf = (peer: string): string => {
  const rest = peer.replace(/^(ipv4|ipv6|unix):/, "");
  const v6 = /^\[([^\]]+)\]/.exec(rest);
  if (v6?.[1]) return v6[1];
  const colon = rest.lastIndexOf(":");
  return colon > 0 && /^\d+$/.test(rest.slice(colon + 1)) ? rest.slice(0, colon) : rest;
};

/** memory.v1.Memory handlers over a MemoryService. */
export const memoryServiceImplementation = (deps: GrpcServiceDeps): UntypedServiceImplementation => {
  const { service, log } = deps;
  const gm = deps.metrics ? new GrpcMetrics(deps.metrics) : undefined;
  const authFailures = new AuthFailureLimiter({ limit: deps.authFailuresPerMinute ?? 0 });

  /**
   * The caller's tenant, or why the call is refused. An address with too many failed
   * authentications this minute is refused before its key is looked at, as on HTTP.
   */
  const authorize = (call: { metadata: Metadata; getPeer(): string }): string | GrpcFailure => {
    const address = peerAddressOf(call.getPeer());
    const wait = authFailures.retryAfterSeconds(address);
    if (wait > 0) {
      const metadata = new Metadata();
      metadata.set("retry-after", String(wait));
      return { code: status.RESOURCE_EXHAUSTED, details: "too many failed authentications; retry later", metadata };
    }
    const tenant = deps.authenticate(call.metadata);
    if (tenant !== undefined) return tenant;
    authFailures.fail(address);
    return { code: status.UNAUTHENTICATED, details: "missing or invalid API key" };
  };

  const fail = (method: string, err: unknown): GrpcFailure => {
    const f = toGrpcFailure(err);
    if (f.code === status.INTERNAL) log?.("error", "gRPC call failed", { method, error: String(err) });
    return f;
  };

  const unary =
    <Req, Res>(method: string, run: (tenant: string, req: Req) => Promise<Res>) =>
    (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
      const started = performance.now();
      const done = (code: status): void => gm?.observe(method, { code }, (performance.now() - started) / 1000);
      const tenant = authorize(call);
      if (typeof tenant !== "string") {
        done(tenant.code);
        callback(tenant);
        return;
      }
      run(tenant, call.request).then(
        (res) => {
          done(status.OK);
          callback(null, res);
        },
        (err: unknown) => {
          const f = fail(method, err);
          done(f.code);
          callback({ code: f.code, details: f.details, ...(f.metadata ? { metadata: f.metadata } : {}) });
        },
      );
    };

  const Ingest = (
    call: ServerReadableStream<Partial<IngestRequestWire>, IngestSummaryWire>,
    callback: sendUnaryData<IngestSummaryWire>,
  ): void => {
    const started = performance.now();
    const done = (code: status): void => gm?.observe("Ingest", { code }, (performance.now() - started) / 1000);
    const tenant = authorize(call);
    if (typeof tenant !== "string") {
      done(tenant.code);
      callback(tenant);
      return;
    }
    const summary: IngestSummaryWire = { accepted: 0, turn_ids: [], rejected: [] };
    let pending: { conversation: string; turns: TurnInput[]; indices: number[] } | undefined;
    const conflictIds: string[] = [];
    let chain: Promise<void> = Promise.resolve();
    let failed: unknown;
    let index = 0;
    let finished = false;

    // Consecutive turns of one conversation go to the service together, in stream order.
    const dispatch = (): void => {
      const batch = pending;
      pending = undefined;
      if (!batch) return;
      chain = chain.then(async () => {
        if (failed !== undefined) return;
        try {
          // A turn whose id exists with other content is rejected (ALREADY_EXISTS in words); the others go in.
          const r = await ingestAroundConflicts(service, tenant, batch.conversation, batch.turns);
          summary.accepted += r.accepted;
          summary.turn_ids.push(...r.turnIds);
          for (const x of r.conflicts) {
            conflictIds.push(x.turnId);
            summary.rejected.push({
              index: batch.indices[x.index] ?? -1,
              turn_id: x.turnId,
              issues: [{ path: "turn_id", message: conflictMessage(x.turnId) }],
            });
          }
        } catch (err) {
          failed = err;
        }
      });
    };
    const finish = (f?: GrpcFailure): void => {
      if (finished) return;
      finished = true;
      if (f) {
        done(f.code);
        callback({ code: f.code, details: f.details, ...(f.metadata ? { metadata: f.metadata } : {}) });
        return;
      }
      done(status.OK);
      callback(null, summary);
    };

    call.on("data", (m: Partial<IngestRequestWire>) => {
      if (finished) return;
      const i = index++;
      if (i >= MAX_STREAM_TURNS) {
        finish({ code: status.RESOURCE_EXHAUSTED, details: `a stream carries at most ${MAX_STREAM_TURNS} turns` });
        return;
      }
      const parsed = parseIngestRequest(m);
      if (!parsed.ok) {
        summary.rejected.push({ index: i, turn_id: parsed.turnId ?? "", issues: parsed.issues });
        return;
      }
      if (pending && pending.conversation !== parsed.conversation) dispatch();
      pending ??= { conversation: parsed.conversation, turns: [], indices: [] };
      pending.turns.push(parsed.turn);
      pending.indices.push(i);
      if (pending.turns.length >= INGEST_CHUNK) dispatch();
    });
    call.on("error", (err) => {
      log?.("warn", "Ingest stream failed", { error: String(err) });
      finished = true;
    });
    call.on("end", () => {
      dispatch();
      void chain.then(() => {
        if (failed !== undefined) return finish(fail("Ingest", failed));
        if (index === 0) return finish(toGrpcFailure(new InvalidArgument("no turns in the stream", [])));
        summary.rejected.sort((a, b) => a.index - b.index);
        if (summary.accepted === 0 && conflictIds.length > 0)
          return finish(toGrpcFailure(new ConflictError(conflictIds.map((turnId, index) => ({ index, turnId })))));
        if (summary.accepted === 0) {
          const issues = summary.rejected.flatMap((r) =>
            r.issues.map((x) => ({ ...x, path: `turns.${r.index}.${x.path}` })),
          );
          return finish(toGrpcFailure(new InvalidArgument("no valid turns", issues)));
        }
        finish();
      });
    });
  };

  return {
    Ingest,
    Flush: unary<Partial<FlushRequestWire>, FlushReplyWire>("Flush", async (tenant, req) => {
      const raw = blank(req.conversation);
      if (raw === undefined) {
        await service.flush(tenant);
        return { flushed: true, conversation: "" };
      }
      const conversation = ConversationSchema.safeParse(raw);
      if (!conversation.success)
        throw new InvalidArgument(
          "invalid conversation",
          protoIssues(conversation.error).map((i) => ({ ...i, path: "conversation" })),
        );
      await service.flush(tenant, conversation.data);
      return { flushed: true, conversation: conversation.data };
    }),
    Query: unary<Partial<QueryRequestWire>, QueryReplyWire>("Query", async (tenant, req) =>
      queryResultToWire(await service.query(tenant, parseQueryRequest(req))),
    ),
    ListRecords: unary<Partial<ListRecordsRequestWire>, ListRecordsReplyWire>("ListRecords", async (tenant, req) => {
      const page: RecordPage = await service.listRecords(tenant, parseListRecordsRequest(req));
      return { records: page.records.map(recordToWire), next_cursor: page.nextCursor ?? "" };
    }),
    GetRecord: unary<Partial<GetRecordRequestWire>, RecordWire>("GetRecord", async (tenant, req) => {
      const raw = blank(req.id?.trim());
      if (raw === undefined) throw new InvalidArgument("invalid request", [{ path: "id", message: "is required" }]);
      const id = RecordIdSchema.safeParse(raw);
      if (!id.success)
        throw new InvalidArgument(
          "invalid request",
          protoIssues(id.error).map((i) => ({ ...i, path: "id" })),
        );
      const record = await service.getRecord(tenant, id.data);
      if (!record)
        throw Object.assign(new Error("record not found"), { code: status.NOT_FOUND, details: "record not found" });
      return recordToWire(record);
    }),
  };
};

// ---------------------------------------------------------------------------------------------------
// The server

export interface GrpcServerOptions extends GrpcServiceDeps {
  /** Interface to bind (default 127.0.0.1). */
  host?: string;
  /** Port (default 50051); 0 picks a free one. */
  port?: number;
  credentials?: ServerCredentials;
  /** On close, how long calls in flight may take before they are cancelled (default 5000 ms). */
  closeGraceMs?: number;
}

export interface RunningGrpcServer {
  /** host:port actually bound, e.g. 127.0.0.1:50123 */
  address: string;
  port: number;
  close(): Promise<void>;
}

const hostPort = (host: string, port: number): string => (host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`);

/** Serves memory.v1.Memory over `deps.service`; resolves once bound. */
export const startGrpcServer = async (options: GrpcServerOptions): Promise<RunningGrpcServer> => {
  const host = options.host ?? "127.0.0.1";
  const server = new Server({ "grpc.max_receive_message_length": 16 * 1024 * 1024 });
  server.addService(memoryServiceDefinition(), memoryServiceImplementation(options));
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      hostPort(host, options.port ?? 50051),
      options.credentials ?? Creds.createInsecure(),
      (err, bound) => (err ? reject(err) : resolve(bound)),
    ),
  );
  const graceMs = options.closeGraceMs ?? 5000;
  let closing: Promise<void> | undefined;
  return {
    address: hostPort(host, port),
    port,
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      return closing;
    },
  };
};
