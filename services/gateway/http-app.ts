import { createHash, randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import { matchedRoutes } from "hono/route";
import type { Logger } from "pino";
import { z } from "zod";
import { isMemoryMaintenance, type MemoryMaintenance } from "../consolidator/types.ts";
import { DEFAULT_MAX_BODY_BYTES } from "../core/config.ts";
import {
  ConflictError,
  conflictMessage,
  issuesFromZod,
  ValidationError,
  type ValidationIssue,
} from "../core/errors.ts";
import { ingestAroundConflicts } from "../core/ingest-conflicts.ts";
import { idSchema } from "../core/input-rules.ts";
import type { MaintenanceOffer } from "../core/maintenance.ts";
import type { MemoryService } from "../core/memory-service.ts";
import { QueryRequestSchema, recordListingSchema, type TurnInput, TurnInputSchema } from "../core/requests.ts";
import { createMcpHttpHandler } from "../mcp/http.ts";
import { httpTracing } from "../platform/http-tracing.ts";
import type { Metrics } from "../platform/metrics.ts";
import { AuthFailureLimiter } from "./auth-failure-limiter.ts";
import { explorerRoutes } from "./explorer-routes.ts";

/** Default request body limit (config http.maxBodyBytes): larger bodies get 413. */
export { DEFAULT_MAX_BODY_BYTES };
/** Default failed authentications per client address per minute before 429. */
export const DEFAULT_AUTH_FAILURES_PER_MINUTE = 20;
/** Most turns one batch request may carry. */
export const MAX_BATCH_TURNS = 1000;

export interface HttpAppDeps {
  service: MemoryService;
  /** API key -> tenant (Config.apiKeys). */
  apiKeys: Record<string, string>;
  metrics: Metrics;
  /** Serve `GET /metrics` on this app (default true; false where a separate metrics port serves it). */
  serveMetrics?: boolean;
  logger?: Logger;
  /** Request body limit in bytes (default 5 MiB; config http.maxBodyBytes). */
  maxBodyBytes?: number;
  /** Failed authentications per client address per minute before 429 (default 20; 0: no limit). */
  authFailuresPerMinute?: number;
  /** Clock of the failed-auth window (tests). */
  now?: () => number;
  /**
   * Consolidation, version history and erasure (default: the service itself when it offers them,
   * as the embedded engine does). Without them those routes answer 501.
   */
  maintenance?: MemoryMaintenance;
}

export type HttpAppEnv = { Variables: { tenant: string; requestId: string; failure: unknown } };

/**
 * A rejected item of a batch: its position in `turns`, its turnId when it had one, and what is
 * wrong; `status: 409` when its turnId already exists in the conversation with different content.
 */
export interface RejectedTurn {
  index: number;
  turnId?: string;
  status?: 409;
  issues: ValidationIssue[];
}

const ConversationParamSchema = idSchema();
const RecordIdParamSchema = idSchema();

const BatchEnvelopeSchema = z.object({
  turns: z.array(z.unknown()).min(1).max(MAX_BATCH_TURNS),
});

const RecordsQueryParamsSchema = recordListingSchema(
  z.coerce.number().int().min(1).max(200).default(50),
  z
    .enum(["true", "false", "1", "0"])
    .transform((v) => v === "true" || v === "1")
    .optional(),
);

const KNOWN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

const hashKey = (key: string): string => createHash("sha256").update(key, "utf8").digest("hex");

/** The API key of a request: `Authorization: Bearer <key>`, else `x-api-key: <key>`. */
const apiKeyOf = (c: Context): string | undefined => {
  const auth = c.req.header("authorization");
  const bearer = auth ? /^Bearer\s+(.+)$/i.exec(auth.trim())?.[1]?.trim() : undefined;
  if (bearer) return bearer;
  const header = c.req.header("x-api-key")?.trim();
  return header ? header : undefined;
};

/** The registered pattern of the route that matched (never the raw path, to bound label cardinality). */
const routeLabel = (c: Context): string => {
  const route = matchedRoutes(c).find((r) => r.method !== "ALL");
  return route ? route.path : "unmatched";
};

/** A client's x-request-id is kept when it is this tame (it goes into log lines and headers). */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** `application/json`, or a `+json` type, with any parameters (charset). */
const JSON_CONTENT_TYPE = /^application\/([a-z0-9.-]+\+)?json\s*(;|$)/i;

/** The socket peer of the request (@hono/node-server puts the IncomingMessage in env), else "unknown". */
const clientAddressOf = (c: Context): string => {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined;
  return env?.incoming?.socket?.remoteAddress ?? "unknown";
};

type JsonBody = { ok: true; value: unknown } | { ok: false; response: Response };

/** The JSON body of a POST: 415 unless it is declared JSON, 400 when it does not parse. */
const readJson = async (c: Context): Promise<JsonBody> => {
  if (!JSON_CONTENT_TYPE.test(c.req.header("content-type") ?? "")) {
    return {
      ok: false,
      response: c.json(
        {
          error: "unsupported media type: send the body as JSON with Content-Type: application/json",
          expected: "application/json",
        },
        415,
      ),
    };
  }
  const text = await c.req.text();
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, response: c.json({ error: "invalid JSON body" }, 400) };
  }
};

