/**
 * Holidays as days ("last Christmas", "on Halloween", "Thanksgiving 2022"): chrono-node reads none
 * of them, and people date what they did by them. The days are the ones English-speaking calendars
 * share (Christmas Eve and Day, New Year's Eve and Day, Valentine's Day, Halloween, the Fourth of
 * July) and two that move: Easter Sunday (the Gregorian computus) and Thanksgiving (the United
 * States' fourth Thursday of November; Canada's falls in October, which a name alone cannot tell).
 * "New Year" alone is left out: "the new year" is as often the coming year as a day.
 *
 * The year: one given ("Christmas 2022") stands; "last" is the latest before the reference day,
 * "next" the first after it, "this" the one of the reference's year; a bare name is the nearest,
 * tagged `HOLIDAY_UNPLACED` so that a reader with more to go on (the tense of the sentence) may
 * move it by a year. Results are tagged `HOLIDAY_TAG`; `holidayOf` reads the holiday back from
 * the result's text.
 */
import type { Parser } from "chrono-node";
import { DAY_MS } from "../record-index.ts";

export const HOLIDAY_TAG = "memory/holiday";
export const HOLIDAY_UNPLACED = "memory/holiday-unplaced";

type Holiday =
  | "christmas eve"
  | "christmas"
  | "new year's eve"
  | "new year's day"
  | "valentine's day"
  | "halloween"
  | "fourth of july"
  | "easter"
  | "thanksgiving";

/** Easter Sunday of `year` (anonymous Gregorian algorithm), as [month (1-based), day]. */
const easter = (year: number): [number, number] => {
  const a = year % 19;
  const b = Math.floor(year / 100);
  const c = year % 100;
  const d = Math.floor(b / 4);
  const e = b % 4;
  const f = Math.floor((b + 8) / 25);
  const g = Math.floor((b - f + 1) / 3);
  const h = (19 * a + b - d - g + 15) % 30;
  const i = Math.floor(c / 4);
  const k = c % 4;
  const l = (32 + 2 * e + 2 * i - h - k) % 7;
  const m = Math.floor((a + 11 * h + 22 * l) / 451);
  const month = Math.floor((h + l - 7 * m + 114) / 31);
  const day = ((h + l - 7 * m + 114) % 31) + 1;
  return [month, day];
};

/** The fourth Thursday of November of `year`. */
const thanksgiving = (year: number): [number, number] => {
  const firstWeekday = new Date(Date.UTC(year, 10, 1)).getUTCDay();
  const firstThursday = 1 + ((4 - firstWeekday + 7) % 7);
  return [11, firstThursday + 21];
};

/** The holidays on the same day every year, as [month (1-based), day]. */
const FIXED: Partial<Record<Holiday, [number, number]>> = {
  "christmas eve": [12, 24],
  christmas: [12, 25],
  "new year's eve": [12, 31],
  "new year's day": [1, 1],
  "valentine's day": [2, 14],
  halloween: [10, 31],
  "fourth of july": [7, 4],
};

/** The holiday's day in `year`, as UTC ms at midnight. */
export const holidayDay = (holiday: Holiday, year: number): number => {
  const [month, day] = FIXED[holiday] ?? (holiday === "easter" ? easter(year) : thanksgiving(year));
  return Date.UTC(year, month - 1, day);
};

const canonical = (name: string): Holiday | undefined => {
  const n = name.toLowerCase().replace(/[’‘]/g, "'").replace(/\s+/g, " ");
  if (/^christmas eve$/.test(n)) return "christmas eve";
  if (/^(?:christmas|xmas)(?: day)?$/.test(n)) return "christmas";
  if (/^new year'?s eve$/.test(n)) return "new year's eve";
  if (/^new year'?s day$/.test(n)) return "new year's day";
  if (/^valentine'?s day$/.test(n)) return "valentine's day";
  if (/^hallowe'?en$/.test(n)) return "halloween";
  if (/^(?:the )?(?:fourth|4th) of july$/.test(n)) return "fourth of july";
  if (/^easter(?: sunday)?$/.test(n)) return "easter";
  if (/^thanksgiving(?: day)?$/.test(n)) return "thanksgiving";
  return undefined;
};

const NAME =
  "(christmas\\s+eve|(?:christmas|xmas)(?:\\s+day)?|new\\s+year['’]?s\\s+(?:eve|day)|valentine['’]?s\\s+day|hallowe['’]?en|(?:the\\s+)?(?:fourth|4th)\\s+of\\s+july|easter(?:\\s+sunday)?|thanksgiving(?:\\s+day)?)";
/** A name that qualifies a noun ("Christmas tree", "Halloween costume") or a place ("Easter Island") is not a day. */
const QUALIFIED =
  "(?!['’]s\\b|\\s+(?:tree|trees|card|cards|gift|gifts|present|presents|party|parties|costume|costumes|decorations?|lights|dinner|market|markets|movie|movies|song|songs|carols?|sweater|sweaters|break|vacation|holidays?|season|shopping|spirit|egg|eggs|bunny|candy|parade|menu|sale|sales|weekend|island|islands)\\b)";
const PATTERN = new RegExp(
  `\\b(?:(last|this|next|past)\\s+)?${NAME}(?:\\s+(?:of\\s+)?((?:19|20)\\d{2})\\b)?${QUALIFIED}`,
  "i",
);

const NAME_PATTERN = new RegExp(NAME, "i");

/** The holiday a chrono result of this parser names (canonical), or undefined for any other result. */
export const holidayOf = (result: {
  tags(): Set<string>;
  text: string;
}): { holiday: Holiday; unplaced: boolean } | undefined => {
  if (!result.tags().has(HOLIDAY_TAG)) return undefined;
  const m = NAME_PATTERN.exec(result.text);
  const holiday = m?.[1] ? canonical(m[1]) : undefined;
  return holiday ? { holiday, unplaced: result.tags().has(HOLIDAY_UNPLACED) } : undefined;
};

export const holidayParser = (): Parser => ({
  pattern: () => PATTERN,
  extract: (context, match) => {
    const holiday = canonical(match[2] ?? "");
    if (!holiday) return null;
    const refMs = context.reference.instant.getTime();
    const refDay = refMs - (refMs % DAY_MS);
    const y = context.reference.instant.getUTCFullYear();
    const det = match[1]?.toLowerCase();
    let year: number;
    let unplaced = false;
    if (match[3] !== undefined) year = Number.parseInt(match[3], 10);
    else if (det === "this") year = y;
    else if (det === "last" || det === "past") year = holidayDay(holiday, y) < refDay ? y : y - 1;
    else if (det === "next") year = holidayDay(holiday, y) > refDay ? y : y + 1;
    else {
      // The nearest of last year's, this year's and next year's.
      year = [y - 1, y, y + 1].reduce((best, c) =>
        Math.abs(holidayDay(holiday, c) - refDay) < Math.abs(holidayDay(holiday, best) - refDay) ? c : best,
      );
      unplaced = true;
    }
    const at = new Date(holidayDay(holiday, year));
    const result = context.createParsingResult(match.index ?? 0, match[0], {
      year: at.getUTCFullYear(),
      month: at.getUTCMonth() + 1,
      day: at.getUTCDate(),
    });
    result.addTag(HOLIDAY_TAG);
    if (unplaced) result.addTag(HOLIDAY_UNPLACED);
    return result;
  },
});
