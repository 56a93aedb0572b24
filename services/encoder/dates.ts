/**
 * Date expressions: found and resolved by chrono-node against the turn's timestamp (UTC,
 * forwardDate false), then turned into an absolute phrase and a time range.
 *
 * Conventions (documented in README.md):
 * - day ("yesterday", "two days ago", "last Saturday", "May 7th") -> "on 2023-05-07", time {at}
 * - week ("last week", "next week", "this week", "two weeks ago") -> the Monday..Sunday (ISO) week
 *   that contains chrono's date ("this week": the week of the turn) -> "in the week of 2023-02-20",
 *   time {from: Monday 00:00Z, to: Sunday 23:59:59.999Z}
 * - weekend -> Saturday..Sunday, "on the weekend of 2023-02-25"
 * - month ("last month", "this month", "in May") -> "in December 2022", {from: 1st, to: last day}
 * - season ("last summer", "the summer of 2022", "during the summer": core/text/season.ts) ->
 *   "in summer 2022", {from: June 1, to: August 31}; a season after a preposition with nothing to
 *   place it is moved by a year as the tense says, and is no date in a sentence with no tense cue
 *   ("in the winter we ski": a habit, not a time)
 * - year ("last year", "in 2022", "a few years ago") -> "in 2022", {from: Jan 1, to: Dec 31}
 * - a rough count of days or weeks ("a few days ago", "in a couple of weeks") -> "a few days before
 *   2023-06-16", no time: a day or a week chosen for it would be one nobody said
 * - counted from another event ("two days later", "the week before my birthday", "the next day"
 *   in a tale: core/text/anaphoric-dates.ts) -> no date, the words as said; chrono would count it
 *   from the turn
 * - a date without a year (or a bare weekday) that chrono put on the wrong side of the turn is
 *   moved by one year (one week) when the sentence's tense says so: "I went there in May" said in
 *   March 2023 is May 2022.
 */
import { casual, type ParsedResult } from "chrono-node";
import { DAY_MS } from "../core/record-index.ts";
import { isAnaphoricDate } from "../core/text/anaphoric-dates.ts";
import { bareYearParser, PART_OF_YEAR } from "../core/text/bare-year.ts";
import { beforeLastParser } from "../core/text/before-last.ts";
import { countedAgoParser } from "../core/text/counted-ago.ts";
import { daySpanWording, MONTH_NAMES } from "../core/text/day-span.ts";
import { holidayDay, holidayOf, holidayParser } from "../core/text/holidays.ts";
import { DATE_PREPOSITIONS } from "../core/text/lexicon.ts";
import { daysNextTo, mergedHoliday, splitNextTo } from "../core/text/next-to-holiday.ts";
import { seasonOf, seasonParser, seasonSpan } from "../core/text/season.ts";
import { mondayOf, saturdayOf, WEEK_WORD, WEEKEND_WORD } from "../core/text/week-span.ts";
import type { TimeRange } from "../core/types.ts";
import { hasFutureCue, hasPastCue } from "./tense.ts";

export type Granularity = "day" | "weekend" | "week" | "month" | "season" | "year";

export interface DateMention {
  /** Offset and length of the replaced span in the input sentence. */
  index: number;
  length: number;
  /** The expression as written. */
  text: string;
  granularity: Granularity;
  /** First and last day, YYYY-MM-DD (equal for a single day). */
  from: string;
  to: string;
  /** Absolute replacement, e.g. "on 2023-01-19", "in December 2022". */
  phrase: string;
  /**
   * A rough count of days or weeks ("a few days ago" -> "a few days before 2023-06-16"): worded
   * against the turn's day, with no span of its own (timeOf leaves it out). Any day chosen for it
   * would be one nobody said.
   */
  anchored?: true;
}

/** chrono does not parse a bare year; this adds "in 2022", "since 2016", "back in 2019". */
const yearParser = bareYearParser(`in|since|during|from|until|till|by|around|before|after|circa|${PART_OF_YEAR}`);
/** "early 2023", "the end of 2021": already absolute, and worded better than "in 2023" would be. */
const PART_OF_YEAR_TEXT = new RegExp(`^(?:${PART_OF_YEAR})\\b`, "i");

const parserInstance = (() => {
  const c = casual.clone();
  c.parsers.push(yearParser, seasonParser(), beforeLastParser(), holidayParser(), countedAgoParser());
  return c;
})();

