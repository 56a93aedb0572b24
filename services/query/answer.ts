/**
 * Optional answer step (docs/design.md §5, Query): one LLM call over the packed context returns the answer
 * and the items it used. Items are shown as [1], [2], ... and the answer cites those numbers
 * (an enum in the schema), which map back to the context items' ids; a citation outside the
 * context is rejected. Used by `memory ask` (services/cli/ask.ts).
 */
import { z } from "zod";
import { UNATTRIBUTED } from "../core/llm-metering.ts";
import type { Llm, LlmCost, MeteredLlmRequest } from "../core/ports.ts";
import type { ContextItem, QueryCost, QueryResult } from "../core/query-types.ts";

export const ANSWER_SYSTEM = `You answer a question from dated memories of past chats. Use only the memories given.
Answer briefly (a few words or one sentence), with absolute dates where the question asks when.
If the memories do not say, answer "unknown". List the numbers of the memories you used.`;

export class LlmAnswerError extends Error {
  constructor(
    message: string,
    readonly raw: string,
    readonly cost: LlmCost,
  ) {
    super(message);
    this.name = "LlmAnswerError";
  }
}

export interface AnswerResult {
  answer: string;
  /** Ids of the context items the answer used (record ids, or turn row ids for raw turns). */
  usedIds: string[];
  cost: LlmCost;
}

export interface AnswerOptions {
  tenant?: string;
  stage?: string;
  maxOutputTokens?: number;
}

const itemLine = (item: ContextItem, n: number): string =>
  `[${n}] (${item.date.slice(0, 10)}; ${item.speakers.join(", ")}) ${item.text}`;

export const answerJsonSchema = (n: number): Record<string, unknown> => ({
  type: "object",
  additionalProperties: false,
  required: ["answer", "used"],
  properties: {
    answer: { type: "string", minLength: 1, maxLength: 600 },
    used: {
      type: "array",
      maxItems: Math.max(1, Math.min(n, 12)),
      items: n > 0 ? { enum: Array.from({ length: n }, (_, i) => i + 1) } : { type: "integer" },
    },
  },
});

const AnswerSchema = z.object({
  answer: z.string().trim().min(1),
  used: z.array(z.union([z.number().int(), z.string().regex(/^\[?\d+\]?$/)])).default([]),
});

export const answerRequest = (
  question: string,
  items: readonly ContextItem[],
  opts: AnswerOptions = {},
): MeteredLlmRequest => ({
  system: ANSWER_SYSTEM,
  user: [
    "Memories:",
    ...(items.length > 0 ? items.map((it, i) => itemLine(it, i + 1)) : ["(none)"]),
    "",
    `Question: ${question}`,
  ].join("\n"),
  jsonSchema: answerJsonSchema(items.length),
  maxTokens: opts.maxOutputTokens ?? 300,
  meta: { stage: opts.stage ?? "answer", tenant: opts.tenant ?? UNATTRIBUTED.tenant },
});

/** Parses and checks an answer against the items it was given. */
export const parseAnswer = (raw: string, items: readonly ContextItem[]): { answer: string; usedIds: string[] } => {
  const t = raw.trim();
  const body = /^```(?:json)?\s*([\s\S]*?)\s*```$/i.exec(t)?.[1] ?? t;
  const a = AnswerSchema.parse(JSON.parse(body));
  const usedIds: string[] = [];
  for (const u of a.used) {
    const n = typeof u === "number" ? u : Number(u.replace(/[[\]]/g, ""));
    const item = items[n - 1];
    if (!Number.isInteger(n) || !item) throw new Error(`cites [${u}], not one of the ${items.length} context items`);
    if (!usedIds.includes(item.id)) usedIds.push(item.id);
  }
  return { answer: a.answer, usedIds };
};

/** One call: the answer and the ids it used. Throws LlmAnswerError (with raw text and cost) when invalid. */
export const answerQuestion = async (
  llm: Llm,
  question: string,
  result: Pick<QueryResult, "items">,
  opts: AnswerOptions = {},
): Promise<AnswerResult> => {
  const res = await llm.complete(answerRequest(question, result.items, opts));
  const cost: LlmCost = { llmCalls: 1, inputTokens: res.usage.inputTokens, outputTokens: res.usage.outputTokens };
  try {
    return { ...parseAnswer(res.text, result.items), cost };
  } catch (err) {
    const why = err instanceof z.ZodError ? err.issues.map((i) => i.message).join("; ") : (err as Error).message;
    throw new LlmAnswerError(`llm answer: invalid output: ${why}`, res.text, cost);
  }
};

/** A query's cost with the answer step's added. */
export const withAnswerCost = (cost: QueryCost, answer: LlmCost): QueryCost => ({
  ...cost,
  llmCalls: cost.llmCalls + answer.llmCalls,
  inputTokens: cost.inputTokens + answer.inputTokens,
  outputTokens: cost.outputTokens + answer.outputTokens,
});
