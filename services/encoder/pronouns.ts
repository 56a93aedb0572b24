/**
 * Pronoun resolution by token rewriting:
 * - first person -> the speaker ("I'm" -> "Jon is", "my" -> "Jon's", "I love" -> "Jon loves");
 * - second person -> the addressee, when there is one ("you're" -> "Gina is");
 * - he/she/they -> the referent chosen by the caller (or left in place);
 * - we/us/our -> "<speaker> and <addressee>" only when the caller says so.
 * Verb agreement is fixed for a small set of auxiliaries and common base verbs only.
 */
import { BASE_VERBS, MODALS, SUBJECT_ADVERBS } from "../core/text/lexicon.ts";

export interface PronounFrame {
  speaker: string;
  addressee?: string;
  he?: string;
  she?: string;
  they?: string;
  we?: string;
}

export const possessive = (name: string): string => (/\s/.test(name) && /s$/.test(name) ? `${name}'` : `${name}'s`);

const THIRD_SG: Record<string, string> = {
  am: "is",
  are: "is",
  were: "was",
  have: "has",
  do: "does",
  "don't": "doesn't",
  "haven't": "hasn't",
  "aren't": "isn't",
  "weren't": "wasn't",
};

const conjugate = (verb: string): string => {
  const l = verb.toLowerCase();
  const fixed = THIRD_SG[l];
  if (fixed) return fixed;
  if (l === "go") return "goes";
  if (/(?:s|sh|ch|x|z|o)$/.test(l)) return `${verb}es`;
  if (/[^aeiou]y$/.test(l)) return `${verb.slice(0, -1)}ies`;
  return `${verb}s`;
};

const CLAUSE_START = new Set([
  "and",
  "but",
  "so",
  "if",
  "when",
  "because",
  "that",
  "since",
  "as",
  "or",
  "while",
  "though",
  "although",
  "how",
  "what",
  "why",
  "where",
  "who",
  "cause",
  "cuz",
  "until",
  "unless",
  "whether",
  "then",
]);

const OBJECT_FOLLOWER_EXCEPTIONS = new Set([
  "own",
  "new",
  "best",
  "other",
  "next",
  "old",
  "first",
  "last",
  "little",
  "big",
  "whole",
  "favorite",
  "favourite",
  "dear",
  "most",
]);
const OBJECT_FOLLOWERS = new Set([
  "a",
  "an",
  "the",
  "to",
  "for",
  "with",
  "about",
  "at",
  "in",
  "on",
  "and",
  "or",
  "but",
  "that",
  "this",
  "so",
  "up",
  "out",
  "back",
  "off",
  "how",
  "what",
  "when",
  "if",
  "too",
  "again",
  "yesterday",
  "today",
  "tomorrow",
  "some",
  "any",
  "all",
  "know",
  "is",
  "was",
  "as",
  "from",
  "by",
  "into",
  "over",
  "there",
  "here",
  "now",
  "then",
  "more",
  "much",
  "very",
  "really",
  "just",
  "since",
  "because",
  "after",
  "before",
  "while",
  "who",
  "which",
  "feel",
  "go",
  "get",
  "be",
  "do",
  "have",
]);

const CAUSATIVES = new Set([
  "help",
  "helps",
  "helped",
  "let",
  "lets",
  "make",
  "makes",
  "made",
  "watch",
  "watched",
  "hear",
  "heard",
]);

type Parts = string[];

const isWordIdx = (parts: Parts, p: number): boolean => p >= 0 && p < parts.length && p % 2 === 1;
/** Index of the next word if only spaces separate it from word p. */
const nextWord = (parts: Parts, p: number): number =>
  isWordIdx(parts, p + 2) && /^ +$/.test(parts[p + 1] ?? "") ? p + 2 : -1;
const prevWord = (parts: Parts, p: number): number =>
  isWordIdx(parts, p - 2) && /^ +$/.test(parts[p - 1] ?? "") ? p - 2 : -1;
const low = (parts: Parts, p: number): string => (p >= 0 ? (parts[p] ?? "").toLowerCase() : "");

/** Fix the verb after a new third-person-singular subject at word p. */
const agreeForward = (parts: Parts, p: number): void => {
  let q = nextWord(parts, p);
  while (q >= 0 && SUBJECT_ADVERBS.has(low(parts, q))) q = nextWord(parts, q);
  if (q < 0) return;
  const v = low(parts, q);
  if (THIRD_SG[v]) {
    parts[q] = THIRD_SG[v]!;
    return;
  }
  if (MODALS.has(v)) return;
  if (v === "wanna") parts[q] = "wants to";
  else if (v === "gotta") parts[q] = "has to";
  if (BASE_VERBS.has(v)) parts[q] = conjugate(parts[q]!);
};

