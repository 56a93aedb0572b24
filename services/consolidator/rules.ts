/**
 * Deterministic consolidation rules (pure): for a pair of records of the same tenant, decide
 * duplicate, refinement, contradiction or unrelated from the statements (normalised-text
 * similarity, content-token coverage), the entities, the record types, attribute slots (location,
 * job, preference with negation, favourites) and time order. No I/O, no clock.
 */
import { NO_LLM_COST } from "../core/ports.ts";
import type { Slot } from "../core/text/slots.ts";
import { analyse, type Statement } from "../core/text/statement.ts";
import type { MemoryRecord, RecordType } from "../core/types.ts";
import { coverage, isSubset, jaccard, sameValue, trigramDice } from "./similarity.ts";
import type { CandidateView, ConsolidationDecider, DecisionBatch, PairDecision } from "./types.ts";

export interface RuleSettings {
  /** Character-trigram Dice of the normalised statements at or above which two statements are duplicates. */
  duplicateDice: number;
  /** Content-token Jaccard at or above which two statements (2+ tokens) are duplicates. */
  duplicateJaccard: number;
  /** Embedding cosine at or above which two statements are duplicates (guards still apply). */
  duplicateSimilarity: number;
  /** Share of the older statement's content tokens the newer must repeat to refine it. */
  refinementCoverage: number;
  /** Content-token Jaccard a refinement needs at least (the newer is about the same thing, not much more). */
  refinementJaccard: number;
}

export const DEFAULT_RULE_SETTINGS: RuleSettings = {
  duplicateDice: 0.9,
  duplicateJaccard: 0.8,
  duplicateSimilarity: 0.97,
  refinementCoverage: 0.75,
  refinementJaccard: 0.35,
};

const DAY_MS = 86_400_000;

interface Span {
  from: number;
  to: number;
}

/** The span an ISO value denotes by its precision (year, month, day, instant). */
const isoSpan = (iso: string): Span => {
  const s = iso.trim();
  const start = Date.parse(s);
  let m = /^(\d{4})$/.exec(s);
  if (m) return { from: start, to: Date.UTC(Number(m[1]) + 1, 0, 1) - 1 };
  m = /^(\d{4})-(\d{2})$/.exec(s);
  if (m) return { from: start, to: Date.UTC(Number(m[1]), Number(m[2]), 1) - 1 };
  if (/^\d{4}-\d{2}-\d{2}$/.test(s)) return { from: start, to: start + DAY_MS - 1 };
  return { from: start, to: start };
};

/** The record's own (explicit) event time, when it has one. */
export const explicitSpan = (r: MemoryRecord): Span | undefined => {
  const t = r.time;
  if (t.at) return isoSpan(t.at);
  if (!t.from && !t.to) return undefined;
  const a = isoSpan((t.from ?? t.to) as string);
  const b = isoSpan((t.to ?? t.from) as string);
  return { from: Math.min(a.from, b.from), to: Math.max(a.to, b.to) };
};

const saidDay = (r: MemoryRecord): Span => {
  const d = Math.floor(Date.parse(r.source.saidAt) / DAY_MS) * DAY_MS;
  return { from: d, to: d + DAY_MS - 1 };
};

const overlaps = (a: Span, b: Span): boolean => a.from <= b.to && b.from <= a.to;

/**
 * Could the two types describe the same thing? A plan (an intention) only matches a plan; the
 * others (fact, event, preference, relation, other) may: an extractor can type the same statement
 * "fact" once and "event" another time ("has two cats named ..."); time keeps events apart.
 */
export const typesCompatible = (a: RecordType, b: RecordType): boolean => a === b || (a !== "plan" && b !== "plan");

/**
 * Could the two records be about the same occurrence? Events happen at one time: their explicit
 * time, else the day they were told. Plans without a date could be any time; states hold over time,
 * so only two explicit times can keep them apart.
 */
export const timesCompatible = (a: MemoryRecord, b: MemoryRecord): boolean => {
  const sa = explicitSpan(a);
  const sb = explicitSpan(b);
  if (sa && sb) return overlaps(sa, sb);
  if (a.type === "event" && b.type === "event") return overlaps(sa ?? saidDay(a), sb ?? saidDay(b));
  return true;
};

