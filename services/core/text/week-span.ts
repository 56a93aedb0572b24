/**
 * The week and the weekend a day belongs to, shared by the encoder's dates and the query's
 * question window so that "last week" is the same seven days in a turn and in a question: an ISO
 * week (Monday to Sunday) and the Saturday and Sunday of a weekend. Days are UTC ms at midnight.
 */
import { DAY_MS } from "../record-index.ts";

/** Whether a date expression names a weekend ("last weekend", "this weekend") or a week ("two weeks ago"). */
export const WEEKEND_WORD = /\bweekends?\b/i;
export const WEEK_WORD = /\bweeks?\b/i;

/** The Monday of the ISO week holding day `ms`. */
export const mondayOf = (ms: number): number => ms - ((new Date(ms).getUTCDay() + 6) % 7) * DAY_MS;

/** The Saturday of the weekend of day `ms`: itself on a Saturday, the day before on a Sunday, else the coming one. */
export const saturdayOf = (ms: number): number => {
  const wd = new Date(ms).getUTCDay();
  return wd === 6 ? ms : wd === 0 ? ms - DAY_MS : ms + (6 - wd) * DAY_MS;
};
