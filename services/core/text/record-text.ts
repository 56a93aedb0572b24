/**
 * The record text format, written by the encoder's extractor and read back by the statement
 * analysis (update candidates, consolidation) and the query's packer (each part of a record's
 * line). One module holds both sides so that they cannot
 * drift apart:
 *
 *   <Speaker> (<YYYY-MM-DD said, UTC>): <statement>
 *   <Speaker> (<YYYY-MM-DD>), asked by <Asker> "<resolved question>": <statement>
 *
 * The second form keeps a question of the other speaker that the statement answers ("Yes!" is only
 * readable with it). Records of the LLM encoder carry no prefix: their text is the statement.
 * The format is part of the record's id (sha256 of tenant + text), so changing it re-keys every
 * record written from then on.
 */

/** A question of another speaker that the statement answers, kept in the prefix. */
export interface AskedBy {
  /** Who asked. */
  speaker: string;
  /** The resolved question, as it goes between the quotes. */
  question: string;
}

/** The prefix that opens a record's text, without the space before the statement. */
export const recordPrefix = (speaker: string, day: string, asked?: AskedBy): string =>
  asked ? `${speaker} (${day}), asked by ${asked.speaker} "${asked.question}":` : `${speaker} (${day}):`;

/** A record's text: the prefix, one space, the statement. */
export const recordText = (speaker: string, day: string, statement: string, asked?: AskedBy): string =>
  `${recordPrefix(speaker, day, asked)} ${statement}`;

// What recordPrefix writes, bounded so that a pathological text cannot make the match slow: a
// speaker of up to 120 characters without "(" or a line break, the day, and optionally the asker
// and a quoted question of up to 2,000 characters (a question holding a double quote is not
// recognised, and the text is then read whole). Groups: speaker, day, asker, question.
const PREFIX =
  /^([^\n(]{1,120}?)\s\((\d{4}-\d{2}-\d{2})\)(?:,\s*asked by ([^":]{1,120}?)\s*"((?:[^"\\]|\\.){0,2000})")?:\s*/;

/**
 * A record's text read back into what recordText was given: who said it, the day, the question of
 * another speaker it answers (if any) and the statement (as it follows the prefix, untrimmed). A
 * text in no such form (an LLM encoder's record) is all statement.
 */
export interface RecordParts {
  speaker?: string;
  day?: string;
  asked?: AskedBy;
  statement: string;
}

export const recordParts = (text: string): RecordParts => {
  const m = PREFIX.exec(text);
  if (!m) return { statement: text };
  const [whole, speaker, day, asker, question] = m as unknown as [string, string, string, string?, string?];
  return {
    speaker,
    day,
    ...(asker !== undefined && question !== undefined ? { asked: { speaker: asker, question } } : {}),
    statement: text.slice(whole.length),
  };
};

/** The statement of a record: its text without the prefix recordPrefix writes, trimmed. */
export const statementText = (text: string): string => recordParts(text).statement.trim();

// The prefix up to its day: the speaker and " (YYYY-MM-DD)", bounded as PREFIX is, followed by
// the rest of a prefix (":" or ", asked by"), so that a statement merely starting with a date in
// parentheses is not taken for one.
const SAID_DAY = /^([^\n(]{1,120}?)\s\((\d{4}-\d{2}-\d{2})\)(?=:|,\s*asked by )/;

/**
 * A record's text without the day in its prefix when that is `day` ("Ana (2023-05-08): ..." ->
 * "Ana: ..."): where the text is shown under a header that already gives the day it was said, the
 * prefix's copy of it adds nothing. Any other text is returned as it is.
 */
export const withoutSaidDay = (text: string, day: string): string => {
  const m = SAID_DAY.exec(text);
  return m && m[2] === day ? `${m[1]}${text.slice(m[0].length)}` : text;
};
