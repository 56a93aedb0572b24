/**
 * The question without the names that say nothing about which record is meant. In a conversation
 * between two people each speaker is in nearly every record (SELECTIVE_SHARE in query.ts), so the
 * entity route leaves them out; in the question's embedding such a name still weighs heavily and
 * pulls towards every turn that names the person (mostly the other speaker addressing them),
 * not towards the person's own turns that hold the answer ("I went camping with the kids").
 * Matching the content words alone finds those: on the dev set the evidence of list questions
 * ranked far higher among all turns by the name-free question than by the question as asked.
 */
import { namePattern } from "../core/text/names.ts";

/** The text with every whole-word occurrence of the names (and a possessive "'s" after one) blanked. */
export const withoutNames = (text: string, names: readonly string[]): string => {
  let out = text;
  for (const name of names) out = out.replace(namePattern(name, "giu"), " ");
  return out
    .replace(/(^|\s)['’]s\b/gu, " ")
    .replace(/\s+/g, " ")
    .trim();
};

/**
 * The question to match once more by content, or undefined when it names none of these names or
 * nothing but them is asked (then the question as asked is all there is to match).
 */
export const contentQuestion = (question: string, names: readonly string[]): string | undefined => {
  if (names.length === 0) return undefined;
  const stripped = withoutNames(question, names);
  return stripped !== question.replace(/\s+/g, " ").trim() && /[\p{L}\p{N}]/u.test(stripped) ? stripped : undefined;
};
