/**
 * What a question may mean where its words match nothing exactly (issue 15): a misspelled rare
 * term, a misspelled name, a region whose places the tenant named instead. Every part acts only
 * where the exact match finds nothing, so a question whose terms and names are all known gets no
 * near matches, and its plan and routes are exactly those of the exact search.
 *
 * - Terms: a question word of 5–24 Latin letters that is no whole o200k token (a real word is) and
 *   whose term (core/lexical.ts) no record or raw turn of the scope holds is replaced by the
 *   closest terms the scope holds (core/text/fuzzy-terms.ts), searched as an extra lexical text
 *   whose BM25 is weighted down by the edits.
 * - Names: a capitalised question word that is in no known entity and that the scope never uses is
 *   matched to the closest single-word entity key within the same edit budget; the question is
 *   embedded with the name corrected.
 * - Places: a region the question names (core/text/places.ts) that is no entity key of the scope
 *   brings in the entity keys of places inside it (not of persons), for the entity route and as
 *   lexical text.
 * - Word families: a lower-case question word the scope never uses, made from a plainer word by an
 *   ending the stems keep ("mentorship", "musicians": core/text/word-family.ts), brings in the
 *   plainer word's term where the scope holds it ("mentor", "music"), weighted as a place is.
 */

import { lexicalTerms } from "../core/lexical.ts";
import type { GraphStore, LexicalVocabulary, ScoredId } from "../core/ports.ts";
import type { QueryPlan } from "../core/query-types.ts";
import {
  correctionWeight,
  editBudget,
  editDistance,
  isFuzzable,
  MAX_FUZZED_TERMS,
  misspellingCandidates,
} from "../core/text/fuzzy-terms.ts";
import { nameKey, namePattern } from "../core/text/names.ts";
import { placesWithin, regionsNamed } from "../core/text/places.ts";
import { plainerTerms } from "../core/text/word-family.ts";

/** How much a place inside a named region counts in the lexical route beside an exact term. */
export const PLACE_WEIGHT = 0.5;
/** How much a plainer word of a derived one ("mentor" for "mentorship") counts beside an exact term. */
export const FAMILY_WEIGHT = 0.5;

/**
 * The lower-case words of a question (names are capitalised) that may be derived from plainer
 * ones: each with its own term and the plainer words' terms, at most MAX_FUZZED_TERMS.
 */
const derivedWords = (question: string): { own: string; plainer: string[] }[] => {
  const out: { own: string; plainer: string[] }[] = [];
  for (const word of new Set(question.match(/(?<![\p{L}'’-])\p{Ll}+(?![\p{L}'’-])/gu) ?? [])) {
    if (out.length >= MAX_FUZZED_TERMS) break;
    const plainer = plainerTerms(word);
    const own = lexicalTerms(word)[0];
    if (plainer.length > 0 && own !== undefined) out.push({ own, plainer });
  }
  return out;
};

export interface WeightedText {
  text: string;
  /** Factor on the BM25 scores this text's search gives. */
  weight: number;
}

export interface NearMatches {
  /** Misspelled names: as the question writes them, and the known entity key each stands for. */
  readonly names: readonly { asked: string; known: string }[];
  /** Known entity keys of places inside regions the question names. */
  readonly places: readonly string[];
  /** Extra lexical texts, each searched on its own and merged into the lexical routes (mergeWeighted). */
  readonly lexical: readonly WeightedText[];
}

export const NO_NEAR_MATCHES: NearMatches = Object.freeze({
  names: Object.freeze([]),
  places: Object.freeze([]),
  lexical: Object.freeze([]),
});

/** The entity keys the near matches add to the entity route: corrected names, then places. */
export const nearEntities = (near: NearMatches): string[] => [...near.names.map((n) => n.known), ...near.places];

/** The plan with the near matches' entity keys (and the entity route when they bring the first). */
export const withNearMatches = (plan: QueryPlan, near: NearMatches): QueryPlan => {
  const added = nearEntities(near).filter((e) => !plan.entities.includes(e));
  if (added.length === 0) return plan;
  return {
    ...plan,
    entities: [...plan.entities, ...added],
    routes: plan.routes.includes("entity") ? plan.routes : [...plan.routes, "entity"],
  };
};

export interface NearMatchInput {
  tenant: string;
  conversation?: string;
  question: string;
  /** The text the lexical routes search (question and rewrites). */
  lexicalText: string;
  /** Entities the planner matched exactly. */
  planned: readonly string[];
  knownEntities: readonly string[];
}