const sameList = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((x, i) => x === b[i]);

/** Time order of a pair: by when each was said, then valid.from; a tie goes to `record` as the newer. */
export const orderPair = (
  record: MemoryRecord,
  candidate: MemoryRecord,
): { newer: MemoryRecord; older: MemoryRecord } => {
  const said = Date.parse(candidate.source.saidAt) - Date.parse(record.source.saidAt);
  const valid = Date.parse(candidate.valid.from) - Date.parse(record.valid.from);
  const candidateNewer = said > 0 || (said === 0 && valid > 0);
  return candidateNewer ? { newer: candidate, older: record } : { newer: record, older: candidate };
};

const describe = (slot: Slot): string => `${slot.key}${slot.value.length > 0 ? ` "${slot.value.join(" ")}"` : ""}`;

/**
 * A contradiction: both say something current about the same subject and attribute, with a
 * different value (lives in / moved to another place, works at another employer or left it, a
 * favourite changed) or the opposite polarity (loves X / doesn't like X anymore). Returns the
 * reason, or undefined. The later statement wins: it is the latest news about the attribute.
 */
export const contradictionReason = (n: Statement, o: Statement): string | undefined => {
  if (n.subject !== o.subject || n.subject === "") return undefined;
  for (const sn of n.slots) {
    if (!sn.current) continue;
    for (const so of o.slots) {
      if (!so.current || so.key !== sn.key) continue;
      switch (sn.kind) {
        case "location":
        case "favorite":
          if (sn.polarity === 1 && so.polarity === 1 && !sameValue(sn.value, so.value))
            return `${sn.kind} changed: ${describe(so)} -> ${describe(sn)}`;
          break;
        case "employer":
        case "role":
          if (so.polarity !== 1) break;
          if (sn.polarity === 1 && sn.value.length > 0 && !sameValue(sn.value, so.value))
            return `${sn.kind} changed: ${describe(so)} -> ${describe(sn)}`;
          if (sn.polarity === -1 && (sn.value.length === 0 || sameValue(sn.value, so.value)))
            return `${sn.kind} ended: ${describe(so)}`;
          break;
        case "preference":
          if (sn.polarity !== so.polarity && sameValue(sn.value, so.value))
            return `preference reversed: ${so.polarity === 1 ? "likes" : "dislikes"} "${so.value.join(" ")}" -> ${
              sn.polarity === 1 ? "likes" : "dislikes"
            }`;
          break;
      }
    }
  }
  return undefined;
};

