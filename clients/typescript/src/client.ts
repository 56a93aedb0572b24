/**
 * MemoryClient: the memory service's HTTP API (schemas/openapi.yaml) as typed methods over
 * openapi-fetch, with the API key, retries (retry.ts), an ingest helper that splits turns into the
 * server's batch limit (batching.ts), async iteration over record listings and typed errors
 * (errors.ts).
 */
import createClient, { type Client } from "openapi-fetch";
import { planBatches } from "./batching.ts";
import { type Issue, MemoryApiError, type MemoryApiErrorInit } from "./errors.ts";
import { MAX_BATCH_TURNS, MAX_LIST_LIMIT } from "./generated/limits.ts";
import type { paths } from "./generated/openapi.ts";
import {
  answerInfo,
  type FetchLike,
  parseRetryAfter,
  type RetryOptions,
  type RetryPolicy,
  retryingFetch,
  retryPolicy,
} from "./retry.ts";
import type {
  BatchResult,
  ConsolidationReport,
  ConversationPage,
  ConversationSummary,
  ErasureReport,
  IngestResult,
  MemoryRecord,
  QueryRequest,
  QueryResult,
  Readiness,
  RecordFilters,
  RecordHistory,
  RecordPage,
  Timeline,
  TurnInput,
} from "./types.ts";

/** The server's default request body limit (`MEMORY_HTTP_MAX_BODY_BYTES`, openapi.yaml "Limits"). */
export const DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024;

export interface MemoryClientOptions {
  /** The server, e.g. `http://127.0.0.1:8787` (no trailing `/v1`). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <key>`; the tenant comes from it. Probes need none. */
  apiKey?: string;
  /** Retries on 429/503 and (for calls safe to repeat) network errors; see RetryOptions. */
  retry?: RetryOptions;
  /** The fetch to send with (default globalThis.fetch), e.g. a proxy-aware one. */
  fetch?: FetchLike;
  /** Extra headers on every request (e.g. `x-request-id`). */
  headers?: Record<string, string>;
  /** Most turns per batch request (default and maximum: the document's MAX_BATCH_TURNS). */
  maxBatchTurns?: number;
  /** Largest batch request body in bytes (default 5 MiB; set it to the server's http.maxBodyBytes). */
  maxBodyBytes?: number;
}

/** A turn the ingest helper did not get accepted, by its index in the caller's array. */
export interface IngestRejection {
  index: number;
  turnId?: string;
  /** 409 when the turn's id exists in the conversation with different content; 413 when the turn alone is over the body limit. */
  status?: number;
  issues: Issue[];
}

export interface IngestReport {
  /** Turns accepted in all. */
  accepted: number;
  /** Ids of the accepted turns, in the caller's order. */
  turnIds: string[];
  /** Rejected turns, by ascending index in the caller's array. */
  rejected: IngestRejection[];
  /** Batch requests sent. */
  requests: number;
}

/**
 * A batch request failed as a whole (not a per-turn rejection: 401, 413, 5xx after retries...).
 * `report` holds what earlier requests ingested; `unsent` the indices of the turns not ingested
 * (the failed request's and every later one's), to resend after fixing the cause.
 */
export class IngestBatchError extends MemoryApiError {
  readonly report: IngestReport;
  readonly unsent: number[];

  constructor(init: MemoryApiErrorInit, report: IngestReport, unsent: number[]) {
    super(init);
    this.report = report;
    this.unsent = unsent;
  }
}

export interface IterateOptions {
  /** Page size (1 to MAX_LIST_LIMIT; default the server's, 50). */
  pageSize?: number;
  /** Stop with an error after this many pages (default 10000): a bound on a misbehaving server. */
  maxPages?: number;
}

interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The `rejected` list of a 400/409 batch answer (`no valid turns`, `turn ids in conflict`), if it is one. */
const batchRejectionsOf = (body: unknown): BatchResult["rejected"] | undefined =>
  isRecord(body) && body.accepted === 0 && Array.isArray(body.rejected)
    ? (body.rejected as BatchResult["rejected"])
    : undefined;

