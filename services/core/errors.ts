import type { z } from "zod";

/** One problem with a client's input: a dotted field path ("" for the input as a whole) and what is wrong. */
export interface ValidationIssue {
  path: string;
  message: string;
}

/** Issues of a zod error as client-facing field paths, e.g. `metadata.lang` or `turns.2.speaker`. */
export const issuesFromZod = (error: z.ZodError): ValidationIssue[] =>
  error.issues.map((issue) => ({
    path: issue.path.map((p) => String(p)).join("."),
    // zod says only "Invalid key in record" for a bad record key: say what is wrong with the key.
    message:
      issue.code === "invalid_key" && issue.issues.length > 0
        ? `key ${issue.issues.map((i) => i.message).join("; ")}`
        : issue.message,
  }));

/**
 * The caller's input is invalid. A front door maps it to a client error (HTTP 400, gRPC
 * INVALID_ARGUMENT) with `issues`; any other error thrown by the service is an internal error.
 */
export class ValidationError extends Error {
  override readonly name = "ValidationError";
  readonly issues: ValidationIssue[];

  constructor(message: string, issues: readonly ValidationIssue[] = []) {
    super(message);
    this.issues = [...issues];
  }

  static fromZod(error: z.ZodError, message = "invalid input"): ValidationError {
    return new ValidationError(message, issuesFromZod(error));
  }
}

export const isValidationError = (err: unknown): err is ValidationError => err instanceof ValidationError;

/** One turn of an ingest call whose id is already taken in its conversation by a turn with other content. */
export interface TurnIdConflict {
  /** Position of the turn in the call's `turns`. */
  index: number;
  turnId: string;
}

/**
 * A turn id already exists in the conversation with DIFFERENT content (the same id with the same
 * content is an idempotent retry, not a conflict). Nothing of the call was ingested. A front door
 * maps it to HTTP 409 / gRPC ALREADY_EXISTS naming the ids; batch routes set the conflicting turns
 * aside as rejected and ingest the others.
 */
export class ConflictError extends Error {
  override readonly name = "ConflictError";
  readonly conflicts: TurnIdConflict[];

  constructor(conflicts: readonly TurnIdConflict[]) {
    super(
      `turn id${conflicts.length > 1 ? "s" : ""} ${conflicts.map((c) => JSON.stringify(c.turnId)).join(", ")} already exist${conflicts.length > 1 ? "" : "s"} in this conversation with different content`,
    );
    this.conflicts = [...conflicts];
  }
}

export const isConflictError = (err: unknown): err is ConflictError => err instanceof ConflictError;

/** What a front door tells the client about one conflicting turn id. */
export const conflictMessage = (turnId: string): string =>
  `turn id ${JSON.stringify(turnId)} already exists in this conversation with different content`;