const withoutSubject = (s: Statement): string => {
  const words = s.subject.split(" ").filter(Boolean);
  return s.norm
    .split(" ")
    .filter((w) => !words.includes(w.replace(/'s$/, "")))
    .join(" ");
};

/**
 * Near-identical statements: same subject, polarity, numbers, entities, a compatible type and time,
 * and a near-identical text (trigram Dice, token Jaccard, or embedding cosine), or a newer statement
 * that only repeats part of the older one.
 */
export const duplicateReason = (
  newer: MemoryRecord,
  older: MemoryRecord,
  n: Statement,
  o: Statement,
  similarity: number,
  settings: RuleSettings,
): string | undefined => {
  if (n.subject !== o.subject || n.negated !== o.negated) return undefined;
  if (!typesCompatible(n.type, o.type) || !timesCompatible(newer, older)) return undefined;
  if (sameList(n.numbers, o.numbers) && sameList(n.entities, o.entities)) {
    if (n.norm === o.norm) return "same statement";
    const dice = trigramDice(withoutSubject(n), withoutSubject(o));
    if (dice >= settings.duplicateDice) return `near-identical text (dice ${dice.toFixed(2)})`;
    const jac = jaccard(n.tokens, o.tokens);
    if (jac >= settings.duplicateJaccard && Math.min(n.tokens.length, o.tokens.length) >= 2)
      return `same content words (jaccard ${jac.toFixed(2)})`;
    if (similarity >= settings.duplicateSimilarity && jac >= 0.5)
      return `near-identical meaning (cosine ${similarity.toFixed(2)})`;
  }
  // A shorter restatement by the same speaker: "Ana loves sushi" after "Ana loves sushi and ramen".
  if (
    n.tokens.length >= 2 &&
    n.tokens.length * 2 >= o.tokens.length &&
    isSubset(n.tokens, o.tokens) &&
    isSubset(n.entities, o.entities) &&
    isSubset(n.numbers, o.numbers) &&
    newer.source.speakers.some((s) => older.source.speakers.includes(s))
  )
    return "restates part of the older statement";
  return undefined;
};

/** The newer statement repeats most of the older one (and its entities and numbers) and adds detail. */
export const refinementReason = (
  newer: MemoryRecord,
  older: MemoryRecord,
  n: Statement,
  o: Statement,
  settings: RuleSettings,
): string | undefined => {
  if (n.subject !== o.subject || n.negated !== o.negated) return undefined;
  if (!typesCompatible(n.type, o.type) || !timesCompatible(newer, older)) return undefined;
  if (!isSubset(o.entities, n.entities) || !isSubset(o.numbers, n.numbers)) return undefined;
  // Content words and entities together: "works at Google as a designer" is three things.
  const ob = [...o.tokens, ...o.entities];
  const nb = [...n.tokens, ...n.entities];
  if (ob.length < 3) return undefined;
  const cover = coverage(ob, nb);
  if (cover < settings.refinementCoverage || jaccard(nb, ob) < settings.refinementJaccard) return undefined;
  const added = nb.filter((t) => !ob.includes(t));
  if (added.length === 0) return undefined;
  return `adds detail (${added.slice(0, 4).join(", ")}) to ${Math.round(cover * 100)}% of the older statement`;
};

/** Decides one pair. `similarity` is the embedding cosine of the two record texts (0 when unknown). */
export const decidePair = (
  record: MemoryRecord,
  candidate: MemoryRecord,
  similarity: number,
  settings: RuleSettings = DEFAULT_RULE_SETTINGS,
  analysed: (r: MemoryRecord) => Statement = analyse,
): PairDecision => {
  const { newer, older } = orderPair(record, candidate);
  const base = { candidateId: candidate.id, newer: newer.id, older: older.id };
  if (record.id === candidate.id || record.source.tenant !== candidate.source.tenant)
    return { ...base, kind: "unrelated", reason: "same record or another tenant" };
  const n = analysed(newer);
  const o = analysed(older);
  if (n.subject !== o.subject)
    return { ...base, kind: "unrelated", reason: `different subjects (${o.subject} / ${n.subject})` };
  const contradiction = contradictionReason(n, o);
  if (contradiction) return { ...base, kind: "contradiction", reason: contradiction };
  const duplicate = duplicateReason(newer, older, n, o, similarity, settings);
  if (duplicate) return { ...base, kind: "duplicate", reason: duplicate };
  const refinement = refinementReason(newer, older, n, o, settings);
  if (refinement) return { ...base, kind: "refinement", reason: refinement };
  return { ...base, kind: "unrelated", reason: "no rule matched" };
};

/** The default decider: the rules above, free and deterministic. */
export class RuleDecider implements ConsolidationDecider {
  readonly id = "rules";
  private readonly cache = new Map<string, Statement>();

  constructor(private readonly settings: RuleSettings = DEFAULT_RULE_SETTINGS) {}

  private analysed = (r: MemoryRecord): Statement => {
    const key = `${r.id}\u0000${r.type}`;
    let s = this.cache.get(key);
    if (!s) {
      if (this.cache.size >= 10_000) this.cache.clear();
      s = analyse(r);
      this.cache.set(key, s);
    }
    return s;
  };

  async decide(record: MemoryRecord, candidates: readonly CandidateView[]): Promise<DecisionBatch> {
    return {
      decisions: candidates.map((c) =>
        decidePair(record, c.record, c.candidate.similarity, this.settings, this.analysed),
      ),
      cost: { ...NO_LLM_COST },
    };
  }
}