export class MemoryClient {
  readonly baseUrl: string;
  private readonly api: Client<paths>;
  private readonly policy: RetryPolicy;
  private readonly baseFetch: FetchLike;
  private readonly maxBatchTurns: number;
  private readonly maxBodyBytes: number;

  constructor(options: MemoryClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.policy = retryPolicy(options.retry);
    this.baseFetch = options.fetch ?? ((request) => globalThis.fetch(request));
    const maxTurns = options.maxBatchTurns ?? MAX_BATCH_TURNS;
    if (!Number.isInteger(maxTurns) || maxTurns < 1 || maxTurns > MAX_BATCH_TURNS) {
      throw new RangeError(`maxBatchTurns must be an integer from 1 to ${MAX_BATCH_TURNS}, got ${maxTurns}`);
    }
    this.maxBatchTurns = maxTurns;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.api = createClient<paths>({
      baseUrl: this.baseUrl,
      headers: {
        ...options.headers,
        ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
      },
    });
  }

  /** The MCP endpoint (Streamable HTTP) for an MCP client, with the same API key. */
  get mcpUrl(): string {
    return `${this.baseUrl}/mcp`;
  }

  // --- probes ---------------------------------------------------------------------------------

  /** Liveness: resolves when the process answers 200. */
  async healthz(): Promise<{ status: "ok" }> {
    return this.unwrap(await this.api.GET("/healthz", { fetch: this.fetcher(true) }));
  }

  /** Readiness: the engine's report; `ready: false` (a 503) is an answer here, not an error, and is not retried. */
  async readyz(): Promise<Readiness> {
    const answer = await this.api.GET("/readyz", { fetch: this.fetcher(true, false) });
    if (answer.response.status === 503 && isRecord(answer.error)) return answer.error as Readiness;
    return this.unwrap(answer);
  }

  /** Prometheus text exposition of the server's metrics. */
  async metrics(): Promise<string> {
    return this.unwrap(await this.api.GET("/metrics", { parseAs: "text", fetch: this.fetcher(true) }));
  }

  // --- ingest ---------------------------------------------------------------------------------

  /** Ingests one turn (202). Retried after a network error only when the turn has a `turnId`. */
  async ingestTurn(conversation: string, turn: TurnInput): Promise<IngestResult> {
    return this.unwrap(
      await this.api.POST("/v1/conversations/{conversation}/turns", {
        params: { path: { conversation } },
        body: turn,
        fetch: this.fetcher(turn.turnId !== undefined),
      }),
    );
  }

  /**
   * One batch request (1 to MAX_BATCH_TURNS turns): 202 or 207 resolve with the accepted ids and
   * the rejected turns; 400 (no valid turn, bad envelope) and 409 (ids in conflict) throw a
   * MemoryApiError whose body lists the rejections. `ingest` splits and collects for you.
   */
  async ingestTurnBatch(conversation: string, turns: TurnInput[]): Promise<BatchResult> {
    return this.unwrap(
      await this.api.POST("/v1/conversations/{conversation}/turns:batch", {
        params: { path: { conversation } },
        body: { turns },
        fetch: this.fetcher(turns.every((t) => t.turnId !== undefined)),
      }),
    );
  }

