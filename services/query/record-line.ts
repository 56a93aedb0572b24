/**
 * A record's text read back into its parts, for the packer to write its line: who said it, the day
 * it was said, the question of another speaker it answers (if any) and the statement. The format is
 * the encoder's (`services/core/text/record-text.ts`): "<Speaker> (<YYYY-MM-DD>): <statement>" or
 * "<Speaker> (<YYYY-MM-DD>), asked by <Asker> "<question>": <statement>". A text in no such form
 * (an LLM encoder's record) is all statement.
 */
export interface RecordParts {
  speaker?: string;
  day?: string;
  asked?: { speaker: string; question: string };
  statement: string;
}

// Bounded as the encoder's own reader is, so that a pathological text cannot make the match slow.
const PREFIX =
  /^([^\n(]{1,120}?)\s\((\d{4}-\d{2}-\d{2})\)(?:,\s*asked by ([^":]{1,120}?)\s*"((?:[^"\\]|\\.){0,2000})")?:\s*/;

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

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Whether the statement opens with the speaker's name as a word ("Ana went …", "Ana's dog …"). */
export const opensWithName = (statement: string, name: string): boolean =>
  name !== "" && new RegExp(`^${escapeRegExp(name)}(?![\\p{L}\\p{N}])`, "u").test(statement);

export const wordCount = (s: string): number => s.split(/\s+/).filter(Boolean).length;
