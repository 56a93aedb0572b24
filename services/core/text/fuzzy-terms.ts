/**
 * Misspelling tolerance for rare terms (issue 15): a question term that the scope's lexical index
 * does not hold at all is matched to the closest terms that it does hold, within a small edit
 * distance. It only acts where the exact match finds nothing (document frequency 0), so a question
 * whose terms are all known is searched exactly as before.
 *
 * Terms are the shared lexical terms (core/lexical.ts: lower case, Porter stems), so the distance
 * is taken between stems ("carolyn" and "carolin", the stem of "Caroline": 1 edit). Only Latin
 * words are fuzzed: a digit changes a number or a date, and one changed ideograph is another word.
 * Pure: no I/O; the stores read the candidates (LexicalVocabulary in core/ports.ts).
 */
import { distance } from "fastest-levenshtein";
import { isStopWord, lexicalTerms, wordTokens } from "../lexical.ts";
import { countTokens } from "../tokens.ts";

/** Shortest term fuzzed: shorter words are one edit away from too many others. */
export const FUZZY_MIN_LENGTH = 5;
/** Longest term fuzzed: nothing real is this long, and the cost of a distance grows with the length. */
export const FUZZY_MAX_LENGTH = 24;
/** Question terms whose presence in the scope is checked (each check is one index lookup). */
export const MAX_CHECKED_TERMS = 12;
/** Absent question terms that get candidates read and compared, per question. */
export const MAX_FUZZED_TERMS = 4;
/** Corrections kept for one term: the closest ones present in the scope. */
export const MAX_CORRECTIONS_PER_TERM = 3;
/** Candidates within the distance whose presence in the scope is checked, per term. */
export const MAX_NEIGHBOUR_CHECKS = 24;
/** Index terms a store reads per prefix bucket: the bound on one vocabulary read. */
export const VOCABULARY_SCAN_LIMIT = 5_000;

const LATIN_WORD = /^\p{Script=Latin}+$/u;

/** Edits allowed for a term: none below 5 letters or above the cap, 1 for 5–7 letters, 2 for 8 and more. */
export const editBudget = (term: string): number => {
  const n = [...term].length;
  if (n < FUZZY_MIN_LENGTH || n > FUZZY_MAX_LENGTH) return 0;
  return n < 8 ? 1 : 2;
};

/**
 * Whether a word is one the o200k tokenizer (core/tokens.ts) holds whole, lower-case after a space:
 * a word common enough in its training text to be one token is spelled right ("considered",
 * "political", "regarding"), so a question word like that is a real word the scope does not use,
 * not a misspelling to correct ("consid" is one edit from "confid"). Misspellings and rarer names
 * take two tokens or more ("seatle", "counselling" is one, "volunterring" three).
 */
export const isFamiliarWord = (word: string): boolean => countTokens(` ${word.toLowerCase()}`) === 1;

/**
 * The terms of a text that may be misspellings: the stems of its words that are fuzzable and not
 * familiar (isFamiliarWord), distinct, in order, at most `max`. Words longer than the cap are
 * never tokenized or stemmed for this.
 */
export const misspellingCandidates = (text: string, max = MAX_CHECKED_TERMS): string[] => {
  const out = new Set<string>();
  for (const word of wordTokens(text)) {
    if (out.size >= max) break;
    if (word.length > FUZZY_MAX_LENGTH * 2) continue;
    const [term] = lexicalTerms(word);
    if (term !== undefined && !out.has(term) && isFuzzable(term) && !isFamiliarWord(word)) out.add(term);
  }
  return [...out];
};

/** Whether a lexical term may be corrected: Latin letters only, not a stop word, of a fuzzable length. */
export const isFuzzable = (term: string): boolean => editBudget(term) > 0 && LATIN_WORD.test(term) && !isStopWord(term);

/**
 * Whether an index term can stand in a query text: the lexical search stems its text again, and a
 * Porter stem is not always its own stem, so a candidate that would change is left out.
 */
export const isStableTerm = (term: string): boolean => {
  const again = lexicalTerms(term);
  return again.length === 1 && again[0] === term;
};

/** How much a correction's BM25 counts beside an exact term's: 1 / (1 + edits). */
export const correctionWeight = (edits: number): number => 1 / (1 + edits);

/**
 * The prefix buckets a store reads candidates from: the term's first letter (a misspelling past
 * the first letter) and its second (an extra letter or two letters swapped at the start). A
 * changed or missing first letter is not found: reading every bucket would make the read unbounded.
 */
export const candidatePrefixes = (term: string): string[] => {
  const [first, second] = [...term];
  return [...new Set([first, second].filter((c): c is string => c !== undefined))];
};