const pad = (n: number, w = 2): string => String(n).padStart(w, "0");
export const isoDay = (ms: number): string => {
  const d = new Date(ms);
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
};
const utcDay = (y: number, m: number, d: number): number => Date.UTC(y, m - 1, d);
/** Midnight (UTC) of the day of an ISO timestamp. */
const dayOf = (iso: string): number => {
  const t = new Date(iso);
  return utcDay(t.getUTCFullYear(), t.getUTCMonth() + 1, t.getUTCDate());
};

interface Span {
  granularity: Granularity;
  from: number;
  to: number;
}

const WEEKDAY_ABBREV = /^(?:on\s+)?(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)\.?$/i;
const MONTH_CONTEXT =
  /\b(?:on|in|at|during|since|by|until|till|from|of|before|after|around|last|next|this|early|mid|late|end|beginning|start|middle|through|until)\s*$/i;

/** The one side of the turn a sentence's tense puts it on; undefined when it says neither or both. */
const tenseSide = (sentence: string): "past" | "future" | undefined => {
  const past = hasPastCue(sentence);
  const future = hasFutureCue(sentence);
  return past === future ? undefined : past ? "past" : "future";
};

/** Resolve one component set (start or end of a result) to a span, or null to reject. */
const spanOf = (r: ParsedResult, which: "start" | "end", ref: number, sentence: string): Span | null => {
  const c = which === "start" ? r.start : r.end;
  if (!c) return null;
  const text = r.text.toLowerCase();
  const year = c.get("year");
  const month = c.get("month");
  const day = c.get("day");
  if (year === null || month === null || day === null) return null;
  const certain = (k: "year" | "month" | "day" | "weekday"): boolean => c.isCertain(k);
  let pivot = utcDay(year, month, day);

  const relativeWord = /\b(?:last|next|this|past|coming|ago|previous|following)\b/.test(text);
  const side = tenseSide(sentence);
  const onlyPast = side === "past";
  const onlyFuture = side === "future";

  if (WEEKEND_WORD.test(text)) {
    if (!relativeWord) {
      if (onlyPast && pivot > ref) pivot -= 7 * DAY_MS;
      if (onlyFuture && pivot < ref) pivot += 7 * DAY_MS;
    }
    const sat = saturdayOf(pivot);
    return { granularity: "weekend", from: sat, to: sat + DAY_MS };
  }
  if (WEEK_WORD.test(text)) {
    const base = /\bthis week\b/.test(text) ? ref : pivot;
    const mon = mondayOf(base);
    return { granularity: "week", from: mon, to: mon + 6 * DAY_MS };
  }
  if (certain("day") || certain("weekday")) {
    if (!certain("year") && certain("month")) {
      // "May 7th": chrono takes the nearest year; the tense decides the side of the turn.
      if (onlyPast && pivot > ref) pivot = utcDay(year - 1, month, day);
      if (onlyFuture && pivot < ref) pivot = utcDay(year + 1, month, day);
    } else if (!certain("day") && certain("weekday") && !relativeWord) {
      if (onlyPast && pivot > ref) pivot -= 7 * DAY_MS;
      if (onlyFuture && pivot < ref) pivot += 7 * DAY_MS;
    }
    return { granularity: "day", from: pivot, to: pivot };
  }
  if (certain("month")) {
    let y = year;
    if (!certain("year")) {
      const first = utcDay(y, month, 1);
      const last = utcDay(y, month + 1, 1) - DAY_MS;
      if (onlyPast && first > ref) y -= 1;
      if (onlyFuture && last < ref) y += 1;
    }
    return { granularity: "month", from: utcDay(y, month, 1), to: utcDay(y, month + 1, 1) - DAY_MS };
  }
  if (certain("year")) return { granularity: "year", from: utcDay(year, 1, 1), to: utcDay(year + 1, 1, 1) - DAY_MS };
  // Nothing certain: "this morning", "tonight", "this month" variants: the implied day.
  if (/\b(?:today|tonight|morning|afternoon|evening|night|noon)\b/.test(text))
    return { granularity: "day", from: pivot, to: pivot };
  return null;
};

/**
 * A season's days. One the sentence placed ("last summer", "summer 2022") stands; one after a
 * preposition alone ("during the summer") is the nearest to the turn, moved a year back or ahead
 * when the tense says the other side, and no date without a tense cue: "in the summer we go to the
 * lake" is a habit.
 */
const seasonDays = (season: NonNullable<ReturnType<typeof seasonOf>>, ref: number, sentence: string): Span | null => {
  let year = season.year;
  if (season.unplaced) {
    const side = tenseSide(sentence);
    if (side === undefined) return null;
    const s = seasonSpan(season.season, year);
    if (side === "past" && s.from > ref) year--;
    if (side === "future" && s.to < ref) year++;
  }
  const { from, to } = seasonSpan(season.season, year);
  return { granularity: "season", from, to: to + 1 - DAY_MS };
};

