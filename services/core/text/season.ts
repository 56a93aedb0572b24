/**
 * Seasons as dates ("last summer", "this spring", "in the autumn", "the summer of 2022"):
 * chrono-node has no parser for them, and people date their lives by them. Meteorological seasons
 * of the northern hemisphere, as most English speakers use them: spring March–May, summer
 * June–August, autumn ("fall") September–November, winter December–February.
 *
 * Only forms that name a season as a time are read:
 * - with a determiner that places it: "this / last / next / past / coming / previous summer";
 * - with a year: "summer 2022", "the summer of 2022", "fall of 2021" (not winter: "winter 2022"
 *   means December 2022 to some and January 2022 to others; the year parsers take it as the year);
 * - after a preposition of time: "in / during / over / through / throughout (the) summer", not
 *   "fall" there ("he hurt his knee in the fall");
 * - counted back: "two summers ago" is the summer before last summer.
 * A season followed by a noun it qualifies ("summer break", "summer camp", "the spring
 * collection") is not a date, nor one in a name ("in Spring Valley").
 */
import type { Parser, ParsingComponents, ParsingContext } from "chrono-node";
import { COUNT_WORD, countOf } from "./counted-ago.ts";

export type Season = "spring" | "summer" | "autumn" | "winter";

/** Its first month (1-based); it runs three months from there. */
export const FIRST_MONTH: Record<Season, number> = { spring: 3, summer: 6, autumn: 9, winter: 12 };

/** The season starting in month `month` (1-based), if one does. */
export const seasonStartingIn = (month: number): Season | undefined =>
  (Object.keys(FIRST_MONTH) as Season[]).find((s) => FIRST_MONTH[s] === month);

const seasonOfWord = (word: string): Season => {
  const w = word.toLowerCase();
  return w === "fall" ? "autumn" : (w as Season);
};

/** The tag on a chrono result that is a season; `SEASON_UNPLACED` too when nothing placed its year. */
export const SEASON_TAG = "memory/season";
export const SEASON_UNPLACED = "memory/season-unplaced";

/** The season of year `year` (winter `year`: December `year` to February `year + 1`), as UTC ms. */
export const seasonSpan = (season: Season, year: number): { from: number; to: number } => {
  const m = FIRST_MONTH[season] - 1;
  return { from: Date.UTC(year, m, 1), to: Date.UTC(year, m + 3, 1) - 1 };
};

/** The season and year of a chrono result this parser made, or undefined for any other result. */
export const seasonOf = (result: {
  tags(): Set<string>;
  start: { get(c: "year" | "month"): number | null };
}): { season: Season; year: number; unplaced: boolean } | undefined => {
  if (!result.tags().has(SEASON_TAG)) return undefined;
  const year = result.start.get("year");
  const month = result.start.get("month");
  const season = month === null ? undefined : seasonStartingIn(month);
  if (year === null || season === undefined) return undefined;
  return { season, year, unplaced: result.tags().has(SEASON_UNPLACED) };
};

/** The occurrence of `season` nearest to `ref` (containing it, else the closer one of before and after). */
const nearest = (season: Season, ref: number): number => {
  const y = new Date(ref).getUTCFullYear();
  let best = y;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const year of [y - 1, y, y + 1]) {
    const s = seasonSpan(season, year);
    const distance = ref < s.from ? s.from - ref : ref > s.to ? ref - s.to : 0;
    if (distance < bestDistance) {
      best = year;
      bestDistance = distance;
    }
  }
  return best;
};

/** The latest occurrence that ended before `ref` ("last summer" in July is the one a year ago). */
const lastEnded = (season: Season, ref: number): number => {
  let year = new Date(ref).getUTCFullYear();
  while (seasonSpan(season, year).to >= ref) year--;
  return year;
};

/** The earliest occurrence that starts after `ref`. */
const nextStarting = (season: Season, ref: number): number => {
  let year = new Date(ref).getUTCFullYear() - 1;
  while (seasonSpan(season, year).from <= ref) year++;
  return year;
};

const WORD = "(spring|summer|fall|autumn|winter)";
/** Nouns a season word qualifies rather than dates. */
const QUALIFIED =
  "(?!\\s+(?:break|breaks|camp|camps|vacation|vacations|holiday|holidays|school|job|jobs|term|semester|session|sessions|season|solstice|equinox|sale|sales|collection|clothes|dress|line|league|festival|olympics|games|roll|rolls|internship|class|classes|course|courses|program|programme|reading|tour|shoes|wardrobe|menu|storm|storms|day|days|night|nights)\\b)";

