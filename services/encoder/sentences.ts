/** Sentence splitting and light clean-up of a turn's original text. */

const segmenter = new Intl.Segmenter("en", { granularity: "sentence" });

/** Normalise quotes, drop emoji and control characters, collapse whitespace. */
export const cleanText = (text: string): string =>
  text
    .replace(/[\u2018\u2019\u02bc]/g, "'")
    .replace(/[\u201c\u201d]/g, '"')
    .replace(/\p{Extended_Pictographic}|\uFE0F|\u200D/gu, "")
    .replace(/\p{Cc}/gu, " ")
    .replace(/\s+/g, " ")
    .trim();

/**
 * Longest sentence the extractor analyses as one; longer runs (no sentence end in 100,000
 * characters of pasted text) are cut at the last space before the bound, or hard at it. Name, date
 * and vocative passes are super-linear in a sentence's length, so this keeps each one bounded;
 * real sentences are far shorter (LoCoMo's longest is about 150 characters).
 */
export const MAX_SENTENCE_CHARS = 300;

/** Pieces of at most `max` characters, cut at the last space before the bound when there is one. */
export const boundSentence = (sentence: string, max = MAX_SENTENCE_CHARS): string[] => {
  const out: string[] = [];
  let rest = sentence;
  while (rest.length > max) {
    const space = rest.lastIndexOf(" ", max);
    const cut = space > 0 ? space : max;
    out.push(rest.slice(0, cut).trim());
    rest = rest.slice(cut).trim();
  }
  if (rest.length > 0) out.push(rest);
  return out;
};

/** Sentences of a text, by Intl.Segmenter; empty pieces and pure punctuation dropped; each bounded. */
export const splitSentences = (text: string): string[] => {
  const out: string[] = [];
  for (const s of segmenter.segment(cleanText(text))) {
    const t = s.segment.trim();
    if (/[\p{L}\p{N}]/u.test(t)) for (const piece of boundSentence(t)) out.push(piece);
  }
  return out;
};

/**
 * The caption is bounded: with `[^\]]*`, every unclosed "[shared a photo:" would scan to the end of
 * the text, quadratic on a turn repeating it. Real captions are one short sentence.
 */
const PHOTO = /\[shared an? (?:photo|image|picture)\s*:?\s*([^\]]{0,500})\]/gi;

/** Split "[shared a photo: <caption>]" annotations (added by the caller) out of a turn text. */
export const extractPhotos = (text: string): { body: string; captions: string[] } => {
  const captions: string[] = [];
  const body = text.replace(PHOTO, (_m, caption: string) => {
    const c = cleanText(caption)
      .replace(/^(?:(?:a|an|the)\s+)?(?:photo|image|picture|photograph|photography|pic|snapshot)\s+of\s+/i, "")
      .replace(/^(?:there is|this is|it is)\s+/i, "")
      .replace(/[.\s]+$/, "");
    if (c.length > 0) captions.push(c);
    return " ";
  });
  return { body: body.replace(/\s+/g, " ").trim(), captions };
};

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

const INTERJECTION =
  /^(?:(?:hey|hi|hello|hiya|oh|ooh|wow|whoa|woah|well|um|uh|hmm|omg|aw+|ah+|ok|okay|haha+|hehe|lol|gosh|btw|by the way|anyway|so|yay|man|dude)\b[\s,!.…-]*)+/i;

/**
 * Remove leading interjections and vocatives addressed to a known name
 * ("Hey Mel! ...", "..., Caroline!"), so that a record reads as a statement.
 */
export const stripVocatives = (sentence: string, names: readonly string[]): string => {
  let s = sentence.trim();
  const alts = names.filter((n) => n.length > 0).map(escapeRe);
  for (let i = 0; i < 3; i++) {
    const before = s;
    s = s.replace(INTERJECTION, "");
    if (alts.length > 0) {
      s = s.replace(new RegExp(`^(?:${alts.join("|")})\\s*[,!.:;-]+\\s*`, "i"), "");
      s = s.replace(new RegExp(`,\\s*(?:${alts.join("|")})\\s*([.!?]*)$`, "i"), "$1");
    }
    if (s === before) break;
  }
  if (s.length > 0 && /^[a-z]/.test(s)) s = s.charAt(0).toUpperCase() + s.slice(1);
  return s;
};

const VOCATIVE_BLOCKERS = new Set([
  "with",
  "to",
  "for",
  "and",
  "or",
  "at",
  "from",
  "about",
  "like",
  "than",
  "met",
  "saw",
  "told",
  "tell",
  "ask",
  "asked",
  "call",
  "called",
  "love",
  "miss",
  "thank",
  "thanks",
  "by",
  "of",
  "on",
  "in",
  "as",
  "is",
  "was",
  "meet",
  "see",
  "help",
  "visit",
  "visited",
  "named",
  "hey",
  "hi",
  "hello",
  "dear",
]);

/** Remove a mid-sentence vocative ("Sorry about your job Jon, but ...") naming the addressee. */
export const stripInnerVocatives = (sentence: string, names: readonly string[]): string => {
  const alts = names.filter((n) => n.length > 0).map(escapeRe);
  if (alts.length === 0) return sentence;
  const re = new RegExp(`(\\p{L}+)(,?)\\s+(?:${alts.join("|")})(?=\\s*[,!?.])`, "gu");
  return sentence.replace(re, (all: string, prev: string, comma: string) =>
    VOCATIVE_BLOCKERS.has(prev.toLowerCase()) || comma === undefined ? all : prev,
  );
};
