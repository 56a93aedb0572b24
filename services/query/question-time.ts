import * as chrono from "chrono-node";
import { DAY_MS } from "../core/record-index.ts";
import { isAnaphoricDate } from "../core/text/anaphoric-dates.ts";
import { bareYearParser, PART_OF_YEAR } from "../core/text/bare-year.ts";
import { beforeLastParser } from "../core/text/before-last.ts";
import { countedAgoParser } from "../core/text/counted-ago.ts";
import { holidayDay, holidayOf, holidayParser } from "../core/text/holidays.ts";
import { daysNextTo, isNextToHoliday, mergedHoliday } from "../core/text/next-to-holiday.ts";
import { seasonOf, seasonParser, seasonSpan } from "../core/text/season.ts";
import { mondayOf, saturdayOf, WEEK_WORD, WEEKEND_WORD } from "../core/text/week-span.ts";

/** The dates a question restricts its answer to, as an ISO window (inclusive ends). */
export interface QuestionWindow {
  from: string;
  to: string;
}

/**
 * The start of a window the question leaves open ("as of August 2023", "before 2020"): earlier than
 * anything a memory holds, as a date every store compares as a number.
 */
export const OPEN_START = "0001-01-01T00:00:00.000Z";

/**
 * A year written alone after a preposition ("in 2019", "between 2019 and 2021", "the winter of
 * 2022", "as of 2021"): more words count before it than in the encoder's free text, since a
 * question's "and 2021" or "to 2021" after a date is the other end of a span. The other seasons
 * of a year are the season parser's ("the summer of 2022": June to August); a winter of a year
 * is the year, as people differ on which winter it is.
 */
const YEAR_AFTER = `in|during|since|until|till|by|before|after|between|and|from|to|through|throughout|as of|(?:winter|rest|half) of|${PART_OF_YEAR}`;

const parser = chrono.casual.clone();
parser.parsers.push(
  bareYearParser(YEAR_AFTER),
  seasonParser(),
  beforeLastParser(),
  holidayParser(),
  countedAgoParser(),
);

/**
 * Which side of a date the question asks about, from the words just before it: up to and including
 * it ("as of", "by", "until", "up to", "through"), strictly before it, or from it on ("since") or
 * after it. The words can be inside chrono's match ("since 2019" from the year parser above) or
 * just before it ("since May 2023").
 */
type Side = "at" | "upTo" | "before" | "since" | "after";

const SIDE_WORDS: readonly [RegExp, Side][] = [
  [/\b(as of|by|until|till|up to|up until|through)\s*$/i, "upTo"],
  [/\b(before|prior to)\s*$/i, "before"],
  [/\bsince\s*$/i, "since"],
  [/\bafter\s*$/i, "after"],
];

const LEADING_WORDS =
  /^(?:\s*\b(?:as|up|prior|in|during|of|on|since|until|till|by|before|after|between|and|from|to|through|throughout)\b)*\s*/i;

/**
 * What joins two dates of one span ("June and August 2023", "May 3 to May 20"); two dates joined
 * by "and" or "or" ("in 2019 and in 2021") are taken as the span from one to the other too, a
 * window wider than asked rather than one that leaves a date out.
 */
const JOINED =
  /^\s*(?:,|-|–|\b(?:and|or|to|until|till|through)\b)?\s*(?:\b(?:and|or|to|until|till|through|in|on|during)\b)?\s*$/i;

const sideOf = (question: string, hit: chrono.ParsedResult): Side => {
  // A range has both ends ("since May until August").
  if (hit.end) return "at";
  // "the weekend before Christmas" is a time of its own, not everything before Christmas.
  if (holidayOf(hit) && isNextToHoliday(question.slice(0, hit.index))) return "at";
  const before = question.slice(0, hit.index) + (hit.text.match(LEADING_WORDS)?.[0] ?? "");
  return SIDE_WORDS.find(([words]) => words.test(before))?.[1] ?? "at";
};

