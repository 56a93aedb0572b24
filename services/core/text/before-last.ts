/**
 * "The week before last" (and weekend, month, year): two of them ago. chrono-node reads "the week
 * before" in it as last week and leaves "last" behind, so "I started the week before last" came
 * out as "I started in the week of <last week> last". This parser reads the whole expression; chrono
 * keeps the longer of two overlapping results.
 */
import type { Parser } from "chrono-node";
import { DAY_MS } from "../record-index.ts";

const PATTERN = /\b(?:the\s+)?(week|weekend|month|year)\s+before\s+last\b/i;

export const beforeLastParser = (): Parser => ({
  pattern: () => PATTERN,
  extract: (context, match) => {
    const unit = (match[1] ?? "").toLowerCase();
    const ref = context.reference.instant;
    const y = ref.getUTCFullYear();
    const m = ref.getUTCMonth();
    if (unit === "year") return context.createParsingResult(match.index ?? 0, match[0], { year: y - 2 });
    if (unit === "month") {
      const at = new Date(Date.UTC(y, m - 2, 1));
      return context.createParsingResult(match.index ?? 0, match[0], {
        year: at.getUTCFullYear(),
        month: at.getUTCMonth() + 1,
      });
    }
    // A week or a weekend: the day two weeks back, whose week (or weekend) the reader takes.
    const at = new Date(ref.getTime() - 14 * DAY_MS);
    return context.createParsingResult(match.index ?? 0, match[0], {
      year: at.getUTCFullYear(),
      month: at.getUTCMonth() + 1,
      day: at.getUTCDate(),
    });
  },
});
