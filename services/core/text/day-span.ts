/**
 * A span of whole days (YYYY-MM-DD, first and last) worded as the encoder words a date it
 * resolved: a day as itself, a whole month as "June 2023", a whole season as "summer 2023" or
 * "winter 2023-24" (core/text/season.ts), a whole year as "2022", an ISO week
 * (Monday to Sunday) as "the week of 2023-02-20", a Saturday and Sunday as "the weekend of
 * 2023-02-25", anything else as "2023-05-01 to 2023-05-09". The query's context writes a record's
 * event time this way: the first day alone would put "in 2022" on January 1.
 */

import { DAY_MS } from "../record-index.ts";
import { seasonStartingIn } from "./season.ts";

export const MONTH_NAMES = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
] as const;

const ISO_DAY = /^(\d{4})-(\d{2})-(\d{2})$/;

const dayMs = (iso: string): number => Date.parse(`${iso}T00:00:00.000Z`);

const lastDayOfMonth = (year: number, month: number): number => new Date(Date.UTC(year, month, 0)).getUTCDate();

/** The words for the days `from` to `to` (inclusive, YYYY-MM-DD); `from` alone when they are not both days. */
export const daySpanWording = (from: string, to: string): string => {
  const f = ISO_DAY.exec(from);
  const t = ISO_DAY.exec(to);
  if (!f || !t || to <= from) return from;
  const [fy, fm, fd] = [Number(f[1]), Number(f[2]), Number(f[3])];
  const [ty, tm, td] = [Number(t[1]), Number(t[2]), Number(t[3])];
  if (fy === ty && fm === 1 && fd === 1 && tm === 12 && td === 31) return String(fy);
  if (fy === ty && fm === tm && fd === 1 && td === lastDayOfMonth(ty, tm)) return `${MONTH_NAMES[fm - 1]} ${fy}`;
  const season = seasonStartingIn(fm);
  if (season !== undefined && fd === 1 && td === lastDayOfMonth(ty, tm)) {
    if (season === "winter" && ty === fy + 1 && tm === 2) return `winter ${fy}-${String(ty % 100).padStart(2, "0")}`;
    if (season !== "winter" && ty === fy && tm === fm + 2) return `${season} ${fy}`;
  }
  const days = Math.round((dayMs(to) - dayMs(from)) / DAY_MS);
  const weekday = new Date(dayMs(from)).getUTCDay();
  if (days === 6 && weekday === 1) return `the week of ${from}`;
  if (days === 1 && weekday === 6) return `the weekend of ${from}`;
  return `${from} to ${to}`;
};