  /**
   * Ingests any number of turns of one conversation, in order, in as few batch requests as the
   * limits allow (MAX_BATCH_TURNS turns and `maxBodyBytes` each). Per-turn rejections, including a
   * batch in which no turn was valid, come back in the report with each turn's index in `turns`;
   * a request that fails as a whole throws IngestBatchError with what was ingested before it.
   */
  async ingest(conversation: string, turns: readonly TurnInput[]): Promise<IngestReport> {
    const plan = planBatches(turns, { maxTurns: this.maxBatchTurns, maxBytes: this.maxBodyBytes });
    const report: IngestReport = { accepted: 0, turnIds: [], rejected: [], requests: 0 };
    const tooLarge = new Set(plan.tooLarge);
    for (const index of plan.tooLarge) {
      report.rejected.push({
        index,
        ...(turns[index]?.turnId !== undefined ? { turnId: turns[index]?.turnId } : {}),
        status: 413,
        issues: [{ path: "", message: `the turn alone is over the request body limit (${this.maxBodyBytes} bytes)` }],
      });
    }
    for (const [n, batch] of plan.batches.entries()) {
      const answer = await this.api.POST("/v1/conversations/{conversation}/turns:batch", {
        params: { path: { conversation } },
        body: { turns: batch.turns },
        fetch: this.fetcher(batch.turns.every((t) => t.turnId !== undefined)),
      });
      report.requests += 1;
      const rejected = answer.data?.rejected ?? batchRejectionsOf(answer.error);
      if (rejected === undefined || !(answer.response.ok || [400, 409].includes(answer.response.status))) {
        const unsent = plan.batches.slice(n).flatMap((b) => b.indices);
        throw new IngestBatchError(this.errorInit(answer.response, answer.error), this.sorted(report), unsent);
      }
      if (answer.data) {
        report.accepted += answer.data.accepted;
        report.turnIds.push(...answer.data.turnIds);
      }
      for (const r of rejected) {
        const index = batch.indices[r.index];
        if (index === undefined || tooLarge.has(index)) continue;
        report.rejected.push({ ...r, index });
      }
    }
    return this.sorted(report);
  }

  /** Closes the open segments of one conversation, or of every conversation of the tenant. */
  async flush(conversation?: string): Promise<{ flushed: true; conversation?: string }> {
    if (conversation === undefined) {
      return this.unwrap(await this.api.POST("/v1/flush", { fetch: this.fetcher(true) }));
    }
    return this.unwrap(
      await this.api.POST("/v1/conversations/{conversation}/flush", {
        params: { path: { conversation } },
        fetch: this.fetcher(true),
      }),
    );
  }

  // --- query and records ----------------------------------------------------------------------

  /** A budgeted memory context for a question (a read: retried after network errors too). */
  async query(request: QueryRequest): Promise<QueryResult> {
    return this.unwrap(await this.api.POST("/v1/query", { body: request, fetch: this.fetcher(true) }));
  }

  /** One page of records; pass the previous page's `nextCursor` as `cursor` for the next. */
  async listRecords(filters: RecordFilters & { cursor?: string } = {}): Promise<RecordPage> {
    const { includeSuperseded, ...rest } = filters;
    const query = {
      ...rest,
      ...(includeSuperseded === undefined
        ? {}
        : {
            includeSuperseded: typeof includeSuperseded === "boolean" ? String(includeSuperseded) : includeSuperseded,
          }),
    } as NonNullable<paths["/v1/records"]["get"]["parameters"]["query"]>;
    return this.unwrap(await this.api.GET("/v1/records", { params: { query }, fetch: this.fetcher(true) }));
  }

  /** Every page of a listing, following cursors until the last page. */
  async *recordPages(filters: RecordFilters = {}, options: IterateOptions = {}): AsyncGenerator<RecordPage> {
    const pageSize = options.pageSize ?? filters.limit;
    if (pageSize !== undefined && !(Number.isInteger(pageSize) && pageSize >= 1 && pageSize <= MAX_LIST_LIMIT)) {
      throw new RangeError(`pageSize must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${pageSize}`);
    }
    const maxPages = options.maxPages ?? 10_000;
    let cursor: string | undefined;
    for (let pages = 0; pages < maxPages; pages++) {
      const page = await this.listRecords({
        ...filters,
        ...(pageSize !== undefined ? { limit: pageSize } : {}),
        ...(cursor !== undefined ? { cursor } : {}),
      });
      yield page;
      if (page.nextCursor === null) return;
      if (page.nextCursor === cursor) throw new Error("the server answered the same cursor twice; stopping");
      cursor = page.nextCursor;
    }
    throw new Error(`record listing still had more pages after ${maxPages} pages (raise maxPages)`);
  }

  /** Every record of a listing, page after page: `for await (const r of client.records({ conversation }))`. */
  async *records(filters: RecordFilters = {}, options: IterateOptions = {}): AsyncGenerator<MemoryRecord> {
    for await (const page of this.recordPages(filters, options)) yield* page.records;
  }

