/**
 * The LLM encoder's request: the JSON schema of its answer (docs/design.md §4 records + context updates)
 * and the prompt (session date, bounded disambiguation context, the segment's compressed turns
 * with their turn ids and speakers, relative dates pre-resolved against each turn's time).
 */
import { countTokens, truncateToTokens } from "../core/tokens.ts";
import type { DisambiguationContext, Segment, SegmentTurn } from "../core/types.ts";
import { capContext } from "./context.ts";
import { findDates } from "./dates.ts";

export const RECORD_TYPES = ["fact", "event", "preference", "plan", "relation", "other"] as const;
export const ENTITY_KINDS = ["person", "place", "organisation", "object", "other"] as const;

export interface SchemaLimits {
  /** Records per answer. */
  maxRecords: number;
  /** Characters of a record text. */
  maxTextChars: number;
}

export const DEFAULT_SCHEMA_LIMITS: SchemaLimits = { maxRecords: 24, maxTextChars: 400 };

const nullableDate = { oneOf: [{ type: "string", format: "date" }, { type: "null" }] };
const str = (maxLength: number) => ({ type: "string", minLength: 1, maxLength });

/**
 * JSON schema of the answer. Turn ids are an enum of the ids shown, so a constrained decoder
 * (grammar, strict structured output) cannot cite a turn outside the segment; the parser checks
 * it again for servers that do not enforce schemas. Every object lists all its properties as
 * required (null where unknown): the subset OpenAI's strict mode accepts.
 */
export const encoderJsonSchema = (turnIds: readonly string[], limits: SchemaLimits): Record<string, unknown> => ({
  type: "object",
  additionalProperties: false,
  required: ["records", "aliases", "referents"],
  properties: {
    records: {
      type: "array",
      maxItems: limits.maxRecords,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["type", "text", "entities", "topics", "time", "turnIds"],
        properties: {
          type: { enum: [...RECORD_TYPES] },
          text: str(limits.maxTextChars),
          entities: {
            type: "array",
            maxItems: 6,
            items: {
              type: "object",
              additionalProperties: false,
              required: ["name", "kind", "aliases"],
              properties: {
                name: str(60),
                kind: { enum: [...ENTITY_KINDS] },
                aliases: { type: "array", maxItems: 3, items: str(40) },
              },
            },
          },
          topics: { type: "array", maxItems: 3, items: str(40) },
          time: {
            type: "object",
            additionalProperties: false,
            required: ["at", "from", "to"],
            properties: { at: nullableDate, from: nullableDate, to: nullableDate },
          },
          turnIds: { type: "array", minItems: 1, maxItems: 6, items: { enum: [...turnIds] } },
        },
      },
    },
    aliases: {
      type: "array",
      maxItems: 8,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["alias", "name"],
        properties: { alias: str(40), name: str(60) },
      },
    },
    referents: {
      type: "array",
      maxItems: 6,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["pronoun", "name"],
        properties: { pronoun: str(20), name: str(60) },
      },
    },
  },
});

export const ENCODER_SYSTEM = `You write long-term memory records from a chat. Read the turns and return JSON.
Each record is one self-contained statement that a reader understands without the chat:
- name people instead of I, you, he, she, they; use full names from the context;
- write absolute dates (on 2023-05-07, in May 2023) instead of yesterday, last week, next month; the turns show the resolved date in [brackets] after a relative expression;
- type: fact, event (something that happened), preference, plan (future), relation (between people), or other;
- entities: people, places, organisations and objects the record names, with their kind and any short names (aliases);
- topics: one to three short lowercase labels;
- time: when it happens or happened, as YYYY-MM-DD: "at" for one day, "from"/"to" for a period, null when not said;
- turnIds: the ids of the turns the record comes from, exactly as shown in square brackets.
Skip greetings, thanks and small talk. Keep every fact, plan, preference and event, with names, numbers and dates.
Also return aliases (a short or informal name and the full name it stands for) and referents (a pronoun or role such as "she" or "my sister" and who it refers to) that a later part of the chat will need.
Example turn: [D1:3] Ana (2023-05-08): Went hiking with my sister Eva yesterday [yesterday = on 2023-05-07]!
Example record: {"type":"event","text":"Ana went hiking with her sister Eva on 2023-05-07.","entities":[{"name":"Ana","kind":"person","aliases":[]},{"name":"Eva","kind":"person","aliases":[]}],"topics":["hiking"],"time":{"at":"2023-05-07","from":null,"to":null},"turnIds":["D1:3"]}`;