/**
 * hono reads `turns:batch` in a route as the static `turns` followed by a parameter named `batch`,
 * so `/turnsX` and `/turns:anything` would reach the batch route: its handler checks the segment
 * itself. `%3A` is the same colon percent-encoded, as some clients send it.
 */
const isBatchPath = (c: Context): boolean => /\/turns(:|%3A)batch$/i.test(new URL(c.req.url).pathname);

/**
 * The HTTP front door (hono). Routes, status codes and shapes are documented in
 * schemas/openapi.yaml. The tenant always comes from the API key: request bodies are parsed with
 * zod object schemas, which strip unknown keys, so a `tenant` field in a body is silently ignored
 * (and so is a `tenant` query parameter).
 */
export const createHttpApp = (deps: HttpAppDeps): Hono<HttpAppEnv> => {
  const { service, metrics, logger } = deps;
  const maxBodyBytes = deps.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const authFailures = new AuthFailureLimiter({
    limit: deps.authFailuresPerMinute ?? DEFAULT_AUTH_FAILURES_PER_MINUTE,
    windowMs: 60_000,
    ...(deps.now ? { now: deps.now } : {}),
  });
  // Keys are looked up by their SHA-256, in a Map: no prototype keys, no key material compared byte by byte.
  const tenantsByKeyHash = new Map<string, string>(
    Object.entries(deps.apiKeys).map(([key, tenant]) => [hashKey(key), tenant]),
  );

  const app = new Hono<HttpAppEnv>();
  app.use("*", httpTracing({ route: routeLabel }));

  // Request id (the client's x-request-id when tame, else a new UUID) on every response, in the
  // body of every 5xx, and in the one log line written for every 5xx.
  app.use("*", async (c, next) => {
    const started = performance.now();
    const incoming = c.req.header("x-request-id")?.trim();
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    c.set("requestId", requestId);
    await next();
    c.res.headers.set("x-request-id", requestId);
    const method = KNOWN_METHODS.has(c.req.method) ? c.req.method : "OTHER";
    const route = routeLabel(c);
    metrics.httpRequest(route, method, c.res.status, (performance.now() - started) / 1000);
    if (c.res.status >= 500) {
      const err = c.get("failure");
      logger?.error(
        { requestId, method: c.req.method, route, status: c.res.status, ...(err !== undefined ? { err } : {}) },
        err !== undefined ? "HTTP request failed" : "HTTP request answered 5xx",
      );
    }
  });

  app.notFound((c) => c.json({ error: "not found" }, 404));

  app.onError((err, c) => {
    if (err instanceof ValidationError) return c.json({ error: err.message, issues: err.issues }, 400);
    if (err instanceof ConflictError) {
      const issues = err.conflicts.map((x) => ({ path: "turnId", message: conflictMessage(x.turnId) }));
      return c.json({ error: err.message, issues }, 409);
    }
    if (err instanceof HTTPException) {
      if (err.status === 413) return c.json({ error: "request body too large" }, 413);
      if (err.status < 500) return c.json({ error: err.message || "bad request" }, err.status);
    }
    c.set("failure", err);
    return c.json({ error: "internal error", requestId: c.get("requestId") }, 500);
  });

  // --- Unauthenticated: probes and metrics -------------------------------------------------------

  app.get("/healthz", (c) => c.json({ status: "ok" }));

  app.get("/readyz", async (c) => {
    try {
      const health = await service.health();
      return c.json({ ready: health.ready, ok: health.ok, details: health.details }, health.ready ? 200 : 503);
    } catch (err) {
      logger?.warn({ err }, "health check failed");
      return c.json({ ready: false, ok: false, details: {} }, 503);
    }
  });

  // Off where the process serves /metrics on a port of its own (the gateway with
  // MEMORY_METRICS_PORT): its tenant labels are not for the public port.
  if (deps.serveMetrics !== false) {
    app.get("/metrics", async (c) => {
      const body = await metrics.render();
      return c.body(body, 200, { "content-type": metrics.contentType });
    });
  }

  // --- /v1: API key required -----------------------------------------------------------------------

  // The same key check guards /v1 and the MCP endpoint (/mcp): one credential, one tenant.
  const requireApiKey: MiddlewareHandler<HttpAppEnv> = async (c, next) => {
    // An address with too many failed authentications this minute is refused before its key is
    // looked at, so guessing keys costs a minute per `authFailuresPerMinute` guesses.
    const address = clientAddressOf(c);
    const wait = authFailures.retryAfterSeconds(address);
    if (wait > 0) {
      return c.json({ error: "too many failed authentications; retry later", retryAfterSeconds: wait }, 429, {
        "retry-after": String(wait),
      });
    }
    const key = apiKeyOf(c);
    if (!key) {
      authFailures.fail(address);
      return c.json({ error: "missing API key" }, 401, { "www-authenticate": 'Bearer realm="memory"' });
    }
    const tenant = tenantsByKeyHash.get(hashKey(key));
    if (tenant === undefined) {
      authFailures.fail(address);
      return c.json({ error: "invalid API key" }, 401, { "www-authenticate": 'Bearer realm="memory"' });
    }
    c.set("tenant", tenant);
    await next();
  };
  const limitBody = bodyLimit({
    maxSize: maxBodyBytes,
    onError: (c) => c.json({ error: "request body too large", limitBytes: maxBodyBytes }, 413),
  });

  app.use("/v1/*", requireApiKey);
  app.use("/v1/*", limitBody);
  app.use("/mcp", requireApiKey);
  app.use("/mcp", limitBody);

  const conversationOf = (c: Context<HttpAppEnv>): string => {
    const parsed = ConversationParamSchema.safeParse(c.req.param("conversation"));
    if (!parsed.success) {
      throw new ValidationError(
        "invalid conversation",
        issuesFromZod(parsed.error).map((i) => ({ ...i, path: "conversation" })),
      );
    }
    return parsed.data;
  };

  app.post("/v1/conversations/:conversation/turns", async (c) => {
    const conversation = conversationOf(c);
    const body = await readJson(c);
    if (!body.ok) return body.response;
    const turn = TurnInputSchema.safeParse(body.value);
    if (!turn.success) return c.json({ error: "invalid turn", issues: issuesFromZod(turn.error) }, 400);
    const result = await service.ingest(c.get("tenant"), conversation, [turn.data]);
    return c.json({ accepted: result.accepted, turnIds: result.turnIds }, 202);
  });

  /*
   * Batch ingest. Each turn is validated on its own: the valid ones are ingested, in the order they
   * were sent, in one call, and are never dropped because another turn of the batch is bad. The
   * response lists the accepted turn ids and each rejected item with its index and issues.
   * 202: all accepted; 207: some rejected; 400: none valid, or the envelope ({turns: [1..1000]}) is
   * malformed (nothing is ingested then).
   */
  app.post("/v1/conversations/:conversation/turns:batch", async (c) => {
    if (!isBatchPath(c)) return c.json({ error: "not found" }, 404);
    const conversation = conversationOf(c);
    const body = await readJson(c);
    if (!body.ok) return body.response;
    const envelope = BatchEnvelopeSchema.safeParse(body.value);
    if (!envelope.success) return c.json({ error: "invalid batch", issues: issuesFromZod(envelope.error) }, 400);

    const valid: { index: number; turn: TurnInput }[] = [];
    const rejected: RejectedTurn[] = [];
    envelope.data.turns.forEach((raw, index) => {
      const turn = TurnInputSchema.safeParse(raw);
      if (turn.success) {
        valid.push({ index, turn: turn.data });
        return;
      }
      const turnId =
        typeof raw === "object" && raw !== null && "turnId" in raw && typeof raw.turnId === "string"
          ? raw.turnId
          : undefined;
      rejected.push({ index, ...(turnId !== undefined ? { turnId } : {}), issues: issuesFromZod(turn.error) });
    });

    if (valid.length === 0) return c.json({ error: "no valid turns", accepted: 0, turnIds: [], rejected }, 400);
    const result = await ingestAroundConflicts(
      service,
      c.get("tenant"),
      conversation,
      valid.map((v) => v.turn),
    );
    for (const x of result.conflicts) {
      const index = (valid[x.index] as { index: number }).index;
      rejected.push({
        index,
        turnId: x.turnId,
        status: 409,
        issues: [{ path: "turnId", message: conflictMessage(x.turnId) }],
      });
    }
    rejected.sort((a, b) => a.index - b.index);
    if (result.conflicts.length === valid.length)
      return c.json({ error: "no turns ingested: turn ids in conflict", accepted: 0, turnIds: [], rejected }, 409);
    return c.json({ accepted: result.accepted, turnIds: result.turnIds, rejected }, rejected.length === 0 ? 202 : 207);
  });

  app.post("/v1/conversations/:conversation/flush", async (c) => {
    const conversation = conversationOf(c);
    await service.flush(c.get("tenant"), conversation);
    return c.json({ flushed: true, conversation }, 202);
  });

  app.post("/v1/flush", async (c) => {
    await service.flush(c.get("tenant"));
    return c.json({ flushed: true }, 202);
  });

  app.post("/v1/query", async (c) => {
    const body = await readJson(c);
    if (!body.ok) return body.response;
    const req = QueryRequestSchema.safeParse(body.value);
    if (!req.success) return c.json({ error: "invalid query", issues: issuesFromZod(req.error) }, 400);
    // Query count and latency are recorded by the front door (the engine's observer does not see queries).
    const started = performance.now();
    try {
      const result = await service.query(c.get("tenant"), req.data);
      metrics.query("ok", (performance.now() - started) / 1000);
      return c.json(result, 200);
    } catch (err) {
      metrics.query("error", (performance.now() - started) / 1000);
      throw err;
    }
  });

  app.get("/v1/records", async (c) => {
    // Empty parameters (`?type=`) count as absent.
    const raw = Object.fromEntries(Object.entries(c.req.query()).filter(([, v]) => v !== ""));
    const params = RecordsQueryParamsSchema.safeParse(raw);
    if (!params.success) return c.json({ error: "invalid query parameters", issues: issuesFromZod(params.error) }, 400);
    const page = await service.listRecords(c.get("tenant"), params.data);
    return c.json({ records: page.records, nextCursor: page.nextCursor ?? null }, 200);
  });

  // --- Maintenance: consolidation, version history, erasure --------------------------------------

  const offered = (service as MaintenanceOffer).offersMaintenance !== false;
  const maintenance = deps.maintenance ?? (offered && isMemoryMaintenance(service) ? service : undefined);
  const unsupported = (c: Context<HttpAppEnv>) =>
    c.json(
      { error: "not supported by this runtime (no consolidation or erasure)", requestId: c.get("requestId") },
      501,
    );

  const recordIdOf = (c: Context<HttpAppEnv>): string => {
    const parsed = RecordIdParamSchema.safeParse(c.req.param("id"));
    if (!parsed.success) {
      throw new ValidationError(
        "invalid record id",
        issuesFromZod(parsed.error).map((i) => ({ ...i, path: "id" })),
      );
    }
    return parsed.data;
  };

  app.post("/v1/consolidate", async (c) => {
    if (!maintenance) return unsupported(c);
    const report = await maintenance.consolidate(c.get("tenant"));
    return c.json(report, 200);
  });

  app.get("/v1/records/:id/history", async (c) => {
    if (!maintenance) return unsupported(c);
    const history = await maintenance.history(c.get("tenant"), recordIdOf(c));
    if (!history) return c.json({ error: "record not found" }, 404);
    return c.json(history, 200);
  });

  app.delete("/v1/conversations/:conversation", async (c) => {
    if (!maintenance) return unsupported(c);
    const conversation = conversationOf(c);
    const report = await maintenance.erase(c.get("tenant"), conversation);
    return c.json(report, 200);
  });

  app.delete("/v1/tenant", async (c) => {
    if (!maintenance) return unsupported(c);
    const tenant = c.get("tenant");
    if (c.req.query("confirm") !== tenant) {
      return c.json(
        {
          error: "erasing a tenant needs ?confirm=<tenant>, naming the tenant of the API key",
          issues: [{ path: "confirm", message: "must equal the tenant of the API key" }],
        },
        400,
      );
    }
    const report = await maintenance.erase(tenant);
    return c.json(report, 200);
  });

  // --- MCP (Streamable HTTP): the same tools as `memory mcp`, for the tenant of the key ---------------

  const mcp = createMcpHttpHandler({
    service,
    ...(maintenance ? { maintenance } : {}),
    maxBodyBytes,
    onInternalError: (err, tool) => logger?.error({ err, tool }, "MCP tool failed"),
  });
  // Named methods, not app.all: the request metrics label a route by its method-bound pattern.
  app.on(["POST", "GET", "DELETE"], "/mcp", (c) => mcp(c.req.raw, c.get("tenant")));

  app.route("/", explorerRoutes({ service }));

  app.get("/v1/records/:id", async (c) => {
    const record = await service.getRecord(c.get("tenant"), recordIdOf(c));
    if (!record) return c.json({ error: "record not found" }, 404);
    return c.json(record, 200);
  });

  return app;
};
