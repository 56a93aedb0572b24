/**
 * "Two weekends ago" and "a decade ago": counts chrono-node does not read ("two weeks ago" and
 * "ten years ago" it does). Shared by the encoder and the question planner, as the other date
 * parsers of this folder are, so that a turn's date and a question's window agree.
 * - n weekends ago: the weekend of the day n weeks before (two weekends ago is the weekend before
 *   last, as before-last.ts reads it);
 * - n decades ago: the year 10·n years before, which the encoder words as approximate ("around
 *   2013"): a decade is a round number, not a count of years.
 */
import type { Parser } from "chrono-node";
import { DAY_MS } from "../record-index.ts";

const COUNTS: Record<string, number> = {
  a: 1,
  an: 1,
  one: 1,
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  seven: 7,
  eight: 8,
  nine: 9,
  ten: 10,
};

export const COUNT_WORD = `(?:${Object.keys(COUNTS).join("|")}|[1-9]\\d?)`;

/** The number a count word or numeral stands for (undefined for anything else). */
export const countOf = (word: string): number | undefined => {
  const w = word.toLowerCase();
  const n = COUNTS[w] ?? (/^\d+$/.test(w) ? Number.parseInt(w, 10) : undefined);
  return n !== undefined && n >= 1 ? n : undefined;
};

const PATTERN = new RegExp(`\\b(${COUNT_WORD})\\s+(weekends?|decades?)\\s+ago\\b`, "i");

/** A chrono parser of "n weekends ago" and "n decades ago" against the reference instant. */
export const countedAgoParser = (): Parser => ({
  pattern: () => PATTERN,
  extract: (context, match) => {
    const n = countOf(match[1] ?? "");
    if (n === undefined) return null;
    const ref = context.reference.instant;
    if ((match[2] ?? "").toLowerCase().startsWith("decade"))
      return context.createParsingResult(match.index ?? 0, match[0], { year: ref.getUTCFullYear() - 10 * n });
    const at = new Date(ref.getTime() - 7 * n * DAY_MS);
    return context.createParsingResult(match.index ?? 0, match[0], {
      year: at.getUTCFullYear(),
      month: at.getUTCMonth() + 1,
      day: at.getUTCDate(),
    });
  },
});
