/**
 * Typed errors of the client. Every non-2xx answer the client does not turn into a result becomes
 * a MemoryApiError carrying the status, a stable `code` derived from it, the server's message, the
 * field it named (validation errors name fields with dotted paths) and the whole error body.
 */
import type { components } from "./generated/openapi.ts";

export type Issue = components["schemas"]["Issue"];

/** A stable name per HTTP status the API documents (schemas/openapi.yaml), for `switch`es. */
export type MemoryApiErrorCode =
  | "invalid_request"
  | "unauthorized"
  | "not_found"
  | "conflict"
  | "payload_too_large"
  | "unsupported_media_type"
  | "rate_limited"
  | "internal"
  | "not_supported"
  | "unavailable"
  | "http_error";

const CODES: Record<number, MemoryApiErrorCode> = {
  400: "invalid_request",
  401: "unauthorized",
  404: "not_found",
  409: "conflict",
  413: "payload_too_large",
  415: "unsupported_media_type",
  429: "rate_limited",
  500: "internal",
  501: "not_supported",
  503: "unavailable",
};

export const errorCodeOf = (status: number): MemoryApiErrorCode => CODES[status] ?? "http_error";

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The documented error body's issues, when it has well-formed ones. */
const issuesOf = (body: unknown): Issue[] => {
  if (!isRecord(body) || !Array.isArray(body.issues)) return [];
  return body.issues.filter(
    (i): i is Issue => isRecord(i) && typeof i.path === "string" && typeof i.message === "string",
  );
};

export interface MemoryApiErrorInit {
  status: number;
  /** The parsed JSON error body, or the text when it was not JSON. */
  body: unknown;
  method: string;
  url: string;
  /** The response's `x-request-id` (quote it when reporting a failure). */
  requestId?: string | undefined;
  /** The response's Retry-After, in milliseconds, when it had a usable one. */
  retryAfterMs?: number | undefined;
  /** How many attempts were made before giving up (1 when the answer was not retryable). */
  attempts?: number;
}

/** An HTTP error answer of the memory API. */
export class MemoryApiError extends Error {
  override readonly name = "MemoryApiError";
  readonly status: number;
  readonly code: MemoryApiErrorCode;
  /** The server's error body (`{ error, issues? }` for documented errors). */
  readonly body: unknown;
  /** Validation issues, each naming a field with a dotted path (empty when none). */
  readonly issues: Issue[];
  /** The first issue's field, when the server named one (`""` names the body as a whole). */
  readonly field: string | undefined;
  readonly method: string;
  readonly url: string;
  readonly requestId: string | undefined;
  readonly retryAfterMs: number | undefined;
  readonly attempts: number;

  constructor(init: MemoryApiErrorInit) {
    const serverMessage = isRecord(init.body) && typeof init.body.error === "string" ? init.body.error : undefined;
    const issues = issuesOf(init.body);
    const detail = issues.length > 0 ? `: ${issues.map((i) => `${i.path || "(body)"}: ${i.message}`).join("; ")}` : "";
    super(
      `${init.method} ${new URL(init.url).pathname} answered ${init.status}${serverMessage ? ` ${serverMessage}` : ""}${detail}`,
    );
    this.status = init.status;
    this.code = errorCodeOf(init.status);
    this.body = init.body;
    this.issues = issues;
    this.field = issues[0]?.path;
    this.method = init.method;
    this.url = init.url;
    this.requestId = init.requestId;
    this.retryAfterMs = init.retryAfterMs;
    this.attempts = init.attempts ?? 1;
  }

  /** The server's `error` message, when the body had one. */
  get serverMessage(): string | undefined {
    return isRecord(this.body) && typeof this.body.error === "string" ? this.body.error : undefined;
  }
}

/** The request never got an HTTP answer (connection refused, reset, DNS...), after every attempt allowed. */
export class MemoryNetworkError extends Error {
  override readonly name = "MemoryNetworkError";
  readonly method: string;
  readonly url: string;
  readonly attempts: number;

  constructor(method: string, url: string, attempts: number, cause: unknown) {
    super(
      `${method} ${new URL(url).pathname} failed without an answer after ${attempts} attempt(s): ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.method = method;
    this.url = url;
    this.attempts = attempts;
  }
}
