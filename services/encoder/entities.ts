/**
 * Named-entity spotting by capitalisation, with small cue-word rules for the kind, and aliases by
 * prefix ("Mel" -> "Melanie"). No gazetteer; the only gender source is the kinship table.
 */
import { KIN_FEMALE, KIN_MALE, KIN_NEUTRAL, MONTHS, PHATIC_WORDS, STOP_WORDS, WEEKDAYS } from "../core/text/lexicon.ts";
import type { Entity } from "../core/types.ts";

export type EntityKind = Entity["kind"];
export type Gender = "f" | "m";

export interface NameMention {
  name: string;
  index: number;
  kind: EntityKind;
  gender?: Gender;
}

const ORG_SUFFIX =
  /\b(?:Inc|Corp|Corporation|Co|Company|LLC|Ltd|University|College|School|Academy|Bank|Club|Foundation|Center|Centre|Institute|Group|Studio|Studios|Association|Society|Church|Hospital|Agency|Network|Labs?|Team|Records|Press|Media|Society|Council|Department|Festival)\.?$/;
const PLACE_CUE =
  /\b(?:in|to|from|near|visit|visited|visiting|around|across|through|toward|towards|into|moved to|trip to|travel(?:l?ed)? to|live in|lived in)\s+(?:the\s+)?$/i;
const ORG_CUE =
  /\b(?:work(?:s|ed|ing)?|job|intern(?:ship|ed|ing)?|hired|employed|volunteer(?:s|ed|ing)?)\s+(?:at|for|with)\s+(?:the\s+)?$/i;
const PERSON_CUE =
  /\b(?:named|called|with|met|meet|meeting|and|friend|buddy|pal|partner|mentor|coworker|colleague|neighbou?r|cousin|kid|child|boss|teacher)\s+$/i;
