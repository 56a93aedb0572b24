/**
 * Pure retrieval scoring for the benchmark: recall of target ids in a retrieved context, answer
 * coverage of the context's text (its sources stripped), aggregation per category, percentiles. No I/O.
 */
import { stemmer } from "stemmer";
import { STOP_WORDS } from "../core/text/lexicon.ts";
import { withoutCitations } from "../query/cite.ts";

/**
 * Share of `targets` found in `retrieved`; undefined when there is nothing to find (empty targets),
 * so such a question is left out of the means instead of counting as 0 or 1.
 */
export const recall = (targets: readonly string[], retrieved: ReadonlySet<string>): number | undefined => {
  const unique = [...new Set(targets)];
  if (unique.length === 0) return undefined;
  return unique.filter((t) => retrieved.has(t)).length / unique.length;
};

/** Evidence recall of one context: the evidence turn ids covered by the turn ids of its items. */
export const evidenceRecall = (
  evidence: readonly string[],
  items: readonly { turnIds: readonly string[] }[],
): number | undefined => recall(evidence, new Set(items.flatMap((i) => i.turnIds)));

/** Session recall: the sessions the context's turns belong to, against the target sessions. */
export const sessionRecall = (
  targetSessions: readonly string[],
  turnIds: readonly string[],
  sessionOf: ReadonlyMap<string, string>,
): number | undefined =>
  recall(targetSessions, new Set(turnIds.map((t) => sessionOf.get(t)).filter((s): s is string => s !== undefined)));

/**
 * The content terms of a text: NFKC, lower case, words of letters and digits (an apostrophe inside
 * a word kept, so "don't" meets the stop-word list), the project's stop words dropped, a final "'s"
 * dropped, numbers without leading zeros ("07" is "7", as in an ISO date), other words Porter-stemmed
 * (`stemmer`).
 */
export const contentTerms = (text: string): Set<string> => {
  const out = new Set<string>();
  for (const raw of text
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[’`]/g, "'")
    .match(/[\p{L}\p{N}]+(?:'[\p{L}]+)*/gu) ?? []) {
    if (STOP_WORDS.has(raw)) continue;
    const w = raw.replace(/'s$/, "");
    if (w.length === 0 || STOP_WORDS.has(w)) continue;
    if (/^\d+$/.test(w)) out.add(w.replace(/^0+(?=\d)/, ""));
    else out.add(/^[a-z]+$/.test(w) ? stemmer(w) : w);
  }
  return out;
};

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * A context without its sources, for answer coverage: "[D1:3]" or "conv-26" would otherwise lend an
 * answer like "3" or "26" a match it did not earn. The citations at line ends and the prefix notes
 * of group headers go whatever their form ("[D3:5-6]", "[…5]", " (D3:…)": `withoutCitations`),
 * then any of the case's ids left elsewhere (a conversation id in a header) as whole words.
 */
export const sourceStripper = (
  ids: readonly string[],
  options: { lineCitations?: boolean } = {},
): ((context: string) => string) => {
  // Only our contexts end their lines with citations; a baseline's turn line can end with the turn's
  // own bracketed text ("[shared a photo: …]"), which is content, so there only the ids go.
  const citations = (options.lineCitations ?? true) ? withoutCitations : (context: string) => context;
  const sorted = [...new Set(ids)].filter(Boolean).sort((a, b) => b.length - a.length);
  if (sorted.length === 0) return citations;
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}])(?:${sorted.map(escapeRegExp).join("|")})(?![\\p{L}\\p{N}])`, "gu");
  return (context) => citations(context).replace(pattern, " ");
};

/**
 * Answer coverage: the share of the gold answer's content terms (contentTerms) that occur in the
 * context. It credits a context that carries the answer in a record's words even when the record's
 * source turns are not the evidence turns; undefined when the answer has no content term.
 */
export const answerCoverage = (answer: string, context: string | ReadonlySet<string>): number | undefined => {
  const wanted = contentTerms(answer);
  if (wanted.size === 0) return undefined;
  const have = typeof context === "string" ? contentTerms(context) : context;
  let found = 0;
  for (const t of wanted) if (have.has(t)) found++;
  return found / wanted.size;
};

/** Distinct target ids present among the retrieved ids (the numerator of recall). */
export const targetsFound = (targets: readonly string[], retrieved: ReadonlySet<string>): number =>
  [...new Set(targets)].filter((t) => retrieved.has(t)).length;

/** Evidence turns per 1,000 context tokens, over a set of contexts (sums, not a mean of ratios). */
export const perThousandTokens = (found: number, tokens: number): number | undefined =>
  tokens > 0 ? (1000 * found) / tokens : undefined;

export const mean = (values: readonly number[]): number | undefined =>
  values.length === 0 ? undefined : values.reduce((a, b) => a + b, 0) / values.length;

/** Percentile by linear interpolation between closest ranks (p in [0, 100]); undefined for no values. */
export const percentile = (values: readonly number[], p: number): number | undefined => {
  if (values.length === 0) return undefined;
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be in [0, 100], got ${p}`);
  const sorted = [...values].sort((a, b) => a - b);
  const pos = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (pos - lo);
};

export interface Aggregate {
  /** Mean over scored questions (macro over questions); undefined when none was scorable. */
  mean: number | undefined;
  /** Questions that had a value. */
  n: number;
  /** Questions left out because they had nothing to find. */
  skipped: number;
}

export interface CategoryAggregate {
  overall: Aggregate;
  byCategory: Record<string, Aggregate>;
}

const aggregate = (values: readonly (number | undefined)[]): Aggregate => {
  const scored = values.filter((v): v is number => v !== undefined);
  return { mean: mean(scored), n: scored.length, skipped: values.length - scored.length };
};

/** Per-category and overall means of a per-question value (undefined values are skipped, and counted). */
export const aggregateByCategory = (
  rows: readonly { category: string; value: number | undefined }[],
  categories: readonly string[] = [],
): CategoryAggregate => {
  const byCategory: Record<string, Aggregate> = {};
  const names = [...new Set([...categories, ...rows.map((r) => r.category)])];
  for (const c of names) byCategory[c] = aggregate(rows.filter((r) => r.category === c).map((r) => r.value));
  return { overall: aggregate(rows.map((r) => r.value)), byCategory };
};
