/**
 * Pure analysis of a record's statement, shared by the indexer (update candidates) and the
 * consolidator (merge / refine / supersede rules): the statement without its record-text prefix, a
 * normalised form, content tokens, the subject, negation, numbers, the other entities and the
 * attribute slots. Deterministic: no clock, no I/O.
 */
import type { MemoryRecord, RecordType } from "../types.ts";
import { contentTokens, negatedText, numbersOf } from "./content-tokens.ts";
import { BASE_VERBS, STOP_WORDS } from "./lexicon.ts";
import { nameKey, namePattern } from "./names.ts";
import { normaliseStatement } from "./normalise.ts";
import { statementText } from "./record-text.ts";
import { type Slot, slotsFrom } from "./slots.ts";

export interface Statement {
  /** The statement without the record's speaker/date prefix. */
  text: string;
  /** Lower case, spelling variants unified, ISO dates and punctuation removed. */
  norm: string;
  /** Content tokens (stop words and the subject removed, light stemming), unique. */
  tokens: string[];
  /** Normalised subject: the entity the statement starts with, else the first speaker. */
  subject: string;
  negated: boolean;
  numbers: string[];
  /** Normalised names and aliases of the record's entities other than the subject. */
  entities: string[];
  slots: Slot[];
  type: RecordType;
}

const isVerbForm = (w: string): boolean =>
  BASE_VERBS.has(w) ||
  (w.endsWith("s") && BASE_VERBS.has(w.slice(0, -1))) ||
  (w.endsWith("es") && BASE_VERBS.has(w.slice(0, -2))) ||
  (w.length > 4 && /(?:ed|ing)$/.test(w));

/** What a possessive subject owns: "Ana's favourite band is ..." -> "favorite band"; "Ana's sister Cleo works" -> "sister cleo". */
const possessed = (rest: string): string => {
  const out: string[] = [];
  for (const raw of rest.split(/\s+/)) {
    const w = normaliseStatement(raw);
    if (!w || /[.,;:!?]/.test(raw.slice(0, -1)) || STOP_WORDS.has(w) || isVerbForm(w)) break;
    out.push(w);
    if (/[.,;:!?]$/.test(raw) || out.length >= 3) break;
  }
  return out.join(" ");
};

/**
 * The subject of a statement: the entity it starts with ("Ana's favourite band ..." -> ana); else
 * the person named first in it ("Lately, Ana has been ..."); else the first speaker.
 */
const subjectOf = (record: MemoryRecord, text: string): string => {
  const names: { key: string; name: string; person: boolean }[] = [];
  for (const e of record.entities) {
    const person = e.kind === "person";
    names.push({ key: nameKey(e.name), name: e.name, person });
    for (const a of e.aliases ?? []) names.push({ key: nameKey(e.name), name: a, person });
  }
  names.sort((a, b) => b.name.length - a.name.length);
  const lower = text.toLowerCase();
  for (const n of names) {
    const name = n.name.toLowerCase();
    if (!name || !lower.startsWith(name) || /[\p{L}\p{N}]/u.test(lower.charAt(name.length))) continue;
    const poss = /^['’]s\s+/.exec(text.slice(name.length));
    const owned = poss ? possessed(text.slice(name.length + poss[0].length)) : "";
    return owned ? `${n.key}'s ${owned}` : n.key;
  }
  let first: { at: number; key: string } | undefined;
  for (const n of names) {
    if (!n.person || !n.name) continue;
    const m = namePattern(n.name, "iu").exec(text);
    if (m && (!first || m.index < first.at)) first = { at: m.index, key: n.key };
  }
  return first?.key ?? nameKey(record.source.speakers[0] ?? "");
};

/** Analyses a record's statement (pure, deterministic). */
export const analyse = (record: MemoryRecord): Statement => {
  const text = statementText(record.text);
  const norm = normaliseStatement(text);
  const subject = subjectOf(record, text);
  // Names are compared as entities, not as content words.
  const exclude = new Set((subject.split("'s ")[0] ?? "").split(" ").filter(Boolean));
  const entities = new Set<string>();
  for (const e of record.entities) {
    const key = nameKey(e.name);
    for (const w of [key, ...(e.aliases ?? []).map(nameKey)].flatMap((n) => n.split(" "))) if (w) exclude.add(w);
    if (key && key !== subject) entities.add(key);
  }
  return {
    text,
    norm,
    tokens: contentTokens(norm, exclude),
    subject,
    negated: negatedText(norm),
    numbers: numbersOf(norm),
    entities: [...entities].sort(),
    slots: slotsFrom(
      text,
      record.type,
      record.entities
        .filter((e) => e.kind !== "place" && e.kind !== "organisation")
        .flatMap((e) => [e.name, ...(e.aliases ?? [])].map((name) => ({ name, key: nameKey(e.name) }))),
      subject,
    ),
    type: record.type,
  };
};