/**
 * The moment a question asks about when it asks as of one ("as of August 2023", "before 2020":
 * its window is open at the start), in epoch ms; undefined for any other window.
 */
export const askedAsOf = (window: QuestionWindow | undefined): number | undefined =>
  window?.from === OPEN_START ? Date.parse(window.to) : undefined;

type Span = { from: number; to: number };

/** The day, month or year a parsed date pins down, in year `y`. */
const spanIn = (date: chrono.ParsedComponents, y: number): Span => {
  const d = date.date();
  const m = d.getUTCMonth();
  if (date.isCertain("day"))
    return { from: Date.UTC(y, m, d.getUTCDate()), to: Date.UTC(y, m, d.getUTCDate() + 1) - 1 };
  if (date.isCertain("month")) return { from: Date.UTC(y, m, 1), to: Date.UTC(y, m + 1, 1) - 1 };
  return { from: Date.UTC(y, 0, 1), to: Date.UTC(y + 1, 0, 1) - 1 };
};

const yearless = (date: chrono.ParsedComponents): boolean =>
  !date.isCertain("year") && (date.isCertain("month") || date.isCertain("day"));

/**
 * A parsed date as a span. A month or day without a year takes the year of the date it is joined
 * to (`joinedTo`: "between June and August 2022" is June 2022; "between December and February
 * 2023" the December before). Otherwise it is the latest one that began by `ref`: the question asks
 * about the past, and chrono takes the nearest, which can lie ahead ("in December" asked in October).
 */
const spanOf = (date: chrono.ParsedComponents, ref: Date, joinedTo?: Span): Span => {
  const y = date.date().getUTCFullYear();
  if (!yearless(date)) return spanIn(date, y);
  if (joinedTo !== undefined) {
    const year = new Date(joinedTo.from).getUTCFullYear();
    const same = spanIn(date, year);
    return same.from > joinedTo.from ? spanIn(date, year - 1) : same;
  }
  const nearest = spanIn(date, y);
  return nearest.from > ref.getTime() ? spanIn(date, y - 1) : nearest;
};

/**
 * A holiday's day, the latest begun by `ref` when nothing placed it, or the days next to it that
 * the words before its name (`before`) say; undefined for any other result.
 */
const holidayDays = (hit: chrono.ParsedResult, ref: Date, before: string): Span | undefined => {
  const holiday = holidayOf(hit);
  const year = hit.start.get("year");
  if (!holiday || year === null) return undefined;
  const day = holidayDay(holiday.holiday, year);
  const placed = holiday.unplaced && day > ref.getTime() ? holidayDay(holiday.holiday, year - 1) : day;
  const next = daysNextTo(placed, before);
  return next ? { from: next.from, to: next.to + DAY_MS - 1 } : { from: placed, to: placed + DAY_MS - 1 };
};

/**
 * A parsed expression as a span: a range ("May 3 to May 20") from its start to its end's end; a
 * season its three months and a holiday its day, one that nothing placed ("during the summer", "on
 * Halloween") the latest that began by `ref`, as a yearless month is.
 */
const expressionSpan = (hit: chrono.ParsedResult, ref: Date, before: string, joinedTo?: Span): Span => {
  const season = seasonOf(hit);
  if (season) {
    const span = seasonSpan(season.season, season.year);
    return season.unplaced && span.from > ref.getTime() ? seasonSpan(season.season, season.year - 1) : span;
  }
  const holidaySpan = holidayDays(hit, ref, before);
  if (holidaySpan) return holidaySpan;
  // "the day after Thanksgiving", merged by chrono and counted from the nearest one: read again.
  const merged = mergedHoliday(hit.text, (tail) =>
    parser.parse(tail, { instant: ref, timezone: 0 }, { forwardDate: false }),
  );
  const mergedSpan = merged && holidayDays(merged.holiday, ref, merged.lead);
  if (mergedSpan) return mergedSpan;
  // A week or a weekend is its days, not the one day chrono dates it by ("last week": Monday to
  // Sunday; "last weekend" names only a weekday to chrono, which made it a whole year).
  const weekend = WEEKEND_WORD.test(hit.text);
  if (!hit.end && (weekend || WEEK_WORD.test(hit.text))) {
    const d = hit.start.date();
    const pivot = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
    let from = weekend ? saturdayOf(pivot) : mondayOf(pivot);
    if (from > ref.getTime()) from -= 7 * DAY_MS;
    return { from, to: from + (weekend ? 2 : 7) * DAY_MS - 1 };
  }
  const end = hit.end && spanOf(hit.end, ref, joinedTo);
  const start = spanOf(hit.start, ref, end ?? joinedTo);
  return end && end.to > start.from ? { from: start.from, to: end.to } : start;
};