const PLACED = new RegExp(`\\b(this|last|next|past|coming|previous)\\s+${WORD}\\b${QUALIFIED}`, "i");
const WITH_YEAR = /\b(spring|summer|fall|autumn)(\s+of)?\s+((?:19|20)\d{2})\b(?!\s*[:%])/i;
const AFTER_PREPOSITION = new RegExp(
  `\\b(?:in|during|over|through|throughout)\\s+((?:the\\s+)?(spring|summer|autumn|winter))\\b${QUALIFIED}(?!\\s+(?:of\\s+)?(?:19|20)\\d{2}\\b)`,
  "i",
);

/** "two summers ago": counted back from the latest that ended ("a summer ago" is last summer). */
const COUNTED_AGO = new RegExp(`\\b(${COUNT_WORD})\\s+(summers?|springs?|autumns?|falls?|winters?)\\s+ago\\b`, "i");

/** The first of the four forms in `text`, with where its date words start and the season's year. */
const PATTERN = new RegExp(
  `${PLACED.source}|${WITH_YEAR.source}|${AFTER_PREPOSITION.source}|${COUNTED_AGO.source}`,
  "i",
);

const components = (
  context: ParsingContext,
  season: Season,
  year: number,
  which: "start" | "end",
): ParsingComponents => {
  const { from, to } = seasonSpan(season, year);
  const at = new Date(which === "start" ? from : to);
  // Year and month known, the day implied: a season is months, not the day it starts on.
  return context
    .createParsingComponents({ year: at.getUTCFullYear(), month: at.getUTCMonth() + 1 })
    .imply("day", at.getUTCDate());
};

/**
 * A chrono parser of seasons, resolved against the reference instant: "this" the occurrence
 * nearest to it, "last" / "past" / "previous" the latest that ended before it, "next" / "coming"
 * the earliest that starts after it; a season after a preposition is the nearest too, tagged
 * `SEASON_UNPLACED` so that a reader with more to go on (the tense of the sentence, a question
 * asking about the past) may move it by a year; "n summers ago" the nth latest that ended before
 * it. The result is a range, start to end, tagged
 * `SEASON_TAG`.
 */
export const seasonParser = (): Parser => ({
  pattern: () => PATTERN,
  extract: (context, match) => {
    const ref = context.reference.instant.getTime();
    const index = match.index ?? 0;
    // A capitalised season before another capitalised word names something: "in Spring Valley",
    // "Summer Sounds" ("last Summer I…" is still a season).
    const word = match[2] ?? match[7];
    const after = context.text.slice(index + match[0].length);
    if (word && /^[A-Z]/.test(word) && /^\s+(?!I\b)[A-Z]/.test(after)) return null;
    let season: Season;
    let year: number;
    let text: string;
    let offset = 0;
    let unplaced = false;
    if (match[1] !== undefined && match[2] !== undefined) {
      season = seasonOfWord(match[2]);
      const det = match[1].toLowerCase();
      year =
        det === "this"
          ? nearest(season, ref)
          : det === "next" || det === "coming"
            ? nextStarting(season, ref)
            : lastEnded(season, ref);
      text = match[0];
    } else if (match[3] !== undefined && match[5] !== undefined) {
      season = seasonOfWord(match[3]);
      year = Number.parseInt(match[5], 10);
      text = match[0];
    } else if (match[6] !== undefined && match[7] !== undefined) {
      season = seasonOfWord(match[7]);
      year = nearest(season, ref);
      unplaced = true;
      offset = match[0].indexOf(match[6]);
      text = match[6];
    } else if (match[8] !== undefined && match[9] !== undefined) {
      const n = countOf(match[8]);
      if (n === undefined) return null;
      season = seasonOfWord(match[9].replace(/s$/i, ""));
      year = lastEnded(season, ref) - (n - 1);
      text = match[0];
    } else return null;
    const result = context.createParsingResult(
      index + offset,
      text,
      components(context, season, year, "start"),
      components(context, season, year, "end"),
    );
    result.addTag(SEASON_TAG);
    if (unplaced) result.addTag(SEASON_UNPLACED);
    return result;
  },
});
