/** Sentence classification (phatic, question) and record typing. */
import { PHATIC_WORDS, PREFERENCE_WORDS, RELATION_WORDS, STOP_WORDS } from "../core/text/lexicon.ts";
import type { RecordType, TimeRange } from "../core/types.ts";
import { hasFutureCue, hasPastCue, words } from "./tense.ts";

/** Words that carry content: not stop words, not phatic, not a known name, not a bare number. */
export const contentWords = (sentence: string, names: ReadonlySet<string>): string[] =>
  words(sentence).filter((w) => {
    const base = w.replace(/'s$/, "");
    if (STOP_WORDS.has(w) || STOP_WORDS.has(base) || PHATIC_WORDS.has(w) || PHATIC_WORDS.has(base)) return false;
    if (names.has(base)) return false;
    if (/^(?:ha)+h?$|^(?:he)+$|^(?:lo)+l$|^a+w+$|^o+h+$|^w+o+w+$|^h+m+$|^u+g+h+$/.test(w)) return false;
    return w.length > 1 || /\d/.test(w);
  });

export const isQuestion = (sentence: string): boolean => /\?["')\s]*$/.test(sentence);

/**
 * Phatic: small talk with no content. A sentence is phatic when no content word is left after
 * removing stop words, the phatic lexicon and the speakers' names ("Wow!", "That's great!",
 * "How are you?", "Thanks, Jon!", "Haha"). Anything with a content word stays.
 */
export const isPhatic = (sentence: string, names: ReadonlySet<string>): boolean =>
  contentWords(sentence, names).length === 0;

const PREFERENCE_SUBJECT = new Set([
  "i",
  "you",
  "we",
  "they",
  "he",
  "she",
  "really",
  "also",
  "do",
  "don't",
  "always",
  "kinda",
  "would",
  "i'd",
  "totally",
  "just",
  "still",
  "so",
]);

const hasPreference = (ws: readonly string[]): boolean => {
  for (let i = 0; i < ws.length; i++) {
    const w = ws[i]!;
    if (!PREFERENCE_WORDS.has(w)) continue;
    // "like" is a preference verb only after a subject or an adverb ("I like", "really like").
    if ((w === "like" || w === "into") && !PREFERENCE_SUBJECT.has(ws[i - 1] ?? "")) continue;
    return true;
  }
  return false;
};

/**
 * Record type, first rule that holds:
 * plan (future cue, or an event time after the day it was said) > event (an event time before
 * that day) > preference (like/love/enjoy/favorite/prefer/hate...) > event (past-tense cue) >
 * relation (family, friend, partner, married...) > fact. Photo-only records are "other".
 */
export const classify = (text: string, time: TimeRange, saidAt: string, photoOnly: boolean): RecordType => {
  if (photoOnly) return "other";
  const ws = words(text);
  const said = saidAt.slice(0, 10);
  const start = (time.at ?? time.from ?? "").slice(0, 10);
  const end = (time.at ?? time.to ?? "").slice(0, 10);
  if (hasFutureCue(text) && !hasPastCue(text)) return "plan";
  if (start.length > 0 && start > said) return "plan";
  if (end.length > 0 && end < said) return "event";
  if (hasPreference(ws)) return "preference";
  if (hasFutureCue(text)) return "plan";
  if (hasPastCue(text)) return "event";
  if (ws.some((w) => RELATION_WORDS.has(w))) return "relation";
  return "fact";
};