  /** One record (MemoryApiError 404 `not_found` when the tenant has no such record). */
  async getRecord(id: string): Promise<MemoryRecord> {
    return this.unwrap(await this.api.GET("/v1/records/{id}", { params: { path: { id } }, fetch: this.fetcher(true) }));
  }

  /** The record's version chain after consolidation (itself alone when never consolidated). */
  async getRecordHistory(id: string): Promise<RecordHistory> {
    return this.unwrap(
      await this.api.GET("/v1/records/{id}/history", { params: { path: { id } }, fetch: this.fetcher(true) }),
    );
  }

  // --- explorer reads ---------------------------------------------------------------------------

  /** One page of the tenant's conversations (501 `not_supported` where the runtime has no store to read). */
  async listConversations(page: { limit?: number; cursor?: string } = {}): Promise<ConversationPage> {
    return this.unwrap(await this.api.GET("/v1/conversations", { params: { query: page }, fetch: this.fetcher(true) }));
  }

  /** Every conversation of the tenant, page after page. */
  async *conversations(options: IterateOptions = {}): AsyncGenerator<ConversationSummary> {
    const maxPages = options.maxPages ?? 10_000;
    let cursor: string | undefined;
    for (let pages = 0; pages < maxPages; pages++) {
      const page = await this.listConversations({
        ...(options.pageSize !== undefined ? { limit: options.pageSize } : {}),
        ...(cursor !== undefined ? { cursor } : {}),
      });
      yield* page.conversations;
      if (page.nextCursor === null) return;
      if (page.nextCursor === cursor) throw new Error("the server answered the same cursor twice; stopping");
      cursor = page.nextCursor;
    }
    throw new Error(`conversation listing still had more pages after ${maxPages} pages (raise maxPages)`);
  }

  /** One page of a conversation's timeline: segments in time order with their turns, decisions and records. */
  async timeline(conversation: string, page: { limit?: number; cursor?: string } = {}): Promise<Timeline> {
    return this.unwrap(
      await this.api.GET("/v1/conversations/{conversation}/timeline", {
        params: { path: { conversation }, query: page },
        fetch: this.fetcher(true),
      }),
    );
  }

  // --- maintenance ----------------------------------------------------------------------------

  /** Sleep-time consolidation now (idempotent: a second run finds nothing to do). */
  async consolidate(): Promise<ConsolidationReport> {
    return this.unwrap(await this.api.POST("/v1/consolidate", { fetch: this.fetcher(true) }));
  }

  /** Erases a conversation from every store (idempotent). */
  async eraseConversation(conversation: string): Promise<ErasureReport> {
    return this.unwrap(
      await this.api.DELETE("/v1/conversations/{conversation}", {
        params: { path: { conversation } },
        fetch: this.fetcher(true),
      }),
    );
  }

  /** Erases everything of the key's tenant; `confirmTenant` must name that tenant (else 400 naming `confirm`). */
  async eraseTenant(confirmTenant: string): Promise<ErasureReport> {
    return this.unwrap(
      await this.api.DELETE("/v1/tenant", { params: { query: { confirm: confirmTenant } }, fetch: this.fetcher(true) }),
    );
  }

  // --- plumbing -------------------------------------------------------------------------------

  private fetcher(idempotent: boolean, retryStatuses = true): FetchLike {
    return retryingFetch(this.baseFetch, this.policy, { idempotent, retryStatuses });
  }

  private errorInit(response: Response, body: unknown): MemoryApiErrorInit {
    const sent = answerInfo(response);
    return {
      status: response.status,
      body,
      method: sent?.method ?? "HTTP",
      url: sent?.url ?? (response.url || this.baseUrl),
      requestId: response.headers.get("x-request-id") ?? undefined,
      retryAfterMs: parseRetryAfter(response.headers.get("retry-after"), this.policy.now()),
      attempts: sent?.attempts ?? 1,
    };
  }

  private unwrap<T>(answer: Answer<T>): T {
    if (!answer.response.ok) throw new MemoryApiError(this.errorInit(answer.response, answer.error));
    return answer.data as T;
  }

  private sorted(report: IngestReport): IngestReport {
    report.rejected.sort((a, b) => a.index - b.index);
    return report;
  }
}
