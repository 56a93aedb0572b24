/**
 * Raw turns that only ask. A question that collects mentions ("What activities does Melanie
 * partake in?") wants what was said about someone; a turn that only asks ("What type of music do
 * you play?") states nothing, though it matches such a question well by its words (the asker's
 * name, "activities"). The encoder makes no record of a question sentence either: it folds the
 * question into the record of its answer. So for those questions these turns go last, after every
 * item that states something, and are packed only where the budget has room left.
 */

/** Sentences: the text cut after a ".", "!" or "?" that a space follows. */
const sentencesOf = (text: string): string[] =>
  text
    .split(/(?<=[.!?])\s+/u)
    .map((s) => s.trim())
    .filter(Boolean);

/** "Wow!", "Hey Mel!", "Thanks, Jon.": short exclamations and greetings, which say nothing either way. */
const EXCLAMATION_WORDS = 3;

const isExclamation = (sentence: string): boolean =>
  /[!.]$/.test(sentence) && sentence.split(/\s+/).length <= EXCLAMATION_WORDS;

/** Whether a turn's text only asks: every sentence but short exclamations ends with "?" (and one does). */
export const asksOnly = (text: string): boolean => {
  const said = sentencesOf(text).filter((s) => !isExclamation(s));
  return said.length > 0 && said.every((s) => s.endsWith("?"));
};

/** The ranked items with the raw turns that only ask moved to the end, each part in its order. */
export const questionTurnsLast = <T extends { kind: string; text: string }>(ranked: readonly T[]): T[] => {
  const asking = ranked.filter((r) => r.kind === "turn" && asksOnly(r.text));
  if (asking.length === 0) return [...ranked];
  const last = new Set(asking);
  return [...ranked.filter((r) => !last.has(r)), ...asking];
};
