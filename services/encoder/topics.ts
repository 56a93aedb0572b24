/**
 * Topics: 1-3 lower-case labels from a record's content words. A word qualifies when it is at
 * least 4 letters, not a stop/phatic word, not a pronoun, not a name (speaker or entity), not an
 * adverb in -ly and not a verb form in -ing/-ed after a subject. Score: frequency, then length,
 * then first position. A naive singular ("dogs" -> "dog") merges plural and singular.
 */
import {
  BASE_VERBS,
  FIRST_PERSON,
  IRREGULAR_PAST,
  MONTHS,
  PHATIC_WORDS,
  PREFERENCE_WORDS,
  SECOND_PERSON,
  STOP_WORDS,
  THIRD_PERSON,
  WEEKDAYS,
} from "../core/text/lexicon.ts";
import { words } from "./tense.ts";

/** Nouns that end in -ly (everything else in -ly is taken for an adverb). */
const LY_NOUNS = new Set([
  "family",
  "rally",
  "belly",
  "jelly",
  "lily",
  "ally",
  "supply",
  "assembly",
  "butterfly",
  "holly",
  "bully",
  "reply",
  "monopoly",
  "anomaly",
  "italy",
]);

const singular = (w: string): string => {
  if (/ies$/.test(w) && w.length > 5) return `${w.slice(0, -3)}y`;
  if (/[^su]s$/.test(w) && !/(?:ss|us|is|es)$/.test(w) && w.length > 4) return w.slice(0, -1);
  return w;
};

const DETERMINERS = new Set([
  "a",
  "an",
  "the",
  "my",
  "your",
  "his",
  "her",
  "its",
  "our",
  "their",
  "this",
  "that",
  "these",
  "those",
  "some",
  "any",
  "each",
  "every",
  "no",
  "of",
  "for",
  "with",
  "in",
  "on",
  "at",
  "about",
  "from",
  "into",
  "to",
  "all",
  "few",
  "many",
]);

/** Noun-like: right after a determiner or possessive, or one word after one ("a dance studio"). */
const nounish = (ws: readonly string[], i: number): boolean => {
  const p1 = ws[i - 1] ?? "";
  const p2 = ws[i - 2] ?? "";
  if (p1 === "to" && !DETERMINERS.has(p2)) return false; // "to express": an infinitive
  return DETERMINERS.has(p1) || p1.endsWith("'s") || (DETERMINERS.has(p2) && p2 !== "to") || p2.endsWith("'s");
};

export const topicsOf = (text: string, exclude: ReadonlySet<string>, max = 3): string[] => {
  const ws = words(text);
  const stats = new Map<string, { n: number; noun: boolean; first: number }>();
  ws.forEach((raw, i) => {
    const w = raw.replace(/'s$/, "");
    if (w.length < 4 || !/^\p{L}+$/u.test(w)) return;
    if (STOP_WORDS.has(w) || PHATIC_WORDS.has(w) || PREFERENCE_WORDS.has(w) || IRREGULAR_PAST.has(w)) return;
    if (FIRST_PERSON.has(w) || SECOND_PERSON.has(w) || THIRD_PERSON.has(w) || BASE_VERBS.has(w)) return;
    if (MONTHS.has(w) || WEEKDAYS.has(w) || w === "weekend" || w === "photo") return;
    if (exclude.has(w) || (/ly$/.test(w) && !LY_NOUNS.has(w))) return;
    if (/(?:ed)$/.test(w)) return;
    const key = singular(w);
    if (exclude.has(key)) return;
    const noun = nounish(ws, i);
    const s = stats.get(key);
    if (s) {
      s.n++;
      s.noun ||= noun;
    } else stats.set(key, { n: 1, noun, first: i });
  });
  return [...stats.entries()]
    .sort(
      (a, b) =>
        Number(b[1].noun) - Number(a[1].noun) ||
        b[1].n - a[1].n ||
        b[0].length - a[0].length ||
        a[1].first - b[1].first,
    )
    .slice(0, max)
    .map(([w]) => w);
};
