/**
 * How a packed context names the source turns of its items, in as few tokens as a reader can still
 * follow back to the turns. Every item line ends with its sources in square brackets:
 *
 *   whole ids               "[D3:5]", "[D3:5-6]" (a run of consecutive numbered ids as a range)
 *   under a prefix header   "[…5]", "[…5-6]", when the group's header says "(D3:…)": "…" stands for
 *                           the prefix the header gives, so "[…5]" is turn D3:5
 *
 * Ids are opaque strings; the two forms only use what any id list shows: a shared prefix ending at
 * a separator (ids with none, such as UUIDs, stay whole) and a trailing number (ids without one
 * are never ranged). The bench strips both forms before it looks for answer words in a context
 * (`withoutCitations`), so a cited "5" lends no answer "5" a match.
 */

/** What stands for a group's shared prefix, in the header and in each citation. */
export const ELLIPSIS = "…";

const NUMBERED = /^(.*?)(\d+)$/;

/** The characters a prefix may end with: a prefix cut inside a word or number would mislead. */
const SEPARATOR = /[^\p{L}\p{N}]/u;

/** What a set of ids starts with in common, and its shortest id's length: enough to add ids to it. */
export interface IdStart {
  common: string;
  shortest: number;
}

/** The start of `ids`, or of `from`'s ids and `ids` together; undefined for no ids at all. */
export const idStart = (ids: readonly string[], from?: IdStart): IdStart | undefined => {
  let common = from?.common ?? ids[0];
  if (common === undefined) return undefined;
  let shortest = from?.shortest ?? common.length;
  for (const id of ids) {
    let i = 0;
    while (i < common.length && i < id.length && id[i] === common[i]) i++;
    common = common.slice(0, i);
    shortest = Math.min(shortest, id.length);
  }
  return { common, shortest };
};

/**
 * The longest prefix the ids share that ends just after a separator ("D3:" for D3:5 and D3:12;
 * "" for UUIDs or for "a1" and "a2"), and leaves every id a non-empty rest.
 */
export const prefixOf = (start: IdStart | undefined): string => {
  if (start === undefined) return "";
  let end = Math.min(start.common.length, start.shortest - 1);
  while (end > 0 && !SEPARATOR.test(start.common[end - 1] as string)) end--;
  return start.common.slice(0, end);
};

/** `prefixOf` the ids. */
export const sharedPrefix = (ids: readonly string[]): string => prefixOf(idStart(ids));

/**
 * "D3:5, D3:6, D3:7, D3:9" as ["D3:5-7", "D3:9"]: consecutive numbered ids of one stem become a
 * range written with the stem once. The ids keep their order; a run needs the next number exactly.
 */
export const idRuns = (ids: readonly string[]): string[] => {
  const out: string[] = [];
  let i = 0;
  while (i < ids.length) {
    const start = ids[i] as string;
    const m = NUMBERED.exec(start);
    let j = i;
    let last = start;
    if (m) {
      const stem = m[1] as string;
      const first = Number(m[2]);
      for (; j + 1 < ids.length; j++) {
        const next = NUMBERED.exec(ids[j + 1] as string);
        if (!next || next[1] !== stem || Number(next[2]) !== first + (j + 1 - i)) break;
        last = ids[j + 1] as string;
      }
    }
    out.push(j > i ? `${start}-${(NUMBERED.exec(last) as RegExpExecArray)[2]}` : start);
    i = j + 1;
  }
  return out;
};

/** An item's citation: "[D3:5-6]" whole, or "[…5-6]" under a header that gives the prefix "D3:". */
export const citation = (turnIds: readonly string[], prefix = ""): string =>
  `[${idRuns(turnIds)
    .map((run) => (prefix !== "" && run.startsWith(prefix) ? `${ELLIPSIS}${run.slice(prefix.length)}` : run))
    .join(",")}]`;

/** What a group header adds when its lines cite under a prefix: " (D3:…)". */
export const prefixNote = (prefix: string): string => ` (${prefix}${ELLIPSIS})`;

/** A citation at the end of a line, and a header's prefix note before its closing colon. */
const LINE_CITATION = / \[[^[\]\n]*\]$/gmu;
const HEADER_PREFIX_NOTE = new RegExp(` \\([^()\\n]*${ELLIPSIS}\\):$`, "gmu");

/**
 * The context without its citations (line ends "[…]") and the prefix notes of its headers: what a
 * check of the context's words (the bench's answer coverage) should read. Ids elsewhere (a
 * conversation id in a header) are the caller's to strip.
 */
export const withoutCitations = (context: string): string =>
  context.replace(LINE_CITATION, "").replace(HEADER_PREFIX_NOTE, ":");