/** Capitalised words of the question, as written, without a possessive. */
const capitalisedWords = (question: string): string[] =>
  (question.match(/[\p{L}][\p{L}'’-]*/gu) ?? []).map((w) => w.replace(/['’]s$/u, "")).filter((w) => /^\p{Lu}/u.test(w));

/** A one-word name as the lexical terms have it (its Porter stem: "Caroline" → "carolin"), else undefined. */
const nameStem = (name: string): string | undefined => {
  const key = nameKey(name);
  if (key.includes(" ")) return undefined;
  const terms = lexicalTerms(key);
  return terms.length === 1 ? terms[0] : undefined;
};

/**
 * The closest single-word entity key to a word within its edit budget, compared as stems as the
 * lexical terms are ("Carolyn" and "Caroline": "carolyn" and "carolin", 1 edit), when exactly one
 * key is that close (a tie is no evidence for either).
 */
export const closestName = (word: string, names: readonly string[]): string | undefined => {
  const stem = nameStem(word);
  const budget = stem === undefined || !isFuzzable(stem) ? 0 : editBudget(stem);
  if (stem === undefined || budget < 1) return undefined;
  let best: { name: string; stem: string; d: number } | undefined;
  let tied = false;
  for (const name of names) {
    const candidate = nameStem(name);
    if (candidate === undefined || Math.abs(candidate.length - stem.length) > budget) continue;
    const d = editDistance(stem, candidate);
    if (d > budget) continue;
    if (!best || d < best.d) {
      best = { name, stem: candidate, d };
      tied = false;
    } else if (d === best.d && best.stem !== candidate) tied = true;
  }
  return best && !tied ? best.name : undefined;
};

/** What the near matches read: the vocabulary where the store has it, and the records naming a place. */
export type NearMatchStore = Partial<LexicalVocabulary> & Pick<GraphStore, "recordsByEntities" | "getRecords">;

/** Records read per place name to tell a place from a person of the same name (Charlotte, Oliver). */
const MENTIONS_PER_PLACE = 5;

/**
 * The names no record of the scope types as a person: a city's name is often a person's too, and
 * the gazetteer knows places only. One read of a few records naming any of them.
 */
const withoutPersons = async (
  store: NearMatchStore,
  tenant: string,
  names: readonly string[],
  conversation?: string,
): Promise<string[]> => {
  const hits = await store.recordsByEntities(tenant, names, MENTIONS_PER_PLACE * names.length, conversation);
  const records = await store.getRecords(
    tenant,
    hits.map((h) => h.id),
  );
  const persons = new Set(
    records.flatMap((r) => r.entities.filter((e) => e.kind === "person").map((e) => nameKey(e.name))),
  );
  return names.filter((n) => !persons.has(nameKey(n)));
};

/**
 * The near matches of a question. `store` is the graph store; without its lexical vocabulary there
 * are no term corrections, and names are corrected when they are no word of any known entity.
 */