const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const day = (iso: string): string => iso.slice(0, 10);
const weekday = (iso: string): string => WEEKDAYS[new Date(iso).getUTCDay()] ?? "";

/** Text the encoder reads for a turn: the compressed form (sensory stage), else the original. */
export const turnText = (t: SegmentTurn): string => (t.compressed.trim() !== "" ? t.compressed : t.text);

/** "yesterday" -> "yesterday [yesterday = on 2023-05-07]": relative dates resolved for the model. */
export const annotateDates = (text: string, saidAt: string): string => {
  const mentions = findDates(text, saidAt).filter((m) => !/\b\d{4}\b/.test(m.text));
  let out = "";
  let pos = 0;
  for (const m of [...mentions].sort((a, b) => a.index - b.index)) {
    if (m.index < pos) continue;
    const end = m.index + m.length;
    out += `${text.slice(pos, end)} [${m.text} = ${m.phrase.replace(/^([A-Z])/, (c) => c.toLowerCase())}]`;
    pos = end;
  }
  return out + text.slice(pos);
};

/** The bounded context as prompt lines (after capping it to its token budget). */
export const renderContext = (ctx: DisambiguationContext, cap: number): string => {
  const c = capContext(ctx, cap);
  const lines: string[] = [];
  if (c.speakers.length > 0) lines.push(`Speakers so far: ${c.speakers.join(", ")}`);
  const aliases = Object.entries(c.aliases);
  if (aliases.length > 0) lines.push(`Aliases: ${aliases.map(([a, n]) => `${a} = ${n}`).join("; ")}`);
  const refs = Object.entries(c.referents);
  if (refs.length > 0) lines.push(`Referents: ${refs.map(([p, n]) => `${p} = ${n}`).join("; ")}`);
  if (c.recentRecords.length > 0) lines.push("Recent records:", ...c.recentRecords.map((r) => `- ${r}`));
  return lines.length > 0 ? lines.join("\n") : "(none)";
};

/** One turn line: `[turnId] Speaker (YYYY-MM-DD): text`, at most maxTurnTokens of text. */
export const renderTurn = (t: SegmentTurn, maxTurnTokens: number): string => {
  const text = annotateDates(turnText(t).replace(/\s+/g, " ").trim(), t.timestamp);
  const bounded = countTokens(text) > maxTurnTokens ? `${truncateToTokens(text, maxTurnTokens)}…` : text;
  return `[${t.turnId}] ${t.speaker} (${day(t.timestamp)}): ${bounded}`;
};

export interface PromptOptions {
  contextTokenCap: number;
  maxTurnTokens: number;
}

/** The user message for one segment or a batch of segments (one call). */
export const encoderUserPrompt = (
  segments: readonly Segment[],
  ctx: DisambiguationContext,
  opts: PromptOptions,
): string => {
  const first = segments[0]!;
  const parts = [
    `Session date: ${day(first.start)} (${weekday(first.start)})`,
    "",
    "Context from earlier in the chat:",
    renderContext(ctx, opts.contextTokenCap),
    "",
  ];
  segments.forEach((s, i) => {
    parts.push(segments.length > 1 ? `Segment ${i + 1} of ${segments.length}:` : "Segment:");
    for (const t of s.turns) parts.push(renderTurn(t, opts.maxTurnTokens));
    parts.push("");
  });
  parts.push("Return the records of these turns as JSON.");
  return parts.join("\n");
};