/** "are you" / "do I" (question inversion): fix the auxiliary before the subject at word p. */
const agreeBackward = (parts: Parts, p: number, question: boolean): boolean => {
  if (!question) return false;
  const q = prevWord(parts, p);
  if (q < 0) return false;
  const v = low(parts, q);
  const fixed = THIRD_SG[v];
  if (!fixed) return false;
  const cap = /^[A-Z]/.test(parts[q]!);
  parts[q] = cap ? fixed.charAt(0).toUpperCase() + fixed.slice(1) : fixed;
  return true;
};

/** Is the pronoun at word p the start of a clause (so a following verb is its verb)? */
const clauseSubject = (parts: Parts, p: number): boolean => {
  const q = prevWord(parts, p);
  if (q < 0) return true;
  return CLAUSE_START.has(low(parts, q)) || q === -1;
};

const hadOrWould = (parts: Parts, p: number): string => {
  const n = low(parts, nextWord(parts, p));
  return n === "been" || n === "never" || n === "already" || n === "just" || n === "ever" || /ed$/.test(n)
    ? "had"
    : "would";
};

const isOrHas = (parts: Parts, p: number): string => {
  const n = low(parts, nextWord(parts, p));
  return n === "been" || n === "got" || n === "gotten" || n === "had" || n === "done" || n === "never" ? "has" : "is";
};

const removeDiscourseYou = (s: string): string =>
  s
    .replace(/,\s*you (?:know|see)\s*,/gi, ",")
    .replace(/^you (?:know|see),\s*/i, "")
    .replace(/,\s*you (?:know|see)(?=\s*[.!?]|\s*$)/gi, "");

