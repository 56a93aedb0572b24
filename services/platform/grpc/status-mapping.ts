/**
 * Errors on the gRPC wire: which status code a failure becomes (and, for a client, how to read the
 * field issues back). A bad field is INVALID_ARGUMENT with the field named in the message and, as
 * JSON [{"path","message"}], in the trailing metadata `memory-issues`; field paths use the proto's
 * names (session_id, not sessionId). Anything unexpected is INTERNAL without its message, so a
 * store's detail never reaches a caller.
 */
import { Metadata, type ServiceError, status } from "@grpc/grpc-js";
import type { z } from "zod";
import { isConflictError, issuesFromZod, isValidationError, type ValidationIssue } from "../../core/errors.ts";

/** Trailing metadata key of the field issues of an INVALID_ARGUMENT. */
export const ISSUES_METADATA_KEY = "memory-issues";

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

/** What was asked for does not exist for this tenant (GetRecord): NOT_FOUND. */
export class NotFound extends Error {
  override readonly name = "NotFound";
}

/** A limit of this server the call went over (the turns of one Ingest stream): RESOURCE_EXHAUSTED. */
export class ResourceExhausted extends Error {
  override readonly name = "ResourceExhausted";
}

/** camelCase field names of the domain schemas as the proto names them (sessionId -> session_id). */
export const protoPath = (path: string): string =>
  path
    .split(".")
    .map((p) => p.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`))
    .join(".");

/** A zod error's issues with the proto's field names. */
export const protoIssues = (err: z.ZodError): ValidationIssue[] =>
  issuesFromZod(err).map((i) => ({ path: protoPath(i.path), message: i.message }));

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

/** The status a failure of a call becomes. */
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
  if (err instanceof NotFound) return { code: status.NOT_FOUND, details: err.message };
  if (err instanceof ResourceExhausted) return { code: status.RESOURCE_EXHAUSTED, details: err.message };
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "number" && PASS_THROUGH.has(code))
    return { code, details: (err as { details?: string }).details ?? String(err) };
  return { code: status.INTERNAL, details: "internal error" };
};

// ---------------------------------------------------------------------------------------------------
// Client side

export const isServiceError = (err: unknown): err is ServiceError =>
  err instanceof Error && typeof (err as { code?: unknown }).code === "number" && "details" in err;

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
