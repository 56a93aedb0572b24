/**
 * The plainer words a derived word is made from: "mentorship" from "mentor", "musician" from
 * "music", "entrepreneurial" from "entrepreneur". A question often names a thing by a derived noun
 * or adjective ("When did Jon receive mentorship?") where the turn said the plain word ("I got
 * mentored"), and the Porter stems (core/lexical.ts) keep them apart: Porter strips inflections and
 * the commonest derivations ("adoption" and "adopt" are one stem) but not "-ship", "-hood", "-ian"
 * or "-ist". Only those endings are undone here, each to the forms its base usually takes.
 * Pure; the lexical route asks the store which of these terms the scope holds (near-matches.ts).
 */
import { lexicalTerms } from "../lexical.ts";
import { isStableTerm } from "./fuzzy-terms.ts";

/**
 * An ending, what its base may end in instead (most often nothing), and the shortest base kept: a
 * shorter one is part of too many unrelated words ("assist" is no "ass" + "-ist", "social" no
 * "soc" + "-ial").
 */
const ENDINGS: readonly (readonly [ending: string, bases: readonly string[], minBase: number])[] = [
  ["ship", [""], 4], // mentorship, friendship, internship, ownership
  ["hood", [""], 4], // childhood, parenthood, neighborhood
  ["ician", ["ic"], 3], // musician, politician
  ["ian", ["", "y"], 5], // librarian, comedian, historian
  ["ial", [""], 6], // entrepreneurial, managerial
  ["ist", ["", "y", "o"], 4], // guitarist, therapist, pianist
];

/**
 * The lexical terms of the plainer words `word` may be made from, its own term left out: none
 * for a word without one of the endings above. Candidates only: most are no word ("guitari"), and
 * the caller keeps those the scope holds.
 */
export const plainerTerms = (word: string): string[] => {
  const lower = word.toLowerCase();
  if (!/^[a-z]+$/.test(lower)) return [];
  const own = lexicalTerms(lower)[0];
  // A plural's singular ("musicians"): the endings are those of the singular.
  const w = /[^su]s$/.test(lower) ? lower.slice(0, -1) : lower;
  const out = new Set<string>();
  for (const [ending, bases, minBase] of ENDINGS) {
    if (!w.endsWith(ending)) continue;
    const stem = w.slice(0, -ending.length);
    if (stem.length < minBase) continue;
    for (const b of bases) {
      const term = lexicalTerms(stem + b)[0];
      // A term searched as text is stemmed again: one that would change is left out.
      if (term !== undefined && term !== own && isStableTerm(term)) out.add(term);
    }
    break;
  }
  return [...out];
};
