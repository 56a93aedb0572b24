import { createHash } from "node:crypto";

export const sha256 = (s: string): string => createHash("sha256").update(s).digest("hex");

/** Lower-case, collapse whitespace, strip trailing punctuation: "same fact twice = one record". */
export const normaliseText = (text: string): string =>
  text
    .normalize("NFKC")
    .toLowerCase()
    .replace(/\s+/g, " ")
    .replace(/[\s.!?]+$/u, "")
    .trim();

export const recordId = (tenant: string, text: string): string => sha256(`${tenant}\u0000${normaliseText(text)}`);

/** Deterministic segment id: the same turns always give the same segment. */
export const segmentId = (tenant: string, conversation: string, firstTurnId: string, lastTurnId: string): string =>
  sha256(`${tenant}\u0000${conversation}\u0000${firstTurnId}\u0000${lastTurnId}`).slice(0, 32);

/** Raw turns are unique per conversation, so their row id joins both. */
export const turnRowId = (conversation: string, turnId: string): string => `${conversation}::${turnId}`;

export const isTurnRowId = (id: string): boolean => id.includes("::");

export const parseTurnRowId = (rowId: string): { conversation: string; turnId: string } => {
  const i = rowId.lastIndexOf("::");
  if (i < 0) throw new Error(`not a turn row id: ${rowId}`);
  return { conversation: rowId.slice(0, i), turnId: rowId.slice(i + 2) };
};
