/**
 * Pure analysis of a record's statement for consolidation: the statement without its
 * "<Speaker> (<date>): " prefix, a normalised form, content tokens, the subject, negation, numbers,
 * and attribute slots (where someone lives, works, what they like) found with small lexicons.
 * Nothing here names a dataset sentence: the lexicons are general English patterns.
 */
import type { MemoryRecord, RecordType } from "../core/types.ts";
import { BASE_VERBS, STOP_WORDS } from "../encoder/lexicon.ts";

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

const PREFIX =
  /^[^\n(]{1,120}?\s\(\d{4}-\d{2}-\d{2}\)(?:,\s*(?:asked|told) by [^":]{1,120}?\s*"(?:[^"\\]|\\.){0,2000}")?:\s*/;

/** The statement of a record: its text without the "<Speaker> (<YYYY-MM-DD>): " prefix. */
export const statementText = (text: string): string => text.replace(PREFIX, "").trim();

const SPELLING: Record<string, string> = {
  favourite: "favorite",
  favourites: "favorites",
  colour: "color",
  colours: "colors",
  neighbour: "neighbor",
  neighbours: "neighbors",
  centre: "center",
  theatre: "theater",
  travelling: "traveling",
  travelled: "traveled",
  organise: "organize",
  organised: "organized",
  realise: "realize",
  realised: "realized",
  apologise: "apologize",
  practise: "practice",
  grey: "gray",
  mum: "mom",
  fave: "favorite",
};

const NUMBER_WORDS: Record<string, string> = {
  zero: "0",
  one: "1",
  two: "2",
  three: "3",
  four: "4",
  five: "5",
  six: "6",
  seven: "7",
  eight: "8",
  nine: "9",
  ten: "10",
  eleven: "11",
  twelve: "12",
  twenty: "20",
  thirty: "30",
  forty: "40",
  fifty: "50",
  hundred: "100",
};

/** Normalised key for names (entities, subjects). */
export const nameKey = (s: string): string =>
  s.normalize("NFKC").toLowerCase().replace(/[’`]/g, "'").replace(/'s$/, "").replace(/\s+/g, " ").trim();

export const normaliseStatement = (text: string): string =>
  text
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[’`]/g, "'")
    .replace(/\b\d{4}-\d{2}-\d{2}\b/g, " ")
    .replace(/[^\p{L}\p{N}'\s]+/gu, " ")
    .split(/\s+/)
    .filter(Boolean)
    .map((w) => SPELLING[w] ?? w)
    .join(" ");

/** Light stemming: plural / -ing / -ed / -es and a final e dropped, so "lives", "living", "lived" meet. */
export const stem = (word: string): string => {
  let w = word.replace(/'s$/, "").replace(/'$/, "");
  if (w.length > 5 && w.endsWith("ies")) w = `${w.slice(0, -3)}y`;
  else if (w.length > 5 && w.endsWith("ing")) w = w.slice(0, -3);
  else if (w.length > 4 && w.endsWith("ed")) w = w.slice(0, -2);
  else if (w.length > 4 && /(?:ss|x|ch|sh)es$/.test(w)) w = w.slice(0, -2);
  else if (w.length > 3 && w.endsWith("s") && !/(?:ss|us|is)$/.test(w)) w = w.slice(0, -1);
  if (w.length > 3 && w.endsWith("e")) w = w.slice(0, -1);
  // Doubled final consonant of -ing/-ed forms ("planning" -> "plann" -> "plan").
  if (w.length > 3 && /([b-df-hj-np-tv-z])\1$/.test(w) && !/(?:ll|ss|ff|zz)$/.test(w)) w = w.slice(0, -1);
  return w;
};

const NEGATION_WORDS = new Set([
  "not",
  "no",
  "never",
  "nobody",
  "nothing",
  "none",
  "neither",
  "nor",
  "anymore",
  "cannot",
]);

const isNegationToken = (w: string): boolean => NEGATION_WORDS.has(w) || w.endsWith("n't");

const negatedText = (norm: string): boolean =>
  norm.split(" ").some(isNegationToken) || /\bno longer\b|\bany more\b|\bused to\b|\bstopped\b/.test(norm);

const numbersOf = (norm: string): string[] => {
  const out = new Set<string>();
  for (const w of norm.split(" ")) {
    if (/^\d+(?:\.\d+)?$/.test(w)) out.add(String(Number(w)));
    else if (NUMBER_WORDS[w]) out.add(NUMBER_WORDS[w] as string);
  }
  return [...out].sort();
};

/** Stop words, negations and number words do not count as content (negation and numbers are compared apart). */
export const contentTokens = (norm: string, exclude: ReadonlySet<string> = new Set()): string[] => {
  const out = new Set<string>();
  for (const raw of norm.split(" ")) {
    const w = raw.replace(/'s$/, "").replace(/'$/, "");
    if (w.length < 2 || STOP_WORDS.has(raw) || STOP_WORDS.has(w) || isNegationToken(w) || NUMBER_WORDS[w]) continue;
    if (/^\d+(?:\.\d+)?$/.test(w) || exclude.has(w)) continue;
    out.add(stem(w));
  }
  return [...out];
};

// ---------------------------------------------------------------------------------------------
// Attribute slots

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

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

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

/** A name mentioned in the statement that can own a claim (a person or other non-place entity). */
interface Owner {
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
    const re = new RegExp(`(?<![\\p{L}\\p{N}])${escapeRe(o.name)}(?![\\p{L}\\p{N}])`, "giu");
    for (const m of before.matchAll(re)) if (!last || (m.index ?? 0) > last.at) last = { at: m.index ?? 0, key: o.key };
  }
  return !last || subject.split(/[\s']+/).includes(last.key.split(" ")[0] ?? "") || subject.includes(last.key);
};

/** A job ending just before a job phrase. */
const ENDED_BEFORE = /\b(?:lost|lose|losing|quit|quitting|left|leaving|fired|laid off)\b[^.;!?]*$/i;

/** Words before "like" that make it a comparison or a wish, not a preference ("it's like air", "would like"). */
const NOT_PREFERENCE_BEFORE =
  /(?:would|'d|feel|feels|felt|look|looks|looked|seem|seems|sound|sounds|just|much|more|less|is|are|was|were|be|been|'s|'re|it|that|this|something|anything|nothing|kind of|sort of|exactly|used to)\s+$/i;

const slotsFrom = (text: string, type: RecordType, owners: readonly Owner[], subject: string): Slot[] => {
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

// ---------------------------------------------------------------------------------------------

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
    const m = new RegExp(`(?<![\\p{L}\\p{N}])${escapeRe(n.name)}(?![\\p{L}\\p{N}])`, "iu").exec(text);
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

// ---------------------------------------------------------------------------------------------
// Similarity measures

const trigrams = (s: string): Map<string, number> => {
  const padded = ` ${s} `;
  const out = new Map<string, number>();
  for (let i = 0; i + 3 <= padded.length; i++) {
    const g = padded.slice(i, i + 3);
    out.set(g, (out.get(g) ?? 0) + 1);
  }
  return out;
};

/** Sørensen–Dice over character trigrams (multiset): 1 for identical strings. */
export const trigramDice = (a: string, b: string): number => {
  if (a === b) return 1;
  const ga = trigrams(a);
  const gb = trigrams(b);
  let inter = 0;
  let na = 0;
  let nb = 0;
  for (const n of ga.values()) na += n;
  for (const n of gb.values()) nb += n;
  for (const [g, n] of ga) inter += Math.min(n, gb.get(g) ?? 0);
  return na + nb === 0 ? 0 : (2 * inter) / (na + nb);
};

export const jaccard = (a: readonly string[], b: readonly string[]): number => {
  const sa = new Set(a);
  const sb = new Set(b);
  if (sa.size === 0 && sb.size === 0) return 1;
  let inter = 0;
  for (const x of sa) if (sb.has(x)) inter++;
  return inter / (sa.size + sb.size - inter);
};

/** Share of `of` found in `in_`. */
export const coverage = (of: readonly string[], in_: readonly string[]): number => {
  const set = new Set(in_);
  const uniqueOf = new Set(of);
  if (uniqueOf.size === 0) return 0;
  let n = 0;
  for (const x of uniqueOf) if (set.has(x)) n++;
  return n / uniqueOf.size;
};

export const isSubset = (a: readonly string[], b: readonly string[]): boolean => {
  const set = new Set(b);
  return a.every((x) => set.has(x));
};

/** Two values name the same thing when one's tokens contain the other's ("Boston" and "Boston Massachusetts"). */
export const sameValue = (a: readonly string[], b: readonly string[]): boolean =>
  a.length > 0 && b.length > 0 && (isSubset(a, b) || isSubset(b, a));
