/** Pure derivations from a record for the SQLite indexes: keys, time span, day/month buckets. */
import type { MemoryRecord, TimeRange } from "./types.ts";

export const DAY_MS = 86_400_000;

/** Case-insensitive key for entity names, aliases and topics. */
export const normaliseKey = (s: string): string => s.normalize("NFKC").toLowerCase().replace(/\s+/g, " ").trim();

export interface Span {
  /** Epoch ms, inclusive. */
  from: number;
  /** Epoch ms, inclusive. */
  to: number;
}

const parseMs = (iso: string): number => {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new Error(`not a timestamp: ${iso}`);
  return ms;
};

/**
 * The span an ISO value denotes, by its precision: "2023" is the whole year, "2023-05" the month,
 * "2023-05-07" the day (UTC), anything with a time of day is an instant.
 */
export const isoSpan = (iso: string): Span => {
  const s = iso.trim();
  const start = parseMs(s);
  let y: RegExpMatchArray | null = s.match(/^(\d{4})$/);
  if (y) return { from: start, to: Date.UTC(Number(y[1]) + 1, 0, 1) - 1 };
  y = s.match(/^(\d{4})-(\d{2})$/);
  if (y) return { from: start, to: Date.UTC(Number(y[1]), Number(y[2]), 1) - 1 };
  if (/^\d{4}-\d{2}-\d{2}$/.test(s)) return { from: start, to: start + DAY_MS - 1 };
  return { from: start, to: start };
};

export interface RecordSpan extends Span {
  /** True when the span comes from the record's own time, false when it falls back to saidAt. */
  explicit: boolean;
}

const hasTime = (t: TimeRange): boolean => Boolean(t.at || t.from || t.to);

/** The record's time (at, else from..to, else saidAt) as an inclusive ms span. */
export const recordSpan = (record: MemoryRecord): RecordSpan => {
  const t = record.time;
  if (t.at) return { ...isoSpan(t.at), explicit: true };
  if (hasTime(t)) {
    const first = isoSpan((t.from ?? t.to) as string);
    const last = isoSpan((t.to ?? t.from) as string);
    return { from: Math.min(first.from, last.from), to: Math.max(first.to, last.to), explicit: true };
  }
  const said = parseMs(record.source.saidAt);
  return { from: said, to: said, explicit: false };
};

/** Most day rows a record gets; a longer span is indexed by month only. */
export const MAX_DAYS = 366;
/** Most month rows a record gets. */
export const MAX_MONTHS = 120;

export interface DayBucket {
  day: string | null;
  month: string;
}

const ymd = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

/** Day ('YYYY-MM-DD') and month ('YYYY-MM') buckets a span touches (UTC). */
export const spanBuckets = (span: Span): DayBucket[] => {
  const out: DayBucket[] = [];
  const firstDay = Math.floor(span.from / DAY_MS);
  const lastDay = Math.floor(span.to / DAY_MS);
  if (lastDay - firstDay + 1 <= MAX_DAYS) {
    for (let d = firstDay; d <= lastDay; d++) {
      const day = ymd(d * DAY_MS);
      out.push({ day, month: day.slice(0, 7) });
    }
    return out;
  }
  const start = new Date(span.from);
  let y = start.getUTCFullYear();
  let m = start.getUTCMonth();
  const endMonth = ymd(span.to).slice(0, 7);
  for (let i = 0; i < MAX_MONTHS; i++) {
    const month = `${String(y).padStart(4, "0")}-${String(m + 1).padStart(2, "0")}`;
    out.push({ day: null, month });
    if (month >= endMonth) break;
    m++;
    if (m === 12) {
      m = 0;
      y++;
    }
  }
  return out;
};

/** Entity keys of a record: each entity's name and aliases, normalised, with the display name. */
export const entityKeys = (record: MemoryRecord): { key: string; name: string; alias: boolean }[] => {
  const out = new Map<string, { key: string; name: string; alias: boolean }>();
  for (const e of record.entities) {
    const name = e.name.trim();
    const key = normaliseKey(name);
    if (key && !out.has(key)) out.set(key, { key, name, alias: false });
  }
  for (const e of record.entities) {
    for (const a of e.aliases ?? []) {
      const key = normaliseKey(a);
      if (key && !out.has(key)) out.set(key, { key, name: e.name.trim(), alias: true });
    }
  }
  return [...out.values()];
};

export const topicKeys = (record: MemoryRecord): { key: string; name: string }[] => {
  const out = new Map<string, { key: string; name: string }>();
  for (const t of record.topics) {
    const key = normaliseKey(t);
    if (key && !out.has(key)) out.set(key, { key, name: t.trim() });
  }
  return [...out.values()];
};
