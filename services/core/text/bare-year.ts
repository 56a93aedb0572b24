/**
 * A year written alone ("in 2019", "since 2016"): chrono-node's English parsers leave a bare
 * four-digit number alone, since most are not years. After a preposition it is one. Each stage
 * says which words count before the year: the encoder reads free text, where "to 2000" is as often
 * a number as a year, and takes fewer than the query planner, which reads questions ("between 2019
 * and 2021", "as of 2021").
 */
import type { Parser } from "chrono-node";

/**
 * A chrono parser of a year (1900–2099) after one of `before` (alternatives of a regular
 * expression, no capturing groups), not followed by a time or a percentage ("in 2023 at 20:30" is
 * chrono's own; "by 2000%" is no year). The words before the year stay in the result's text:
 * chrono drops a result whose text is only digits. A hyphen may join them ("mid-2022").
 */
/**
 * Words that place a time within a year ("early 2023", "mid-2022", "the end of 2021"): the year is
 * all a reader can be sure of, and the words say the rest as well as any date would.
 */
export const PART_OF_YEAR = "early|mid|late|(?:beginning|start|end|middle)\\s+of";

export const bareYearParser = (before: string): Parser => {
  const pattern = new RegExp(`\\b(?:${before})(?:\\s+|-)((?:19|20)\\d{2})\\b(?!\\s*[:%])`, "i");
  return {
    pattern: () => pattern,
    extract: (context, match) =>
      context.createParsingResult(match.index ?? 0, match[0], { year: Number.parseInt(match[1] ?? "", 10) }),
  };
};