const PERSON_AFTER =
  /^(?:,?\s+(?:he|she|who)\b|'s\s+(?:mom|dad|house|place|birthday|wedding|family|kids?)\b|\s+(?:said|says|told|asked|thinks|thought|wants|loves|is my|was my|and I|and me)\b)/i;

/** "the LGBTQ community": a capitalised word before a common noun is a modifier, not a place. */
const modifiesNoun = (after: string): boolean => {
  const m = /^\s+(\p{Ll}+)/u.exec(after);
  return m !== null && !STOP_WORDS.has(m[1]!) && !/^(?:and|or|last|this|next|with|for)$/.test(m[1]!);
};

const CONNECTORS = new Set(["of", "de", "da", "del", "van", "von", "la", "le", "du", "der"]);
const NAME_TOKEN = /^[A-Z][\p{L}-]*$|^[A-Z]{2,}[\p{L}]*$/u;

const skipWord = (w: string): boolean => {
  const l = w.toLowerCase();
  return (
    l === "i" ||
    l.startsWith("i'") ||
    STOP_WORDS.has(l) ||
    PHATIC_WORDS.has(l) ||
    MONTHS.has(l) ||
    WEEKDAYS.has(l) ||
    KIN_FEMALE.has(l) ||
    KIN_MALE.has(l) ||
    /^(?:ha)+h?$|^lol+$|^omg$|^aw+$/.test(l)
  );
};

/** Capitalised words that occur after the first word of some sentence: evidence of a proper noun. */
export const midSentenceCaps = (sentences: readonly string[]): Set<string> => {
  const out = new Set<string>();
  for (const s of sentences) {
    const toks = s.match(/[\p{L}][\p{L}'-]*/gu) ?? [];
    for (let i = 1; i < toks.length; i++) {
      const t = toks[i]!.replace(/'s$/, "");
      if (NAME_TOKEN.test(t) && !skipWord(t)) out.add(t);
    }
  }
  return out;
};

export interface NameContext {
  /** Speakers and other people known from the context (canonical names). */
  people: ReadonlySet<string>;
  /** Capitalised words seen mid-sentence in the segment. */
  midCaps: ReadonlySet<string>;
}

/** Capitalised names in a sentence, with a kind and (only from a kinship word) a gender. */
export const findNames = (sentence: string, ctx: NameContext): NameMention[] => {
  const out: NameMention[] = [];
  const re = /[\p{L}][\p{L}'-]*/gu;
  const toks: { w: string; i: number }[] = [];
  for (let m = re.exec(sentence); m; m = re.exec(sentence)) toks.push({ w: m[0], i: m.index });
  let k = 0;
  while (k < toks.length) {
    const kStart = k;
    const first = toks[k]!;
    const w0 = first.w.replace(/'s$/, "");
    if (!NAME_TOKEN.test(w0) || skipWord(w0)) {
      k++;
      continue;
    }
    // Extend over capitalised words and connectors ("University of Michigan").
    let end = k;
    let j = k + 1;
    while (j < toks.length) {
      const t = toks[j]!.w;
      const between = sentence.slice(toks[j - 1]!.i + toks[j - 1]!.w.length, toks[j]!.i);
      if (!/^ +$/.test(between) || toks[j - 1]!.w.endsWith("'s")) break;
      if (NAME_TOKEN.test(t.replace(/'s$/, "")) && !skipWord(t.replace(/'s$/, ""))) {
        end = j;
        j++;
      } else if (CONNECTORS.has(t) && j + 1 < toks.length && NAME_TOKEN.test(toks[j + 1]!.w)) {
        j++;
      } else break;
    }
    const startI = first.i;
    const last = toks[end]!;
    const name = sentence.slice(startI, last.i + last.w.length).replace(/'s$/, "");
    k = end + 1;
    const single = end === kStart;
    const before = sentence.slice(0, startI);
    const sentenceInitial = /^[\s"'(]*$/.test(before) || /[.!?:]\s*$/.test(before);
    if (single && sentenceInitial && !ctx.people.has(name) && !ctx.midCaps.has(name)) continue;
    const after = sentence.slice(startI + name.length);
    let kind: EntityKind = "other";
    let gender: Gender | undefined;
    const prevWord = (/([\p{L}]+)\s+$/u.exec(before)?.[1] ?? "").toLowerCase();
    const apposition = /^,?\s+(?:my|our|his|her|their)\s+([\p{L}]+)/u.exec(after)?.[1]?.toLowerCase() ?? "";
    const kin = KIN_FEMALE.has(prevWord) || KIN_MALE.has(prevWord) || KIN_NEUTRAL.has(prevWord) ? prevWord : apposition;
    if (ctx.people.has(name)) kind = "person";
    else if (ORG_SUFFIX.test(name) || ORG_CUE.test(before)) kind = "organisation";
    else if (KIN_FEMALE.has(kin) || KIN_MALE.has(kin) || KIN_NEUTRAL.has(kin)) kind = "person";
    else if (PLACE_CUE.test(before) && !modifiesNoun(after)) kind = "place";
    else if (PERSON_CUE.test(before) || PERSON_AFTER.test(after)) kind = "person";
    if (KIN_FEMALE.has(kin)) gender = "f";
    else if (KIN_MALE.has(kin)) gender = "m";
    out.push(gender ? { name, index: startI, kind, gender } : { name, index: startI, kind });
  }
  return out;
};

/**
 * Alias of a name among known canonical names: a strict prefix of at least 3 letters of a
 * single-word name ("Mel" -> "Melanie"), or the first word of a multi-word name ("Gina" ->
 * "Gina Smith"). Returns the canonical name, or undefined.
 */
export const aliasOf = (name: string, canonical: readonly string[]): string | undefined => {
  if (name.length < 3) return undefined;
  const hits = canonical.filter(
    (c) => c !== name && ((c.startsWith(name) && /^\p{Ll}/u.test(c.slice(name.length))) || c.startsWith(`${name} `)),
  );
  return hits.length === 1 ? hits[0] : undefined;
};
