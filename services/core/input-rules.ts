/**
 * Input rules shared by every front door (HTTP, gRPC, CLI, Kafka input): identifiers, free text and
 * timestamps. One place, so that a value accepted by one door is accepted by all of them.
 */
import { z } from "zod";

/** Longest identifier (conversation, turnId, sessionId, record id, metadata key, speaker, entity filter). */
export const MAX_ID_LENGTH = 256;
/** Longest turn text, in UTF-16 code units. */
export const MAX_TEXT_LENGTH = 100_000;
/** Accepted calendar years of a timestamp or time filter: wide enough for any conversation, narrow enough to catch typos. */
export const MIN_YEAR = 1900;
export const MAX_YEAR = 2200;

// C0 and C1 control characters and DEL (NUL included).
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
// The same, less the three that text legitimately carries: \t \n \r.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const TEXT_CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;

/**
 * An identifier: trimmed, 1..MAX_ID_LENGTH characters, no control characters (a NUL or an escape
 * sequence in an id ends up in file names, log lines and Cypher parameters).
 */
export const idSchema = () =>
  z
    .string()
    .trim()
    .min(1, "must not be empty")
    .max(MAX_ID_LENGTH, `must be at most ${MAX_ID_LENGTH} characters`)
    .refine((s) => !CONTROL.test(s), { message: "must not contain control characters" });

/** Turn text with the control characters other than \t \n \r removed (stripped, not rejected: pasted logs carry them). */
export const stripControl = (text: string): string => text.replace(TEXT_CONTROL, "");

/** Turn text: control characters stripped, 1..MAX_TEXT_LENGTH characters, not only whitespace. */
export const textSchema = () =>
  z
    .string()
    .max(MAX_TEXT_LENGTH, `must be at most ${MAX_TEXT_LENGTH} characters`)
    .transform(stripControl)
    .refine((s) => s.trim().length > 0, { message: "must not be empty or only whitespace" });

/** Metadata: string values under identifier keys. */
export const metadataSchema = () => z.record(idSchema(), z.string().max(MAX_TEXT_LENGTH));

// RFC 3339 profile of ISO 8601 with seconds optional; upper-case T and Z and a colon in the offset,
// so that Date.parse (used downstream) reads every accepted string the same way as this module.
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:(Z)|([+-])(\d{2}):(\d{2}))$/;
const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;

const daysIn = (year: number, month: number): number => new Date(Date.UTC(year, month, 0)).getUTCDate();

const validDate = (y: number, mo: number, d: number): boolean =>
  y >= MIN_YEAR && y <= MAX_YEAR && mo >= 1 && mo <= 12 && d >= 1 && d <= daysIn(y, mo);

/**
 * Epoch milliseconds of an ISO 8601 date-time with seconds optional and a `Z` or `±hh:mm` offset
 * ("2023-05-08T13:56:00Z", "2023-05-08T15:56+02:00"), or undefined when the text is anything else
 * (no offset, "May 8", "1", an impossible day, a year outside MIN_YEAR..MAX_YEAR). Computed from the
 * fields, not Date.parse, which accepts and misdates much more than ISO.
 */
export const parseIsoDateTime = (text: string): number | undefined => {
  const m = DATE_TIME.exec(text);
  if (!m) return undefined;
  const [y, mo, d, h, mi] = [m[1], m[2], m[3], m[4], m[5]].map(Number) as [number, number, number, number, number];
  const s = Number(m[6] ?? 0);
  const ms = Number((m[7] ?? "0").slice(0, 3).padEnd(3, "0"));
  if (!validDate(y, mo, d) || h > 23 || mi > 59 || s > 59) return undefined;
  let offsetMin = 0;
  if (!m[8]) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offsetMin = (m[9] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  return Date.UTC(y, mo - 1, d, h, mi, s, ms) - offsetMin * 60_000;
};

/** Like parseIsoDateTime, and also a calendar date ("2023-05-08", midnight UTC): for filters. */
export const parseIsoDateOrDateTime = (text: string): number | undefined => {
  const m = DATE_ONLY.exec(text);
  if (!m) return parseIsoDateTime(text);
  const [y, mo, d] = [m[1], m[2], m[3]].map(Number) as [number, number, number];
  return validDate(y, mo, d) ? Date.UTC(y, mo - 1, d) : undefined;
};

const DATE_TIME_MESSAGE = `must be an ISO-8601 date-time with an offset or Z (e.g. 2023-05-08T13:56:00Z), year ${MIN_YEAR}-${MAX_YEAR}`;
const DATE_MESSAGE = `must be an ISO-8601 date (2023-05-08) or date-time with an offset or Z (2023-05-08T13:56:00Z), year ${MIN_YEAR}-${MAX_YEAR}`;

/** A turn timestamp (kept as sent; toTurn normalises it to UTC). */
export const timestampSchema = () =>
  z.string().refine((s) => parseIsoDateTime(s) !== undefined, { message: DATE_TIME_MESSAGE });

/** A time filter: listing from/to, query asOf (kept as sent). */
export const timeFilterSchema = () =>
  z.string().refine((s) => parseIsoDateOrDateTime(s) !== undefined, { message: DATE_MESSAGE });