/**
 * A holiday's day: as placed ("last Christmas", "Christmas 2022"), or for a name alone ("on
 * Halloween") the nearest, moved a year as the tense says, and no date without a tense cue: "we
 * go to my parents' at Christmas" is a habit.
 */
const holidayDays = (
  holiday: NonNullable<ReturnType<typeof holidayOf>>,
  year: number,
  ref: number,
  sentence: string,
): Span | null => {
  let day = holidayDay(holiday.holiday, year);
  if (holiday.unplaced) {
    const side = tenseSide(sentence);
    if (side === undefined) return null;
    if (side === "past" && day > ref) day = holidayDay(holiday.holiday, year - 1);
    if (side === "future" && day < ref) day = holidayDay(holiday.holiday, year + 1);
  }
  return { granularity: "day", from: day, to: day };
};

/** "feels like just yesterday", "as if it was yesterday": a figure of speech, not a date. */
const FIGURATIVE =
  /\b(?:(?:feels?|felt|feeling|seems?|seemed|seeming)\s+like|as if|as though)\s+(?:just\s+|only\s+)?(?:it\s+(?:was|were)\s+)?$/i;
/** "in two weeks", "in a few days": a time ahead in a plan, a duration in a tale. */
const IN_A_WHILE = /^in\s+.*\b(?:minutes?|hours?|days?|weeks?|weekends?|months?|years?)$/i;
/** A perfect denied ("haven't talked in a few days"): the span since, not a date. */
const NOT_SINCE = /\b(?:haven't|hasn't|hadn't|have not|has not|had not|never)\b/i;

/** A holiday's days, or the days next to it that the words before its name say (next-to-holiday.ts). */
const holidayNear = (
  holiday: NonNullable<ReturnType<typeof holidayOf>>,
  year: number | null,
  ref: number,
  sentence: string,
  before: string,
): Span | null => {
  const day = holidayDays(holiday, year ?? new Date(ref).getUTCFullYear(), ref, sentence);
  const next = day && daysNextTo(day.from, before);
  if (!next) return day;
  return { granularity: next.weekend ? "weekend" : "day", from: next.from, to: next.to };
};

/**
 * The days of chrono's merged "<unit> before / after <holiday>" result: the holiday read on its
 * own (with the sentence's tense), then the unit next to it. undefined when the words after the
 * unit are no holiday alone.
 */
const besideHoliday = (text: string, at: Date, ref: number, sentence: string): Span | null | undefined => {
  const merged = mergedHoliday(text, (tail) =>
    parserInstance.parse(tail, { instant: at, timezone: 0 }, { forwardDate: false }),
  );
  const holiday = merged && holidayOf(merged.holiday);
  if (!merged || !holiday) return undefined;
  return holidayNear(holiday, merged.holiday.start.get("year"), ref, sentence, merged.lead);
};

const accept = (r: ParsedResult, sentence: string): boolean => {
  const text = r.text.trim();
  if (text.length === 0) return false;
  if (WEEKDAY_ABBREV.test(text)) return false; // "sat", "Sun", "Wed": words, not dates
  if (/^for\s/i.test(text)) return false; // "for 8 years": a duration
  if (/\bnow\b/i.test(text) && !/\b(?:day|week|month|year)s?\b/i.test(text)) return false;
  const before = sentence.slice(0, r.index);
  if (/\b(?:every|each)\s*$/i.test(before)) return false; // "every Sunday": recurring
  if (/^yesterday$/i.test(text) && FIGURATIVE.test(before)) return false;
  // "two days later", "the week before the wedding": counted from the story, not from the turn.
  if (isAnaphoricDate(r, sentence, hasPastCue(sentence))) return false;
  const side = tenseSide(sentence);
  // "I finished it in two weeks", "we haven't talked in a few days": how long, not when. Only a
  // plan's "in two weeks" is a time ahead of the turn.
  if (IN_A_WHILE.test(text) && (side === "past" || NOT_SINCE.test(sentence))) return false;
  const s = r.start;
  const onlyTime =
    !s.isCertain("year") &&
    !s.isCertain("month") &&
    !s.isCertain("day") &&
    !s.isCertain("weekday") &&
    s.isCertain("hour");
  if (onlyTime) return false;
  // A bare month name ("May", "March") is a date only with a date word before it or a year after it.
  if (
    s.isCertain("month") &&
    !s.isCertain("day") &&
    !s.isCertain("year") &&
    !/\b(?:last|next|this|past|ago)\b/i.test(text)
  ) {
    if (!/^[A-Z]/.test(text)) return false;
    if (!MONTH_CONTEXT.test(before)) return false;
  }
  return true;
};

const phraseOf = (span: Span, approx: boolean): { core: string; prep: string } => {
  const from = isoDay(span.from);
  const to = isoDay(span.to);
  switch (span.granularity) {
    case "day":
      // Days in a row (the week before a holiday) are both ends: its first day alone would mislead.
      return { core: from === to ? from : `${from} to ${to}`, prep: "on" };
    case "weekend":
      return { core: `the weekend of ${from}`, prep: "on" };
    case "week":
      return { core: `the week of ${from}`, prep: "in" };
    case "month": {
      const d = new Date(span.from);
      return { core: `${MONTH_NAMES[d.getUTCMonth()]} ${d.getUTCFullYear()}`, prep: approx ? "around" : "in" };
    }
    case "season":
      return { core: daySpanWording(from, to), prep: approx ? "around" : "in" };
    case "year":
      return { core: from === to ? from : from.slice(0, 4), prep: approx ? "around" : "in" };
  }
};

const SUBJECT_FOLLOWER =
  /^(?:'s\b|\s+(?:is|was|were|are|has|had|will|would|been|felt|seemed|works|worked|sounds|looks|seems)\b)/i;
/** Date words that are also nouns taking an article ("a weekend"); "a banker yesterday" is not one. */
const TIME_NOUN = /^(?:weekend|night|morning|afternoon|evening|day|week|month|year)$/i;
/** An indefinite article and up to two words right before a date word: the word is a noun there. */
const INDEFINITE_BEFORE = /\b(?:a|an)\s+(?:[\p{L}'-]+\s+){0,2}$/iu;
const LEADING_PREP = /^(on|in|at|during|since|by|until|till|from|of|before|after|around|about|within)\s+/i;

/** All accepted date expressions in a sentence, resolved against saidAt (an ISO timestamp). */
export const findDates = (sentence: string, saidAt: string): DateMention[] => {
  const refInstant = new Date(saidAt);
  if (Number.isNaN(refInstant.getTime())) return [];
  const ref = dayOf(saidAt);
  const results = parserInstance.parse(sentence, { instant: refInstant, timezone: 0 }, { forwardDate: false });
  const out: DateMention[] = [];
  for (const r of results) {
    if (!accept(r, sentence)) continue;
    const season = seasonOf(r);
    const holiday = holidayOf(r);
    // "the day after Thanksgiving": chrono merges the unit words with the holiday into one result.
    const beside = holiday ? undefined : besideHoliday(r.text, refInstant, ref, sentence);
    const start = season
      ? seasonDays(season, ref, sentence)
      : holiday
        ? // chrono may have joined the unit words to the holiday ("night before Christmas").
          holidayNear(
            holiday,
            r.start.get("year"),
            ref,
            sentence,
            sentence.slice(0, r.index) + (splitNextTo(r.text)?.lead ?? ""),
          )
        : beside !== undefined
          ? beside
          : spanOf(r, "start", ref, sentence);
    if (!start) continue;
    let span = start;
    let isRange = false;
    if (r.end && !season) {
      const end = spanOf(r, "end", ref, sentence);
      if (end && end.to >= start.from) {
        span = { granularity: start.granularity, from: start.from, to: end.to };
        isRange = true;
      }
    }
    let index = r.index;
    // "in a week" / "on Saturday": chrono's own preposition is replaced by ours.
    let ownPrep = "";
    const lead = LEADING_PREP.exec(r.text);
    if (lead) {
      ownPrep = lead[1]!.toLowerCase();
    }
    // "this past weekend", "the last week": the determiner belongs to the expression.
    const det = /\b(?:this|that|the)\s+$/i.exec(sentence.slice(0, index));
    if (det && !lead) index = det.index;
    const before = sentence.slice(0, index);
    const prevWord = /([\p{L}]+)\s*$/u.exec(before)?.[1]?.toLowerCase() ?? "";
    // "over the weekend", "in early June": the sentence's own words already place the date.
    const outerPrep =
      DATE_PREPOSITIONS.has(prevWord) || prevWord === "over" || /\b(?:early|mid|late)[\s-]*$/i.test(before);
    const clauseStart = /(?:^|[,;:.!?]|\b(?:and|but|so|because))\s*$/i.test(before);
    const approx = /\b(?:few|couple|several|some|decades?)\b/i.test(r.text);
    const { core, prep } = phraseOf(span, approx);
    const rough =
      approx && span.granularity !== "month" && span.granularity !== "year" ? roughCount(r.text) : undefined;
    let phrase: string;
    if (rough) {
      phrase = `${rough.count} ${rough.side} ${isoDay(ref)}`;
    } else if (PART_OF_YEAR_TEXT.test(r.text)) {
      phrase = sentence.slice(index, r.index + r.text.length);
    } else if (holiday || beside) {
      // "last Christmas (2022-12-25)": the holiday's name stays, it is how people ask about it,
      // with what stands before it as written ("The night before Christmas (2022-12-24)").
      phrase = `${sentence.slice(index, r.index + r.text.length)} (${core})`;
    } else if (season && /\d/.test(r.text)) {
      // "summer 2022", "the summer of 2022": a noun phrase as written, wherever it stands.
      phrase = core;
    } else if (!det && TIME_NOUN.test(r.text) && INDEFINITE_BEFORE.test(before)) {
      // "a quiet weekend", "an awesome night": the word is a noun of the sentence, not an adverbial
      // of time; replacing it would lose it ("a quiet on the weekend of …"), so the date follows it.
      phrase = `${r.text} (${core})`;
    } else if (isRange) {
      const f = isoDay(span.from);
      const t = isoDay(span.to);
      phrase = outerPrep || ownPrep === "from" ? `${f} to ${t}` : `from ${f} to ${t}`;
    } else if (
      outerPrep ||
      (!ownPrep && clauseStart && SUBJECT_FOLLOWER.test(sentence.slice(r.index + r.text.length)))
    ) {
      // After a preposition, or as a subject ("Last year was hard"): the bare date.
      phrase = core;
    } else if (
      ownPrep === "since" ||
      ownPrep === "until" ||
      ownPrep === "till" ||
      ownPrep === "by" ||
      ownPrep === "before" ||
      ownPrep === "after"
    ) {
      phrase = `${ownPrep} ${core}`;
    } else {
      phrase = `${prep} ${core}`;
    }
    if (index === 0 || /[.!?]\s*$/.test(before)) phrase = phrase.charAt(0).toUpperCase() + phrase.slice(1);
    const text = sentence.slice(index, r.index + r.text.length);
    out.push({
      index,
      length: text.length,
      text,
      granularity: span.granularity,
      from: isoDay(span.from),
      to: isoDay(span.to),
      phrase,
      ...(rough ? { anchored: true as const } : {}),
    });
  }
  return out;
};

/**
 * A rough count of days or weeks as said ("a few days ago", "in a couple of weeks"): the count,
 * and which side of the turn's day it lies on. undefined for any other form.
 */
const roughCount = (said: string): { count: string; side: "before" | "after" } | undefined => {
  const text = said.trim();
  const ago = /^(.*?)\s+(?:ago|back)$/i.exec(text);
  if (ago?.[1]) return { count: ago[1], side: "before" };
  const ahead = /^in\s+(.*?)(?:\s+from now)?$/i.exec(text) ?? /^(.*?)\s+from now$/i.exec(text);
  if (ahead?.[1]) return { count: ahead[1], side: "after" };
  return undefined;
};

/** Replace each mention by its absolute phrase. */
export const applyDates = (sentence: string, mentions: readonly DateMention[]): string => {
  let out = "";
  let pos = 0;
  for (const m of [...mentions].sort((a, b) => a.index - b.index)) {
    if (m.index < pos) continue;
    out += sentence.slice(pos, m.index) + m.phrase;
    pos = m.index + m.length;
  }
  return out + sentence.slice(pos);
};

/** Time range of a set of mentions: {at} for one day, {from,to} otherwise, {} when none (anchored ones aside). */
export const timeOf = (all: readonly DateMention[]): TimeRange => {
  const mentions = all.filter((m) => !m.anchored);
  if (mentions.length === 0) return {};
  let from = mentions[0]!.from;
  let to = mentions[0]!.to;
  for (const m of mentions) {
    if (m.from < from) from = m.from;
    if (m.to > to) to = m.to;
  }
  if (from === to && mentions.every((m) => m.granularity === "day")) return { at: `${from}T00:00:00.000Z` };
  return { from: `${from}T00:00:00.000Z`, to: `${to}T23:59:59.999Z` };
};

/** Resolve a sentence: absolute text plus its time range. */
export const resolveDates = (
  sentence: string,
  saidAt: string,
): { text: string; time: TimeRange; mentions: DateMention[] } => {
  const mentions = findDates(sentence, saidAt);
  return { text: applyDates(sentence, mentions), time: timeOf(mentions), mentions };
};
