/**
 * The LLM encoder's answer: parsed and validated with zod, then turned into MemoryRecords
 * (ids, sources, absolute times) and an updated disambiguation context. Any defect throws an
 * `InvalidEncoderOutput` naming it, which the encoder answers with one retry.
 */
import { z } from "zod";
import { recordId } from "../core/ids.ts";
import {
  type DisambiguationContext,
  type Entity,
  type MemoryRecord,
  MemoryRecordSchema,
  type Segment,
  type SegmentTurn,
  type TimeRange,
} from "../core/types.ts";
import { capContext } from "./context.ts";
import { applyDates, findDates, timeOf } from "./dates.ts";
import { ENTITY_KINDS, RECORD_TYPES } from "./llm-prompt.ts";

export class InvalidEncoderOutput extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidEncoderOutput";
  }
}

const DAY = /^\d{4}-\d{2}-\d{2}/;
/** A date the model wrote: YYYY-MM-DD (or a full ISO timestamp), "" / null for none. */
const dateField = z
  .union([z.string(), z.null()])
  .optional()
  .transform((v, ctx) => {
    if (v === null || v === undefined || v.trim() === "") return undefined;
    const s = v.trim();
    if (!DAY.test(s) || Number.isNaN(Date.parse(s.slice(0, 10)))) {
      ctx.addIssue({ code: "custom", message: `not a YYYY-MM-DD date: "${s.slice(0, 40)}"` });
      return z.NEVER;
    }
    return s.slice(0, 10);
  });

const name = z.string().trim().min(1).max(120);

export const LlmRecordSchema = z.object({
  type: z.enum(RECORD_TYPES),
  text: z.string().trim().min(1).max(2000),
  entities: z
    .array(
      z.object({
        name,
        kind: z.enum(ENTITY_KINDS).default("other"),
        aliases: z.array(name).default([]),
      }),
    )
    .default([]),
  topics: z.array(z.string().trim().min(1).max(60)).default([]),
  time: z
    .object({ at: dateField, from: dateField, to: dateField })
    .default({ at: undefined, from: undefined, to: undefined }),
  turnIds: z.array(z.string().min(1)).min(1),
});
export type LlmRecord = z.infer<typeof LlmRecordSchema>;

export const LlmEncoderAnswerSchema = z.object({
  records: z.array(LlmRecordSchema),
  aliases: z.array(z.object({ alias: name, name })).default([]),
  referents: z.array(z.object({ pronoun: name, name })).default([]),
});
export type LlmEncoderAnswer = z.infer<typeof LlmEncoderAnswerSchema>;

