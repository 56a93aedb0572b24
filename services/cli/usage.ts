/**
 * Command-line arguments checked with the API's own schemas, so the CLI accepts exactly what the
 * HTTP API accepts. A bad argument is a UsageError: main prints it and exits with status 2.
 */
import type { z } from "zod";
import { type QueryRequest, QueryRequestSchema } from "../core/requests.ts";
import { TenantNameSchema } from "../core/tenant-name.ts";

/** Exit status of a command given bad arguments (as conventional for usage errors). */
export const USAGE_EXIT_CODE = 2;

export class UsageError extends Error {
  override readonly name = "UsageError";
}

const describe = (error: z.ZodError, names: Record<string, string>): string =>
  error.issues
    .map((i) => {
      const field = String(i.path[0] ?? "");
      return `${names[field] ?? field}: ${i.message}`;
    })
    .join("; ");

/** `memory query <question> [--budget n] [--conversation id]` as a QueryRequest, or a UsageError. */
export const queryRequestFromArgs = (
  question: string,
  o: { budget: string | number; conversation?: string },
): QueryRequest => {
  const budget = typeof o.budget === "number" ? o.budget : Number(o.budget.trim() === "" ? Number.NaN : o.budget);
  const parsed = QueryRequestSchema.safeParse({
    question,
    budget,
    ...(o.conversation !== undefined ? { conversation: o.conversation } : {}),
  });
  if (!parsed.success) {
    throw new UsageError(
      describe(parsed.error, { question: "<question>", budget: "--budget", conversation: "--conversation" }),
    );
  }
  return parsed.data;
};

/** A `--tenant` argument checked with the API's tenant-name rule, or a UsageError naming the rule. */
export const tenantFromArg = (flag: string): string => {
  const parsed = TenantNameSchema.safeParse(flag);
  if (!parsed.success)
    throw new UsageError(`invalid tenant ${JSON.stringify(flag)}: ${parsed.error.issues[0]?.message ?? ""}`);
  return parsed.data;
};
