/**
 * Attribute slots of a statement: where someone lives, works, what as, what they like and their
 * favourites, found with small general English patterns (nothing here names a dataset sentence).
 * Two statements about the same subject and slot with different values are a change of state,
 * even when they share no topic word.
 */
import type { RecordType } from "../types.ts";
import { contentTokens } from "./content-tokens.ts";
import { namePattern } from "./names.ts";
import { normaliseStatement } from "./normalise.ts";

export type SlotKind = "location" | "employer" | "role" | "preference" | "favorite";

/** One attribute claim of a statement, e.g. location = denver (current), preference sushi (negative). */
export interface Slot {
  kind: SlotKind;
  /** The attribute: the kind, plus the thing for favourites ("favorite band"). */
  key: string;
  /** Content tokens of the value (place, employer, role, liked object, favourite); empty when unknown. */
  value: string[];
  /** +1 holds, -1 no longer / does not hold (left a job, doesn't like X anymore). */
  polarity: 1 | -1;
  /** A claim about the present state (false for history: "lived in", and for plans). */
  current: boolean;
}

/** Words that end a value phrase ("works at Google as a designer": the employer is "Google"). */
const VALUE_STOP = new Set([
  "is",
  "are",
  "was",
  "were",
  "be",
  "been",
  "has",
  "have",
  "had",
  "will",
  "would",
  "can",
  "could",
  "should",
  "and",
  "but",
  "as",
  "in",
  "on",
  "at",
  "since",
  "for",
  "with",
  "because",
  "where",
  "who",
  "which",
  "that",
  "when",
  "while",
  "to",
  "from",
  "after",
  "before",
  "during",
  "now",
  "anymore",
  "again",
  "so",
  "then",
  "last",
  "next",
  "this",
  "every",
  "until",
  "though",
  "although",
  "or",
  "instead",
  "too",
  "either",
  "nowadays",
  "these",
  "lately",
  "recently",
  "any",
  "no",
  "if",
]);
const DETERMINER = /^(?:a|an|the|his|her|their|its|our|my|your|some|[\p{Lu}][\p{L}'-]*'s)$/u;
const PRONOUN_OBJECT = new Set(["it", "them", "that", "this", "those", "these", "him", "her", "one", "so", "much"]);

interface Phrase {
  words: string[];
  /** At least one word is capitalised (a name: a place, an organisation). */
  proper: boolean;
}

/** Up to `max` words after `from` in the original text, stopping at punctuation or a clause word. */
const phraseAt = (text: string, from: number, max = 5): Phrase => {
  const rest = text.slice(from);
  const clause = rest.split(/[.,;:!?()"\n]| - /)[0] ?? "";
  const words: string[] = [];
  let proper = false;
  for (const w of clause.trim().split(/\s+/).filter(Boolean)) {
    const lower = w.toLowerCase();
    if (!/[\p{L}\p{N}]/u.test(w)) break; // a dash or other punctuation ends the phrase
    if (words.length === 0 && DETERMINER.test(w)) continue;
    if (VALUE_STOP.has(lower) || /^\d{4}-\d{2}-\d{2}$/.test(w)) break;
    if (/^\p{Lu}/u.test(w)) proper = true;
    words.push(w);
    if (words.length >= max) break;
  }
  return { words, proper };
};

const valueTokens = (p: Phrase): string[] => contentTokens(normaliseStatement(p.words.join(" ")));

interface SlotRule {
  kind: SlotKind;
  re: RegExp;
  polarity: 1 | -1;
  current: boolean;
  /** The value must be a name (capitalised): keeps "moved into a new flat" from being a city. */
  proper?: boolean;
  /** The value is optional ("lost his job" names no employer; "lost his job at X" does). */
  optionalValue?: boolean;
}

const LOCATION: SlotRule[] = [
  {
    kind: "location",
    re: /\b(?:lives|live|is living|are living|now lives|resides|reside|is based|are based|is settled|has settled|settled down|settled|is staying|calls home)\s+(?:now\s+|currently\s+)?(?:in|at)\s+/gi,
    polarity: 1,
    current: true,
    proper: true,
  },
  {
    kind: "location",
    re: /\b(?:moved|has moved|have moved|just moved|relocated|has relocated|is moving|are moving|moving)\s+(?:back\s+)?(?:to|into|in)\s+/gi,
    polarity: 1,
    current: true,
    proper: true,
  },
  {
    kind: "location",
    re: /\b(?:lived|used to live|was living|grew up|was born)\s+(?:in|at)\s+/gi,
    polarity: 1,
    current: false,
    proper: true,
  },
];

const EMPLOYER: SlotRule[] = [
  {
    kind: "employer",
    re: /\b(?:works|work|is working|are working|now works|started working|began working|has been working|is employed|got a (?:new )?job|took a (?:new )?job|has a (?:new )?job|landed a (?:new )?job|started a (?:new )?job|accepted a (?:new )?(?:job|position)|got hired|was hired|is interning|started an internship)\s+(?:now\s+)?(?:\w+\s+){0,3}?(?:at|for|by)\s+/gi,
    polarity: 1,
    current: true,
  },
  { kind: "employer", re: /\b(?:joined|now works at|now works for)\s+/gi, polarity: 1, current: true, proper: true },
  {
    kind: "employer",
    re: /\b(?:left|quit|resigned from|retired from|was fired from|got fired from|was laid off from|got laid off from|stopped working (?:at|for)|no longer works (?:at|for)|doesn't work (?:at|for)|does not work (?:at|for))\s+/gi,
    polarity: -1,
    current: true,
    proper: true,
  },
  {
    kind: "employer",
    re: /\b(?:lost|quit|left)\s+(?:[\p{L}]+'s\s+|his\s+|her\s+|their\s+|a\s+|the\s+)?(?:job|position|role)\b(?:\s+(?:at|with)\s+)?/giu,
    polarity: -1,
    current: true,
    proper: true,
    optionalValue: true,
  },
  {
    kind: "employer",
    re: /\b(?:used to work|worked)\s+(?:\w+\s+){0,2}?(?:at|for)\s+/gi,
    polarity: 1,
    current: false,
  },
];

/** "works at home", "works at night": not employers. */
const EMPLOYER_NOT = new Set(["home", "night", "moment", "least", "first", "weekend", "time"]);

const ROLE: SlotRule[] = [
  {
    kind: "role",
    re: /\b(?:works|work|is working|started working|now works|got a job|took a job|has a job|is employed|was hired|got hired)\s+as\s+/gi,
    polarity: 1,
    current: true,
  },
  { kind: "role", re: /\b(?:job|position|career|role)\s+as\s+/gi, polarity: 1, current: true },
  { kind: "role", re: /\bbecame\s+/gi, polarity: 1, current: true },
];

const PREF_POSITIVE =
  /\b(?:loves|love|likes|like|enjoys|enjoy|adores|adore|prefers|prefer|is (?:really |very |so )?into|are into|is (?:a )?(?:big |huge )?fan of|is passionate about|is obsessed with|is fond of|is keen on)\s+/gi;
const PREF_NEGATIVE =
  /\b(?:hates|hate|dislikes|dislike|detests|can't stand|cannot stand|is tired of|is sick of|got tired of|lost interest in|has gone off)\s+/gi;
const PREF_STOPPED = /\b(?:stopped|quit)\s+(?:liking|loving|enjoying)\s+/gi;
const PREF_USED_TO = /\bused to\s+(?:love|like|enjoy|adore)\s+/gi;
const NEGATORS =
  /(?:\bdoesn't|\bdoes not|\bdon't|\bdo not|\bno longer|\bnever|\bnot|\bisn't|\bis not|\baren't|\bnow not)\s+(?:\w+\s+)?$/i;
const AFTER_NEGATION = /^[^.;!?]*?\b(?:anymore|any more|no more|these days not)\b/i;

const FAVORITE = /\b(?:favou?rite|fave)\s+((?:[\p{L}-]+\s+){0,2}?[\p{L}-]+)\s+(?:is|are)\s+/giu;

/** A name mentioned in the statement that can own a claim (a person or other non-place entity). */
export interface Owner {
  name: string;
  key: string;
}

/**
 * Whose claim a match at `at` is: the owner named last before it in the same sentence. A claim of
 * someone other than the subject ("Ana lives in Boston and Ben lives in Denver": the second) is
 * not the subject's.
 */
const ownedBySubject = (text: string, at: number, owners: readonly Owner[], subject: string): boolean => {
  const sentenceStart = Math.max(0, text.lastIndexOf(". ", at) + 1);
  const before = text.slice(sentenceStart, at);
  let last: { at: number; key: string } | undefined;
  for (const o of owners) {
    const re = namePattern(o.name, "giu");
    for (const m of before.matchAll(re)) if (!last || (m.index ?? 0) > last.at) last = { at: m.index ?? 0, key: o.key };
  }
  return !last || subject.split(/[\s']+/).includes(last.key.split(" ")[0] ?? "") || subject.includes(last.key);
};

/** A job ending just before a job phrase. */
const ENDED_BEFORE = /\b(?:lost|lose|losing|quit|quitting|left|leaving|fired|laid off)\b[^.;!?]*$/i;

/** Words before "like" that make it a comparison or a wish, not a preference ("it's like air", "would like"). */
const NOT_PREFERENCE_BEFORE =
  /(?:would|'d|feel|feels|felt|look|looks|looked|seem|seems|sound|sounds|just|much|more|less|is|are|was|were|be|been|'s|'re|it|that|this|something|anything|nothing|kind of|sort of|exactly|used to)\s+$/i;

/**
 * The attribute slots a statement claims for its subject. `owners` are the names that can own a
 * claim (people and other non-place entities, with their keys); a claim owned by another name is
 * left out. A plan's claims are not current.
 */
export const slotsFrom = (text: string, type: RecordType, owners: readonly Owner[], subject: string): Slot[] => {
  const out: Slot[] = [];
  const plan = type === "plan";
  const push = (slot: Slot): void => {
    if (!out.some((s) => s.key === slot.key && s.polarity === slot.polarity && s.value.join() === slot.value.join()))
      out.push(slot);
  };
  const mine = (at: number): boolean => ownedBySubject(text, at, owners, subject);
  for (const rule of [...LOCATION, ...EMPLOYER, ...ROLE]) {
    for (const m of text.matchAll(rule.re)) {
      if (!mine(m.index ?? 0)) continue;
      // "lost Jon's job as a banker": not a job held.
      if (rule.polarity === 1 && ENDED_BEFORE.test(text.slice(Math.max(0, (m.index ?? 0) - 30), m.index ?? 0)))
        continue;
      const end = (m.index ?? 0) + m[0].length;
      const phrase = phraseAt(text, end, rule.kind === "role" ? 4 : 5);
      let value = rule.proper && !phrase.proper ? [] : valueTokens(phrase);
      if (value.every((v) => PRONOUN_OBJECT.has(v))) value = [];
      if (rule.kind === "employer" && value.some((v) => EMPLOYER_NOT.has(v))) value = [];
      if (value.length === 0 && !rule.optionalValue) continue;
      // "lost Jon's job as a banker": the role ended too.
      if (rule.optionalValue) {
        const as = /^\s*as\s+/i.exec(text.slice(end));
        if (as) {
          const role = valueTokens(phraseAt(text, end + as[0].length, 4));
          if (role.length > 0) push({ kind: "role", key: "role", value: role, polarity: -1, current: !plan });
        }
      }
      push({ kind: rule.kind, key: rule.kind, value, polarity: rule.polarity, current: rule.current && !plan });
    }
  }
  const prefs: { re: RegExp; polarity: 1 | -1; negatable: boolean }[] = [
    { re: PREF_POSITIVE, polarity: 1, negatable: true },
    { re: PREF_NEGATIVE, polarity: -1, negatable: true },
    { re: PREF_STOPPED, polarity: -1, negatable: false },
    { re: PREF_USED_TO, polarity: -1, negatable: false },
  ];
  for (const p of prefs) {
    for (const m of text.matchAll(p.re)) {
      const start = m.index ?? 0;
      if (!mine(start)) continue;
      const end = start + m[0].length;
      // "would like to", "feels like", "it's like", "just like": not a preference; "used to love" is handled apart.
      if (p.negatable && NOT_PREFERENCE_BEFORE.test(text.slice(Math.max(0, start - 20), start))) continue;
      let after = end;
      const inf = /^to\s+/i.exec(text.slice(after));
      if (inf) after += inf[0].length;
      const value = valueTokens(phraseAt(text, after, 4));
      if (value.length === 0 || value.every((v) => PRONOUN_OBJECT.has(v))) continue;
      let polarity = p.polarity;
      if (p.negatable) {
        const negBefore = NEGATORS.test(text.slice(Math.max(0, start - 30), start));
        const negAfter = AFTER_NEGATION.test(text.slice(end));
        if (negBefore || negAfter) polarity = polarity === 1 ? -1 : 1;
      }
      push({ kind: "preference", key: "preference", value, polarity, current: !plan });
    }
  }
  for (const m of text.matchAll(FAVORITE)) {
    if (!mine(m.index ?? 0)) continue;
    const thing = contentTokens(normaliseStatement(m[1] ?? ""));
    const value = valueTokens(phraseAt(text, (m.index ?? 0) + m[0].length, 5));
    if (thing.length === 0 || value.length === 0) continue;
    push({ kind: "favorite", key: `favorite ${thing.join(" ")}`, value, polarity: 1, current: !plan });
  }
  return out;
};