/** Strips a Markdown code fence or prose around the JSON object, then parses it. */
export const parseJsonObject = (raw: string): unknown => {
  const text = raw.trim();
  const fenced = /^```(?:json)?\s*([\s\S]*?)\s*```$/i.exec(text);
  const body = fenced ? fenced[1]! : text;
  try {
    return JSON.parse(body);
  } catch (err) {
    const start = body.indexOf("{");
    const end = body.lastIndexOf("}");
    if (start >= 0 && end > start) {
      try {
        return JSON.parse(body.slice(start, end + 1));
      } catch {
        // fall through to the original error
      }
    }
    throw new InvalidEncoderOutput(`not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
};

const zodMessage = (err: z.ZodError): string =>
  err.issues
    .slice(0, 5)
    .map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`)
    .join("; ");

/** Parses and validates the answer; every cited turn id must be one of `allowedTurnIds`. */
export const validateAnswer = (raw: string, allowedTurnIds: ReadonlySet<string>): LlmEncoderAnswer => {
  const parsed = LlmEncoderAnswerSchema.safeParse(parseJsonObject(raw));
  if (!parsed.success) throw new InvalidEncoderOutput(`does not match the record schema: ${zodMessage(parsed.error)}`);
  parsed.data.records.forEach((r, i) => {
    const bad = r.turnIds.filter((id) => !allowedTurnIds.has(id));
    if (bad.length > 0)
      throw new InvalidEncoderOutput(
        `records.${i}.turnIds: ${bad.map((b) => JSON.stringify(b)).join(", ")} not in the segment (allowed: ${[...allowedTurnIds].join(", ")})`,
      );
  });
  return parsed.data;
};

const startOfDay = (d: string): string => `${d}T00:00:00.000Z`;
const endOfDay = (d: string): string => `${d}T23:59:59.999Z`;

/** The model's time fields as a TimeRange; a reversed range is put in order. */
const timeRange = (t: LlmRecord["time"]): TimeRange => {
  let { from, to } = t;
  if (from && to && from > to) [from, to] = [to, from];
  return {
    ...(t.at ? { at: startOfDay(t.at) } : {}),
    ...(from ? { from: startOfDay(from) } : {}),
    ...(to ? { to: endOfDay(to) } : {}),
  };
};

/** Relative date expressions left in a text ("yesterday", "last May") made absolute against saidAt. */
const resolveLeftoverDates = (text: string, saidAt: string): { text: string; time: TimeRange } => {
  const mentions = findDates(text, saidAt).filter((m) => !/\b\d{4}\b/.test(m.text));
  return mentions.length > 0 ? { text: applyDates(text, mentions), time: timeOf(mentions) } : { text, time: {} };
};

const unique = <T>(xs: readonly T[]): T[] => [...new Set(xs)];
const finish = (s: string): string => {
  const t = s.replace(/\s+/g, " ").trim();
  return /[.!?]["')]*$/.test(t) ? t : `${t}.`;
};

/**
 * Records of one segment from the validated answer records that cite its turns. Turn ids are
 * kept in segment order; a record citing turns of other segments (a batch) keeps only this
 * segment's. Ids by recordId (same text twice = one record).
 */
export const buildRecords = (
  segment: Segment,
  answer: readonly LlmRecord[],
  aliases: Readonly<Record<string, string>>,
): MemoryRecord[] => {
  const order = new Map(segment.turns.map((t, i) => [t.turnId, i]));
  const out: MemoryRecord[] = [];
  const seen = new Set<string>();
  for (const r of answer) {
    const turnIds = unique(r.turnIds.filter((id) => order.has(id))).sort((a, b) => order.get(a)! - order.get(b)!);
    if (turnIds.length === 0) continue;
    const turns = turnIds.map((id) => segment.turns[order.get(id)!] as SegmentTurn);
    const last = turns[turns.length - 1]!;
    const resolved = resolveLeftoverDates(r.text, last.timestamp);
    const text = finish(resolved.text);
    const given = timeRange(r.time);
    const time = Object.keys(given).length > 0 ? given : resolved.time;
    const id = recordId(segment.tenant, text);
    if (seen.has(id)) continue;
    seen.add(id);
    const entities = new Map<string, Entity>();
    for (const e of r.entities) {
      const canonical = Object.hasOwn(aliases, e.name) ? aliases[e.name]! : e.name;
      const prev = entities.get(canonical);
      const al = unique([...(prev?.aliases ?? []), ...e.aliases, ...(canonical !== e.name ? [e.name] : [])]).filter(
        (a) => a !== canonical,
      );
      entities.set(canonical, {
        name: canonical,
        kind: prev && prev.kind !== "other" ? prev.kind : e.kind,
        aliases: al,
      });
    }
    // The speakers a record names are people, whether or not the model listed them.
    for (const s of unique(turns.map((t) => t.speaker)))
      if (!entities.has(s) && text.includes(s)) entities.set(s, { name: s, kind: "person", aliases: [] });
    const record: MemoryRecord = {
      id,
      type: r.type,
      text,
      entities: [...entities.values()],
      topics: unique(r.topics.map((t) => t.toLowerCase().trim())).slice(0, 3),
      time,
      source: {
        tenant: segment.tenant,
        conversation: segment.conversation,
        segmentId: segment.id,
        turnIds,
        speakers: unique(turns.map((t) => t.speaker)),
        sessionId: last.sessionId,
        saidAt: last.timestamp,
      },
      valid: { from: last.timestamp },
    };
    out.push(MemoryRecordSchema.parse(record));
  }
  return out;
};

export interface ContextLimits {
  contextTokenCap: number;
  recentRecords: number;
}

const refresh = (obj: Record<string, string>, key: string, value: string): void => {
  delete obj[key];
  obj[key] = value;
};

/**
 * The context after the segment(s): the model's aliases and referents (newest last, so they are
 * evicted last), the last two speakers, the latest record texts; then capped to its token budget.
 */
export const nextContext = (
  prev: DisambiguationContext,
  segments: readonly Segment[],
  answer: LlmEncoderAnswer,
  records: readonly MemoryRecord[],
  limits: ContextLimits,
): DisambiguationContext => {
  const ctx: DisambiguationContext = {
    aliases: { ...prev.aliases },
    referents: { ...prev.referents },
    speakers: [...prev.speakers],
    recentRecords: [...prev.recentRecords],
  };
  for (const a of answer.aliases) {
    const alias = a.alias.trim();
    const full = a.name.trim();
    if (alias.toLowerCase() !== full.toLowerCase() && alias.length <= 40 && full.length <= 60)
      refresh(ctx.aliases, alias, full);
  }
  for (const r of answer.referents) {
    const pronoun = r.pronoun.trim().toLowerCase();
    const who = r.name.trim();
    if (pronoun !== who.toLowerCase() && pronoun.length <= 30 && who.length <= 60) refresh(ctx.referents, pronoun, who);
  }
  const order = [...ctx.speakers, ...segments.flatMap((s) => s.turns.map((t) => t.speaker))];
  const lastTwo: string[] = [];
  for (let k = order.length - 1; k >= 0 && lastTwo.length < 2; k--) {
    const s = order[k]!;
    if (!lastTwo.includes(s)) lastTwo.unshift(s);
  }
  ctx.speakers = lastTwo;
  ctx.recentRecords =
    limits.recentRecords > 0 ? [...ctx.recentRecords, ...records.map((r) => r.text)].slice(-limits.recentRecords) : [];
  return capContext(ctx, limits.contextTokenCap);
};