export const findNearMatches = async (store: NearMatchStore, input: NearMatchInput): Promise<NearMatches> => {
  const vocabulary: Partial<LexicalVocabulary> = store;
  const { tenant, conversation } = input;
  const canRead = vocabulary.lexicalTermsPresent !== undefined && vocabulary.lexicalNeighbours !== undefined;
  // Terms: words that may be misspelt; names: capitalised words in no known entity.
  const knownWords = new Set(input.knownEntities.flatMap((e) => nameKey(e).split(" ")));
  const askedNames = [...new Set(capitalisedWords(input.question))]
    .filter((w) => !knownWords.has(nameKey(w)) && isFuzzable(nameKey(w)))
    .slice(0, MAX_FUZZED_TERMS);
  const misspelt = misspellingCandidates(input.lexicalText);
  const nameTerms = askedNames.flatMap((w) => lexicalTerms(w));
  const derived = canRead ? derivedWords(input.question) : [];
  const checked = [...new Set([...misspelt, ...nameTerms, ...derived.flatMap((d) => [d.own, ...d.plainer])])];
  const present = new Set(
    canRead && checked.length > 0
      ? await (vocabulary as LexicalVocabulary).lexicalTermsPresent(tenant, checked, conversation)
      : [],
  );
  const absent = misspelt.filter((t) => !present.has(t)).slice(0, MAX_FUZZED_TERMS);

  const lexical: WeightedText[] = [];
  if (canRead && absent.length > 0) {
    const byWeight = new Map<number, string[]>();
    const corrections = await Promise.all(
      absent.map((t) => (vocabulary as LexicalVocabulary).lexicalNeighbours(tenant, t, editBudget(t), conversation)),
    );
    for (const list of corrections)
      for (const n of list) {
        const w = correctionWeight(n.distance);
        byWeight.set(w, [...(byWeight.get(w) ?? []), n.term]);
      }
    for (const [weight, terms] of [...byWeight].sort((a, b) => b[0] - a[0]))
      lexical.push({ text: [...new Set(terms)].join(" "), weight });
  }

  // Word families: the plainer words the scope holds, of derived words it does not.
  const family = [
    ...new Set(derived.filter((d) => !present.has(d.own)).flatMap((d) => d.plainer.filter((t) => present.has(t)))),
  ];
  if (family.length > 0) lexical.push({ text: family.join(" "), weight: FAMILY_WEIGHT });

  // Names: no term of the name in the scope (where the store can tell), one closest entity key.
  const plannedKeys = new Set(input.planned.map(nameKey));
  const names: { asked: string; known: string }[] = [];
  for (const word of askedNames) {
    if (lexicalTerms(word).some((t) => present.has(t))) continue;
    const name = closestName(word, input.knownEntities);
    if (name && !plannedKeys.has(nameKey(name)) && !names.some((n) => n.known === name))
      names.push({ asked: word, known: name });
  }

  // Places: regions named in the question that match no entity key exactly.
  const knownKeys = new Set(input.knownEntities.map(nameKey));
  const regions = regionsNamed(input.question).filter((r) => !knownKeys.has(nameKey(r.name)));
  const inside = placesWithin(
    regions,
    input.knownEntities.filter((e) => !plannedKeys.has(nameKey(e)) && !names.some((n) => n.known === e)),
  );
  const places = inside.length === 0 ? [] : await withoutPersons(store, tenant, inside, conversation);
  if (places.length > 0) lexical.push({ text: places.join(" "), weight: PLACE_WEIGHT });

  return names.length === 0 && places.length === 0 && lexical.length === 0
    ? NO_NEAR_MATCHES
    : { names, places, lexical };
};

/**
 * The question with each corrected name as the entity key spells it (where the misspelling stands
 * as a whole word): what the dense routes embed when a name was corrected; the question itself
 * otherwise. Terms are not re-spelt: a correction is a stem ("creat"), not a word to embed.
 */
export const correctedQuestion = (question: string, near: NearMatches): string => {
  let out = question;
  for (const { asked, known } of near.names) out = out.replace(namePattern(asked, "giu"), known);
  return out;
};

/**
 * The lexical route's hits with the near-match searches merged in: each hit's score is its exact
 * BM25 plus, per extra text, the weight times that text's BM25 (BM25 sums over terms, so this is
 * BM25 with the corrected terms weighted down), best `k`, ties in the exact list's order, then the
 * extra lists'. With no extra texts the exact hits are returned as they are.
 */
export const mergeWeighted = (
  exact: readonly ScoredId[],
  extra: readonly { hits: readonly ScoredId[]; weight: number }[],
  k: number,
): ScoredId[] => {
  if (extra.length === 0) return [...exact];
  const scores = new Map<string, { score: number; order: number }>();
  let order = 0;
  for (const h of exact) if (!scores.has(h.id)) scores.set(h.id, { score: h.score, order: order++ });
  for (const { hits, weight } of extra)
    for (const h of hits) {
      const entry = scores.get(h.id);
      if (entry) entry.score += weight * h.score;
      else scores.set(h.id, { score: weight * h.score, order: order++ });
    }
  return [...scores]
    .sort((a, b) => b[1].score - a[1].score || a[1].order - b[1].order)
    .slice(0, Math.max(0, Math.floor(k)))
    .map(([id, s]) => ({ id, score: s.score }));
};

/**
 * A lexical search with the near matches: the exact search, and when there are extra texts, one
 * search each (in parallel), merged by mergeWeighted.
 */
export const searchWithNearMatches = async (
  search: (text: string, k: number) => Promise<ScoredId[]>,
  text: string,
  extra: readonly WeightedText[],
  k: number,
): Promise<ScoredId[]> => {
  if (extra.length === 0) return search(text, k);
  const [exact, ...more] = await Promise.all([search(text, k), ...extra.map((e) => search(e.text, k))]);
  return mergeWeighted(
    exact as ScoredId[],
    more.map((hits, i) => ({ hits, weight: (extra[i] as WeightedText).weight })),
    k,
  );
};
