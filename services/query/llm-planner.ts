/**
 * The LLM query planner (docs/design.md §5, Query): one call returns the question type, rewritten queries,
 * entities, topics, a time filter and the routes, validated against the known entities and the
 * route names. On any failure (transport, invalid JSON, schema) the deterministic planner answers,
 * and the failed call's cost is still counted.
 */
import { z } from "zod";
import type { Llm, LlmCost, MeteredLlmRequest, PlannerInput, QueryPlanner } from "../core/ports.ts";
import type { QueryPlan, RouteName } from "../core/query-types.ts";
import { countTokens } from "../core/tokens.ts";
import { planQuery } from "./planner.ts";
import { OPEN_START } from "./question-time.ts";

export const ROUTES: readonly RouteName[] = [
  "dense",
  "lexical",
  "entity",
  "topic",
  "time",
  "event-frame",
  "raw-dense",
  "raw-lexical",
];
const QUESTION_TYPES = ["single-hop", "multi-hop", "temporal", "open"] as const;

const nullableDate = { oneOf: [{ type: "string", format: "date" }, { type: "null" }] };
const str = (maxLength: number) => ({ type: "string", minLength: 1, maxLength });

export const plannerJsonSchema = (): Record<string, unknown> => ({
  type: "object",
  additionalProperties: false,
  required: ["questionType", "rewrites", "entities", "topics", "timeWindow", "routes"],
  properties: {
    questionType: { enum: [...QUESTION_TYPES] },
    rewrites: { type: "array", maxItems: 3, items: str(200) },
    entities: { type: "array", maxItems: 6, items: str(60) },
    topics: { type: "array", maxItems: 4, items: str(40) },
    timeWindow: {
      type: "object",
      additionalProperties: false,
      required: ["from", "to"],
      properties: { from: nullableDate, to: nullableDate },
    },
    routes: { type: "array", minItems: 1, maxItems: ROUTES.length, items: { enum: [...ROUTES] } },
  },
});

export const PLANNER_SYSTEM = `You plan a search over a long-term memory of chats. Given a question, return JSON:
- questionType: single-hop (one fact), multi-hop (combines facts), temporal (asks when, or depends on dates), open (asks for an opinion or a guess);
- rewrites: up to three short search queries with the question's key words, names resolved;
- entities: the people, places or things the question is about, spelled as in the known entities when listed;
- topics: up to four short topic labels, from the known topics when listed;
- timeWindow: the dates the question restricts to, as YYYY-MM-DD (from, to), one day as the same date twice; from null when it asks as of, by or before a date, to null when it asks since or after one; both null when it names no time;
- routes: the searches to run: dense and lexical (text), entity, topic, time (needs a timeWindow), event-frame (neighbouring facts), raw-dense and raw-lexical (the original chat turns).`;

const day = z
  .union([z.string(), z.null()])
  .optional()
  .transform((v, ctx) => {
    if (v === null || v === undefined || v.trim() === "") return undefined;
    const d = v.trim().slice(0, 10);
    if (!/^\d{4}-\d{2}-\d{2}$/.test(d) || Number.isNaN(Date.parse(d))) {
      ctx.addIssue({ code: "custom", message: `not a YYYY-MM-DD date: "${v.slice(0, 40)}"` });
      return z.NEVER;
    }
    return d;
  });

export const LlmPlanSchema = z.object({
  questionType: z.enum(QUESTION_TYPES),
  rewrites: z.array(z.string().trim().min(1).max(400)).default([]),
  entities: z.array(z.string().trim().min(1).max(120)).default([]),
  topics: z.array(z.string().trim().min(1).max(60)).default([]),
  timeWindow: z.object({ from: day, to: day }).default({ from: undefined, to: undefined }),
  routes: z.array(z.enum(ROUTES as [RouteName, ...RouteName[]])).min(1),
});

export interface LlmPlannerOptions {
  /** Known entities / topics listed in the prompt are cut to this many tokens each. Default 300. */
  listTokenCap: number;
  maxOutputTokens: number;
  stage: string;
}

export const DEFAULT_LLM_PLANNER_OPTIONS: LlmPlannerOptions = {
  listTokenCap: 300,
  maxOutputTokens: 400,
  stage: "planner",
};

/** The longest prefix of a list whose comma-joined text fits in a token cap. */
const boundedList = (items: readonly string[], cap: number): string[] => {
  const out: string[] = [];
  let used = 0;
  for (const it of items) {
    const t = countTokens(`${it}, `);
    if (used + t > cap) break;
    used += t;
    out.push(it);
  }
  return out;
};

const parseJson = (raw: string): unknown => {
  const t = raw.trim();
  const body = /^```(?:json)?\s*([\s\S]*?)\s*```$/i.exec(t)?.[1] ?? t;
  const start = body.indexOf("{");
  const end = body.lastIndexOf("}");
  return JSON.parse(start >= 0 && end > start ? body.slice(start, end + 1) : body);
};