/** Rewrite the pronouns of one sentence according to the frame. */
export const resolvePronouns = (sentence: string, frame: PronounFrame): string => {
  const text = frame.addressee ? removeDiscourseYou(sentence) : sentence;
  const parts: Parts = text.split(/([\p{L}\p{N}]+(?:'[\p{L}]+)*)/u);
  const S = frame.speaker;
  const A = frame.addressee;
  const question = /\?["')\s]*$/.test(text);
  for (let p = 1; p < parts.length; p += 2) {
    // Part of a hyphenated word ("me-time"): not a pronoun.
    if ((parts[p - 1] ?? "").endsWith("-") || (parts[p + 1] ?? "").startsWith("-")) continue;
    const w = (parts[p] ?? "").toLowerCase();
    // "you and I are": a compound subject keeps its plural verb; ", and I want" is a new clause.
    const conj = prevWord(parts, p);
    const beforeConj = conj >= 0 ? prevWord(parts, conj) : -1;
    const prevConj =
      ["and", "or"].includes(low(parts, conj)) &&
      beforeConj >= 0 &&
      (/^\p{Lu}/u.test(parts[beforeConj]!) ||
        ["you", "me", "him", "her", "them", "us", "i"].includes(low(parts, beforeConj)));
    switch (w) {
      case "i":
        parts[p] = S;
        if (!agreeBackward(parts, p, question) && !prevConj) agreeForward(parts, p);
        break;
      case "i'm":
        parts[p] = `${S} is`;
        break;
      case "i've":
        parts[p] = `${S} has`;
        break;
      case "i'll":
        parts[p] = `${S} will`;
        break;
      case "i'd":
        parts[p] = `${S} ${hadOrWould(parts, p)}`;
        break;
      case "let's":
        if (frame.we) parts[p] = `${/^L/.test(parts[p]!) ? "Let" : "let"} ${frame.we}`;
        break;
      case "me":
      case "myself":
        parts[p] = S;
        break;
      case "my":
      case "mine":
        parts[p] = possessive(S);
        break;
      default:
        break;
    }
    if (A) {
      switch (w) {
        case "you":
        case "ya":
          // "you guys", "you all", "you two": a group, not the addressee alone.
          if (["guys", "all", "two", "both", "folks", "people"].includes(low(parts, nextWord(parts, p)))) break;
          parts[p] = A;
          if (!agreeBackward(parts, p, question) && !prevConj && clauseSubject(parts, p)) agreeForward(parts, p);
          break;
        case "you're":
          parts[p] = `${A} is`;
          break;
        case "you've":
          parts[p] = `${A} has`;
          break;
        case "you'll":
          parts[p] = `${A} will`;
          break;
        case "you'd":
          parts[p] = `${A} ${hadOrWould(parts, p)}`;
          break;
        case "yourself":
          parts[p] = A;
          break;
        case "your":
        case "yours":
          parts[p] = possessive(A);
          break;
        default:
          break;
      }
    }
    const third = (X: string | undefined, pron: "he" | "she"): void => {
      if (!X) return;
      const obj = pron === "he" ? "him" : "her";
      if (w === pron) parts[p] = X;
      else if (w === `${pron}'s`) parts[p] = `${X} ${isOrHas(parts, p)}`;
      else if (w === `${pron}'ll`) parts[p] = `${X} will`;
      else if (w === `${pron}'d`) parts[p] = `${X} ${hadOrWould(parts, p)}`;
      else if (w === `${obj}self`) parts[p] = X;
      else if (pron === "he" && w === "him") parts[p] = X;
      else if (pron === "he" && w === "his") parts[p] = possessive(X);
      else if (pron === "she" && w === "hers") parts[p] = possessive(X);
      else if (pron === "she" && w === "her") {
        const n = nextWord(parts, p);
        const nw = low(parts, n);
        // "helped her fix": after a causative verb, "her" is the object of a following verb.
        const causative = CAUSATIVES.has(low(parts, prevWord(parts, p)));
        const object = n < 0 || causative || (OBJECT_FOLLOWERS.has(nw) && !OBJECT_FOLLOWER_EXCEPTIONS.has(nw));
        parts[p] = object ? X : possessive(X);
      }
    };
    third(frame.he, "he");
    third(frame.she, "she");
    if (frame.they) {
      const T = frame.they;
      const map: Record<string, string> = {
        they: T,
        "they're": `${T} are`,
        "they've": `${T} have`,
        "they'll": `${T} will`,
        "they'd": `${T} would`,
        them: T,
        themselves: T,
        their: possessive(T),
        theirs: possessive(T),
      };
      const r = map[w];
      if (r) parts[p] = r;
    }
    if (frame.we) {
      const W = frame.we;
      const map: Record<string, string> = {
        we: W,
        "we're": `${W} are`,
        "we've": `${W} have`,
        "we'll": `${W} will`,
        "we'd": `${W} would`,
        us: W,
        ourselves: W,
        our: possessive(W),
        ours: possessive(W),
      };
      const r = map[w];
      if (r) parts[p] = r;
    }
  }
  return parts.join("");
};

const DROPPED_SUBJECT_VERBS = new Set([
  "love",
  "loved",
  "hope",
  "wish",
  "miss",
  "missed",
  "think",
  "thought",
  "guess",
  "can't",
  "cannot",
  "wanna",
  "gotta",
  "just",
  "finally",
  "recently",
  "totally",
  "also",
  "went",
  "got",
  "lost",
  "had",
  "made",
  "took",
  "saw",
  "met",
  "found",
  "bought",
  "tried",
  "started",
  "finished",
  "joined",
  "visited",
  "spent",
  "learned",
  "learnt",
  "decided",
  "used",
  "gonna",
  "been",
  "am",
]);
const DROPPED_SUBJECT_ADJ = new Set([
  "glad",
  "happy",
  "excited",
  "thrilled",
  "stoked",
  "keen",
  "proud",
  "grateful",
  "thankful",
  "lucky",
  "sorry",
  "super",
  "so",
]);

/**
 * Chat often drops the first-person subject ("Lost my job yesterday", "Gonna start a business",
 * "Love that painting!"). When a statement starts with such a verb, put "I" back so that the
 * pronoun pass names the speaker. Imperatives ("Check this out") are left alone: only verbs
 * that are rarely imperative start the list.
 */
export const restoreSubject = (sentence: string): string => {
  const m = /^([\p{L}']+)(\s+([\p{L}']+))?/u.exec(sentence);
  if (!m) return sentence;
  const w = m[1]!.toLowerCase();
  const next = (m[3] ?? "").toLowerCase();
  const rest = sentence.slice(m[1]!.length);
  if (w === "gonna" || w === "am") return `I'm ${w === "am" ? rest.trimStart() : `gonna${rest}`}`;
  if (w === "been") return `I've been${rest}`;
  if (DROPPED_SUBJECT_ADJ.has(w) && ["to", "about", "that", "for", "with", "of"].includes(next))
    return `I'm ${w}${rest}`;
  if (DROPPED_SUBJECT_VERBS.has(w)) {
    // "Just", "Really" etc. only when a verb-like word follows ("Just got back").
    if (
      ["just", "finally", "recently", "totally", "also"].includes(w) &&
      !/(?:ed|ght|got|went|lost|had|made|took|saw|met|love|wanna|gotta)$/.test(next)
    )
      return sentence;
    if (w === "used" && next !== "to") return sentence;
    return `I ${w}${rest}`;
  }
  return sentence;
};
