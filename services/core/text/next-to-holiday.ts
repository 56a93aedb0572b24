/**
 * A time said next to a holiday: "the day after Thanksgiving", "the weekend before Christmas",
 * "the week before Easter". Its days are not the holiday's: the day before or after it, the seven
 * days before or after it, the weekend before or after it. Shared by the encoder and the question
 * planner, as the holiday parser is (holidays.ts).
 *
 * chrono-node gives it two ways: as a holiday result with the unit words just before it (the
 * encoder then drops the unit words' own result as a date counted from another event:
 * anaphoric-dates.ts), or, where its "<unit> before / after <date>" refiner merges them, as one
 * result whose text starts with the unit words (`splitNextTo`), counted from the holiday's nearest
 * occurrence whatever the tense.
 */
import type { ParsedResult } from "chrono-node";
import { DAY_MS } from "../record-index.ts";
import { holidayOf } from "./holidays.ts";
import { saturdayOf } from "./week-span.ts";

const NEXT_TO = /\b(day|night|week|weekend)\s+(before|after)\s+$/i;
const NEXT_TO_START = /^((?:the\s+)?(?:day|night|week|weekend)\s+(?:before|after)\s+)(\S.*)$/i;

export interface DaysNextTo {
  /** First and last day, UTC ms at midnight. */
  from: number;
  to: number;
  weekend: boolean;
}

/** Whether `before` (the words right before a holiday's name) ends in "<unit> before / after". */
export const isNextToHoliday = (before: string): boolean => NEXT_TO.test(before);

/**
 * The days of the time `before` (the words right before a holiday's name) places next to the
 * holiday's `day`; undefined when those words name no such time.
 */
export const daysNextTo = (day: number, before: string): DaysNextTo | undefined => {
  const m = NEXT_TO.exec(before);
  if (!m) return undefined;
  const unit = (m[1] as string).toLowerCase();
  const sign = (m[2] as string).toLowerCase() === "before" ? -1 : 1;
  if (unit === "day" || unit === "night") {
    const d = day + sign * DAY_MS;
    return { from: d, to: d, weekend: false };
  }
  if (unit === "week")
    return sign < 0
      ? { from: day - 7 * DAY_MS, to: day - DAY_MS, weekend: false }
      : { from: day + DAY_MS, to: day + 7 * DAY_MS, weekend: false };
  // The weekend before: the last Saturday and Sunday wholly before the day; after: the first after it.
  const sat = sign < 0 ? saturdayOf(day - 7 * DAY_MS) : saturdayOf(day + DAY_MS);
  return { from: sat, to: sat + DAY_MS, weekend: true };
};

/** A merged result's text split into its unit words ("the day after ") and the rest, if it starts with them. */
export const splitNextTo = (text: string): { lead: string; tail: string } | undefined => {
  const m = NEXT_TO_START.exec(text.trim());
  return m ? { lead: m[1] as string, tail: m[2] as string } : undefined;
};

/**
 * A merged result ("the day after Thanksgiving") read again: its unit words and the holiday result
 * that `parse` (the caller's chrono parser, against the caller's reference) makes of the rest,
 * when the rest is that holiday and nothing more; undefined otherwise.
 */
export const mergedHoliday = (
  text: string,
  parse: (text: string) => ParsedResult[],
): { lead: string; holiday: ParsedResult } | undefined => {
  const split = splitNextTo(text);
  if (!split) return undefined;
  const inner = parse(split.tail)[0];
  return inner && inner.index === 0 && inner.text.length === split.tail.length && holidayOf(inner)
    ? { lead: split.lead, holiday: inner }
    : undefined;
};
