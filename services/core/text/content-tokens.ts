/**
 * What a normalised statement says apart from its wording: its content tokens (stemmed, without
 * stop words), whether it is negated, and the numbers it names. Negation and numbers are compared
 * apart from the content, so they are not content tokens.
 */
import { STOP_WORDS } from "./lexicon.ts";
import { stem } from "./normalise.ts";

const NUMBER_WORDS: Record<string, string> = {
  zero: "0",
  one: "1",
  two: "2",
  three: "3",
  four: "4",
  five: "5",
  six: "6",
  seven: "7",
  eight: "8",
  nine: "9",
  ten: "10",
  eleven: "11",
  twelve: "12",
  twenty: "20",
  thirty: "30",
  forty: "40",
  fifty: "50",
  hundred: "100",
};

const NEGATION_WORDS = new Set([
  "not",
  "no",
  "never",
  "nobody",
  "nothing",
  "none",
  "neither",
  "nor",
  "anymore",
  "cannot",
]);

const isNegationToken = (w: string): boolean => NEGATION_WORDS.has(w) || w.endsWith("n't");

/** Does the normalised statement deny or end something ("not", "n't", "no longer", "used to", "stopped")? */
export const negatedText = (norm: string): boolean =>
  norm.split(" ").some(isNegationToken) || /\bno longer\b|\bany more\b|\bused to\b|\bstopped\b/.test(norm);

/** The numbers of a normalised statement, digits or number words, as canonical digit strings, sorted. */
export const numbersOf = (norm: string): string[] => {
  const out = new Set<string>();
  for (const w of norm.split(" ")) {
    if (/^\d+(?:\.\d+)?$/.test(w)) out.add(String(Number(w)));
    else if (NUMBER_WORDS[w]) out.add(NUMBER_WORDS[w] as string);
  }
  return [...out].sort();
};

/** Stop words, negations and number words do not count as content (negation and numbers are compared apart). */
export const contentTokens = (norm: string, exclude: ReadonlySet<string> = new Set()): string[] => {
  const out = new Set<string>();
  for (const raw of norm.split(" ")) {
    const w = raw.replace(/'s$/, "").replace(/'$/, "");
    if (w.length < 2 || STOP_WORDS.has(raw) || STOP_WORDS.has(w) || isNegationToken(w) || NUMBER_WORDS[w]) continue;
    if (/^\d+(?:\.\d+)?$/.test(w) || exclude.has(w)) continue;
    out.add(stem(w));
  }
  return [...out];
};
