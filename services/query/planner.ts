import { NO_LLM_COST, type PlannerInput, type QueryPlanner } from "../core/ports.ts";
import type { QueryPlan, RouteName } from "../core/query-types.ts";
import { questionWindow } from "./question-time.ts";

const TEMPORAL =
  /\b(when|what (date|day|year|month|time)|how long|since when|which (year|month|day)|before|after|ago)\b/i;
const MULTI_HOP =
  /\b(both|in common|and .+ both|compare|together|each other|all the|how many|what (are|were) some|which .+s\b)/i;
const OPEN = /\b(would|could|might|likely|probably|considered|if .+ had)\b/i;

/**
 * Questions whose answer collects mentions over time: lists and counts ("how many", "what kinds
 * of", "what books"), whether something ever happened, and the present perfect ("where has P
 * been"). Their evidence is one mention in each of several sessions. A plural object with a word or
 * two before it ("what LGBTQ+ events has P attended", "which small towns did P visit") asks for
 * a list as much as a bare one ("what books has P read"). What two people both did or have in
 * common joins a mention of each, said in different sessions as often as not. A habit or a liking
 * asked in the simple present ("what do P's kids like", "what does P do to relax") is a trait
 * shown by several mentions, not one statement.
 */
const AGGREGATION =
  /\b(how many|how often|ever|both|in common|kinds? of|types? of|sorts? of|all the|(what|which) (are|were) some)\b|^\s*(what|which|where)\s+([a-z]+s\s+)?(has|have)\b|^\s*(what|which)\s+(?!(is|was|does|has|this|us|its)\b)[a-z]+s\b|^\s*(what|which)\s+(\S+\s+){1,2}[a-z]+s\s+(has|have|had|did|do)\b|^\s*what\s+(do|does)\s+.*\b(like|love|enjoy|do\s+(to|for|with|when))\b/i;

export const isAggregation = (question: string): boolean => AGGREGATION.test(question);

/**
 * Questions about how long something took or has gone on: the answer is the time between the
 * event's first mention and its last (or now), so both ends are evidence.
 */
const DURATION = /\b(how long|since when|how many (years|months|weeks|days))\b/i;

export const asksForDuration = (question: string): boolean => DURATION.test(question);

/** Questions that ask for an inference about a person (a likely choice, a trait, a hypothetical). */
export const isInference = (question: string): boolean => OPEN.test(question);

/**
 * Whether the answer is gathered from what a person said here and there rather than from one
 * statement: a list or count, or an inference from traits mentioned in passing.
 */
export const collectsMentions = (question: string): boolean => isAggregation(question) || isInference(question);

const STOP = new Set(
  "a an the of to in on at for with and or is are was were be been do does did what when where who whom which why how has have had his her their its it this that these those from by as about into he she they them i you we my your our any some".split(
    " ",
  ),
);

const words = (text: string): string[] => text.toLowerCase().match(/[\p{L}\p{N}][\p{L}\p{N}'-]*/gu) ?? [];

const hasPhrase = (haystack: string[], phrase: string): boolean => {
  const needle = words(phrase);
  if (needle.length === 0) return false;
  for (let i = 0; i + needle.length <= haystack.length; i++)
    if (needle.every((w, j) => haystack[i + j]?.replace(/'s$/, "") === w)) return true;
  return false;
};

/**
 * The deterministic planner (no LLM): entities matched against the entity index, time expressions
 * parsed, the question type by pattern, and the routes that follow from them.
 */
export const planQuery = ({ question, knownEntities, knownTopics, now }: PlannerInput): QueryPlan => {
  const qWords = words(question);
  const entities = [...new Set(knownEntities.filter((e) => hasPhrase(qWords, e)))];
  const content = qWords.filter((w) => !STOP.has(w) && w.length > 2);
  const topicSet = new Set(knownTopics.map((t) => t.toLowerCase()));
  const topics = [...new Set(content.filter((w) => topicSet.has(w)))];
  const window = questionWindow(question, now);
  const questionType: QueryPlan["questionType"] = TEMPORAL.test(question)
    ? "temporal"
    : MULTI_HOP.test(question) || entities.length > 1
      ? "multi-hop"
      : OPEN.test(question)
        ? "open"
        : "single-hop";
  const routes: RouteName[] = ["dense", "lexical", "raw-dense", "raw-lexical", "event-frame"];
  if (entities.length > 0) routes.push("entity");
  if (topics.length > 0) routes.push("topic");
  if (window) routes.push("time");
  const keywords = content.join(" ");
  return {
    questionType,
    entities,
    topics,
    ...(window ? { timeWindow: window } : {}),
    routes,
    rewrites: keywords && keywords !== question.toLowerCase() ? [keywords] : [],
  };
};

export class DeterministicPlanner implements QueryPlanner {
  readonly id = "deterministic-v1";
  readonly waitsOnModel = false;

  async plan(input: PlannerInput) {
    return { plan: planQuery(input), cost: NO_LLM_COST };
  }
}
