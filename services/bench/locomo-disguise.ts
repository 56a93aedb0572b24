/**
 * Disguised copies of LoCoMo conversations for `bench locomo --disguise <n>`: how much does a result
 * depend on the dev set's own names, places and dates? Copy n renames the two speakers and six
 * places as the scale bench's copy n does (scale-data.ts disguiseOf), renames the speakers' short
 * forms with them ("Mel" for Melanie), and moves every date n years back: the turns' timestamps and
 * every year written in the text, the questions and the answers. Whole years keep every written
 * date true ("in June", "October 13, 2023" -> "October 13, 2022"); only weekdays change. The
 * evidence turn ids are unchanged, so evidence recall compares with the undisguised run.
 */
import type { LocomoConversation } from "../core/datasets/locomo.ts";
import { disguiseOf, disguiseText } from "./scale-data.ts";

export interface LocomoDisguise {
  names: Map<string, string>;
  places: Map<string, string>;
  /** Whole years added to every date (negative: earlier). */
  shiftYears: number;
}

/**
 * The disguise's names plus the speakers' short forms the conversation uses: a capitalised word of
 * 3+ letters that a speaker's name starts with, mapped to the new full name, so that a question
 * about "Mel" still asks about the renamed speaker.
 */
const withShortForms = (conv: LocomoConversation, names: ReadonlyMap<string, string>): Map<string, string> => {
  const out = new Map(names);
  const words = new Set(conv.turns.flatMap((t) => t.text.match(/\b[A-Z][a-z]{2,}\b/g) ?? []));
  for (const [name, renamed] of names)
    for (const w of words) if (w !== name && name.startsWith(w) && !out.has(w)) out.set(w, renamed);
  return out;
};

/** Copy `copy` (0: the conversation as it is). The new names ignore the old ones' gender. */
export const locomoDisguise = (conv: LocomoConversation, copy: number): LocomoDisguise => {
  const d = disguiseOf(conv, copy);
  return { names: withShortForms(conv, d.names), places: d.places, shiftYears: -copy };
};

const YEAR = /\b(19|20)\d{2}\b/g;

/** `text` with the names, places and written years of the disguise. */
export const disguiseLocomoText = (d: LocomoDisguise, text: string): string => {
  const renamed = disguiseText({ names: d.names, places: d.places, shiftDays: 0 }, text);
  return d.shiftYears === 0 ? renamed : renamed.replace(YEAR, (y) => String(Number(y) + d.shiftYears));
};

/** The same instant `years` calendar years later (29 February becomes 1 March in a common year). */
export const shiftedByYears = (date: Date, years: number): Date => {
  const out = new Date(date.getTime());
  out.setUTCFullYear(out.getUTCFullYear() + years);
  return out;
};

export const disguiseConversation = (conv: LocomoConversation, copy: number): LocomoConversation => {
  if (copy === 0) return conv;
  const d = locomoDisguise(conv, copy);
  const text = (t: string): string => disguiseLocomoText(d, t);
  return {
    ...conv,
    speakers: conv.speakers.map((s) => d.names.get(s) ?? s) as [string, string],
    turns: conv.turns.map((t) => ({
      ...t,
      speaker: d.names.get(t.speaker) ?? t.speaker,
      text: text(t.text),
      timestamp: shiftedByYears(new Date(t.timestamp), d.shiftYears).toISOString(),
    })),
    questions: conv.questions.map((q) => ({ ...q, question: text(q.question), answer: text(q.answer) })),
  };
};