/** Validated plan from a raw answer: entities/topics mapped onto the known ones, routes completed. */
export const planFromAnswer = (raw: string, input: PlannerInput): QueryPlan => {
  const a = LlmPlanSchema.parse(parseJson(raw));
  const known = new Map(input.knownEntities.map((e) => [e.toLowerCase(), e]));
  const entities = [
    ...new Set(
      a.entities
        .map((e) => (known.size > 0 ? known.get(e.toLowerCase()) : e))
        .filter((e): e is string => e !== undefined),
    ),
  ];
  const knownTopics = new Map(input.knownTopics.map((t) => [t.toLowerCase(), t]));
  const topics = [
    ...new Set(
      a.topics
        .map((t) => (knownTopics.size > 0 ? knownTopics.get(t.toLowerCase()) : t.toLowerCase()))
        .filter((t): t is string => t !== undefined),
    ),
  ];
  const { from, to } = a.timeWindow;
  // Both ends in either order; one end given: the window is open on the other, as the
  // deterministic planner's for "as of", "before" and "since" a date (question-time.ts): from the
  // start of memory, or up to now (that day alone if it lies ahead).
  const [lo, hi] = from && to && from > to ? [to, from] : [from, to];
  const start = lo ? `${lo}T00:00:00.000Z` : OPEN_START;
  const now = input.now.toISOString();
  const end = hi ? `${hi}T23:59:59.999Z` : start > now ? `${lo}T23:59:59.999Z` : now;
  const timeWindow = lo || hi ? { from: start, to: end } : undefined;
  const routes = new Set<RouteName>(a.routes);
  // Text recall always runs; key routes follow from the keys the plan found.
  routes.add("dense");
  if (entities.length > 0) routes.add("entity");
  else routes.delete("entity");
  if (topics.length > 0) routes.add("topic");
  else routes.delete("topic");
  if (timeWindow) routes.add("time");
  else routes.delete("time");
  const question = input.question.trim().toLowerCase();
  const rewrites = [...new Set(a.rewrites.map((r) => r.trim()))].filter((r) => r.toLowerCase() !== question);
  return {
    questionType: a.questionType,
    entities,
    topics,
    ...(timeWindow ? { timeWindow } : {}),
    routes: ROUTES.filter((r) => routes.has(r)),
    rewrites,
  };
};

export interface PlanOutcome {
  plan: QueryPlan;
  cost: LlmCost;
  /** Why the deterministic planner answered, when it did. */
  fallback?: string;
}

export class LlmPlanner implements QueryPlanner {
  readonly id: string;
  /** It asks the LLM for every plan (and falls back to the deterministic planner only after). */
  readonly waitsOnModel = true;
  readonly options: LlmPlannerOptions;
  /** The reason of the last fallback (for logs and tests). */
  lastFallback: string | undefined;

  constructor(
    private readonly llm: Llm,
    opts: Partial<LlmPlannerOptions> = {},
  ) {
    this.options = { ...DEFAULT_LLM_PLANNER_OPTIONS, ...opts };
    this.id = `llm-planner-v1:${llm.id}`;
  }

  request(input: PlannerInput & { tenant?: string }): MeteredLlmRequest {
    const entities = boundedList(input.knownEntities, this.options.listTokenCap);
    const topics = boundedList(input.knownTopics, this.options.listTokenCap);
    const now = input.now.toISOString().slice(0, 10);
    const user = [
      `Today: ${now}`,
      `Known entities: ${entities.length > 0 ? entities.join(", ") : "(none)"}`,
      `Known topics: ${topics.length > 0 ? topics.join(", ") : "(none)"}`,
      `Question: ${input.question}`,
    ].join("\n");
    return {
      system: PLANNER_SYSTEM,
      user,
      jsonSchema: plannerJsonSchema(),
      maxTokens: this.options.maxOutputTokens,
      meta: { stage: this.options.stage, tenant: input.tenant ?? "unknown" },
    };
  }

  /** `tenant` is optional so the port's PlannerInput fits; pass it to attribute the call. */
  async plan(input: PlannerInput & { tenant?: string }): Promise<PlanOutcome> {
    let cost: LlmCost = { llmCalls: 1, inputTokens: 0, outputTokens: 0 };
    try {
      const res = await this.llm.complete(this.request(input));
      cost = { llmCalls: 1, inputTokens: res.usage.inputTokens, outputTokens: res.usage.outputTokens };
      const plan = planFromAnswer(res.text, input);
      this.lastFallback = undefined;
      return { plan, cost };
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      this.lastFallback = reason;
      return { plan: planQuery(input), cost, fallback: reason };
    }
  }
}
