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