/**
 * The window of the dates a question names, against `ref` (now, or the query's as-of moment):
 * - one date: the day, month or year it pins down ("in May 2024", "on October 13", "last year");
 * - dates joined into one span ("between June and August 2023", "from 2019 to 2021", "since May
 *   until August"): from the earliest to the latest;
 * - a date with a side: open on the other one, so that a question about a state or a count at a
 *   moment ("how many books had P read as of August 2023", "where did P live before 2020") reaches
 *   every mention up to it, and one about what followed ("since May 2023") every mention after it,
 *   up to `ref`.
 * Dates that are not joined ("in June, after moving in 2019") are not one span: the first (with
 * what is joined to it) is the window, as a single date is.
 * Only expressions that name a date count; one counted from another event ("the week after the
 * move", "two days later": anaphoric-dates.ts) names none. A time of day alone ("the opening night", "in the
 * morning") names none, and chrono would put it on the reference day, whose whole year would then
 * run as a time route, a second similarity list that only adds noise to the fusion.
 */
export const questionWindow = (question: string, ref: Date): QuestionWindow | undefined => {
  const hits = parser
    .parse(question, { instant: ref, timezone: 0 }, { forwardDate: false })
    .filter((r) => (["year", "month", "day", "weekday"] as const).some((c) => r.start.isCertain(c)))
    // "the day after the party", "two weeks later": counted from an event, which is no window.
    .filter((r) => !isAnaphoricDate(r, question, true));
  const first = hits[0];
  if (first === undefined) return undefined;
  // The first date and the dates joined to it, each with its span; a yearless one reads its year
  // from the next (spans computed last to first).
  const run = [first];
  for (let i = 1; i < hits.length; i++) {
    const prev = hits[i - 1] as chrono.ParsedResult;
    const hit = hits[i] as chrono.ParsedResult;
    const between =
      question.slice(prev.index + prev.text.length, hit.index) + (hit.text.match(LEADING_WORDS)?.[0] ?? "");
    if (!JOINED.test(between)) break;
    run.push(hit);
  }
  const spans: Span[] = [];
  for (let i = run.length - 1; i >= 0; i--) {
    const hit = run[i] as chrono.ParsedResult;
    spans[i] = expressionSpan(hit, ref, question.slice(0, hit.index), spans[i + 1]);
  }
  let from: number | undefined;
  let to: number | undefined;
  const lower = (t: number) => {
    from = from === undefined ? t : Math.min(from, t);
  };
  const upper = (t: number) => {
    to = to === undefined ? t : Math.max(to, t);
  };
  for (const [i, hit] of run.entries()) {
    const w = spans[i] as Span;
    switch (sideOf(question, hit)) {
      case "at":
        lower(w.from);
        upper(w.to);
        break;
      case "upTo":
        upper(w.to);
        break;
      case "before":
        upper(w.from - 1);
        break;
      case "since":
        lower(w.from);
        break;
      case "after":
        lower(w.to + 1);
        break;
    }
  }
  const start = from ?? Date.parse(OPEN_START);
  const end = to ?? Math.max(ref.getTime(), start);
  // Sides that contradict each other ("after 2022 until 2020") leave the first date alone.
  const [f, t] = start <= end ? [start, end] : [(spans[0] as Span).from, (spans[0] as Span).to];
  return { from: new Date(f).toISOString(), to: new Date(t).toISOString() };
};
