import { createHash } from "node:crypto";
import { hashInput } from "./keys.ts";

export const sha256 = (s: string): string => createHash("sha256").update(s).digest("hex");

/** Lower-case, collapse whitespace, strip trailing punctuation: "same fact twice = one record". */
export const normaliseText = (text: string): string =>
  text
    .normalize("NFKC")
    .toLowerCase()
    .replace(/\s+/g, " ")
    .replace(/[\s.!?]+$/u, "")
    .trim();

/** Unambiguous as it is: tenant names hold no control characters (config.ts), so no NUL. */
export const recordId = (tenant: string, text: string): string => sha256(`${tenant}\u0000${normaliseText(text)}`);

/** Deterministic segment id: the same turns always give the same segment (parts joined by keys.hashInput). */
export const segmentId = (tenant: string, conversation: string, firstTurnId: string, lastTurnId: string): string =>
  sha256(hashInput([tenant, conversation, firstTurnId, lastTurnId])).slice(0, 32);

export { isTurnRowId, parseTurnRowId, turnRowId } from "./keys.ts";