/** The exclusive upper bound of the terms starting with `prefix` (the next code point). */
export const prefixEnd = (prefix: string): string => {
  const chars = [...prefix];
  const last = chars.pop() as string;
  return chars.join("") + String.fromCodePoint((last.codePointAt(0) as number) + 1);
};

/** Whether b is a with two adjacent letters swapped ("caorlin" / "carolin"), the commonest typing slip. */
const isTransposition = (a: string, b: string): boolean => {
  if (a.length !== b.length) return false;
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  return i + 1 < a.length && a[i] === b[i + 1] && a[i + 1] === b[i] && a.slice(i + 2) === b.slice(i + 2);
};

/**
 * Edits between two terms: Levenshtein (fastest-levenshtein), except that a swap of two adjacent
 * letters counts as one edit, not two (the restricted Damerau-Levenshtein distance of that case).
 */
export const editDistance = (a: string, b: string): number => (isTransposition(a, b) ? 1 : distance(a, b));

export interface Neighbour {
  term: string;
  /** Edits from the question's term (an ending match counts one more: see neighboursWithin). */
  distance: number;
  /** Matched as the stem of the word's start, the rest taken for a misspelt ending. */
  ending?: true;
}

/** Longest rest of a word taken for its (misspelt) ending when a stem matches its start. */
export const MAX_ENDING = 4;

/**
 * Edits between a stem and the start of a word whose rest (1 to MAX_ENDING letters) is taken for
 * an ending, or undefined when the word is not that much longer. A misspelt word does not stem
 * like its right spelling: "paintng" keeps its ending where "painting" stems to "paint", so the
 * whole words are 2 edits apart but "paint" matches the start of "paintng" exactly.
 */
const endingDistance = (word: string, stem: string): number | undefined => {
  if (stem.length < FUZZY_MIN_LENGTH || word.length - stem.length < 1) return undefined;
  let best: number | undefined;
  for (let j = stem.length - 1; j <= stem.length + 1; j++) {
    const rest = word.length - j;
    if (rest < 1 || rest > MAX_ENDING) continue;
    const d = editDistance(word.slice(0, j), stem);
    if (best === undefined || d < best) best = d;
  }
  return best;
};

/**
 * The candidates within `maxDistance` edits of the term (not the term itself, stable terms only),
 * closest first, then by term, at most `limit`; and the stems that match the term's start, the
 * rest being an ending (endingDistance), at that distance plus one (within `maxDistance` too) and
 * after whole matches of the same distance. Lengths are compared first: a candidate more than `maxDistance`
 * letters longer, or shorter by more than that and MAX_ENDING, cannot be that close.
 */
export const neighboursWithin = (
  term: string,
  candidates: Iterable<string>,
  maxDistance: number,
  limit = MAX_NEIGHBOUR_CHECKS,
): Neighbour[] => {
  if (maxDistance < 1) return [];
  const length = [...term].length;
  const found = new Map<string, Neighbour>();
  for (const c of candidates) {
    const cLength = [...c].length;
    if (c === term || found.has(c) || cLength - length > maxDistance || length - cLength > maxDistance + MAX_ENDING)
      continue;
    if (!LATIN_WORD.test(c)) continue;
    const d = Math.abs(cLength - length) <= maxDistance ? editDistance(term, c) : Number.POSITIVE_INFINITY;
    if (d <= maxDistance) {
      if (isStableTerm(c)) found.set(c, { term: c, distance: d });
      continue;
    }
    const e = endingDistance(term, c);
    if (e !== undefined && e + 1 <= maxDistance && isStableTerm(c))
      found.set(c, { term: c, distance: e + 1, ending: true });
  }
  return [...found.values()]
    .sort(
      (a, b) =>
        a.distance - b.distance ||
        Number(a.ending ?? false) - Number(b.ending ?? false) ||
        (a.term < b.term ? -1 : a.term > b.term ? 1 : 0),
    )
    .slice(0, limit);
};

/**
 * The corrections of a term: of its neighbours (closest first), those present in the scope at the
 * smallest distance any of them is present at (whole matches only, when one is), at most
 * MAX_CORRECTIONS_PER_TERM. `present` answers which of the terms it is given occur in the scope.
 */
export const nearestPresent = async (
  neighbours: readonly Neighbour[],
  present: (terms: readonly string[]) => Promise<readonly string[]>,
): Promise<Neighbour[]> => {
  if (neighbours.length === 0) return [];
  const there = new Set(await present(neighbours.map((n) => n.term)));
  const kept = neighbours.filter((n) => there.has(n.term));
  const best = kept[0];
  if (!best) return [];
  return kept
    .filter((n) => n.distance === best.distance && (n.ending ?? false) === (best.ending ?? false))
    .slice(0, MAX_CORRECTIONS_PER_TERM);
};
