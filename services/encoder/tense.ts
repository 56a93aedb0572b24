import { BE_WORDS, IRREGULAR_PAST } from "../core/text/lexicon.ts";

/** Lower-case word tokens (apostrophes kept, curly ones normalised). */
export const words = (text: string): string[] =>
  (
    text
      .toLowerCase()
      .replace(/[\u2018\u2019]/g, "'")
      .match(/[\p{L}\p{N}]+(?:'[\p{L}]+)*/gu) ?? []
  ).slice();

const ADJECTIVE_ED = new Set([
  "excited",
  "interested",
  "tired",
  "bored",
  "scared",
  "worried",
  "married",
  "engaged",
  "blessed",
  "pleased",
  "stressed",
  "relaxed",
  "inspired",
  "motivated",
  "surprised",
  "amazed",
  "thrilled",
  "overwhelmed",
  "dedicated",
  "related",
  "based",
  "talented",
  "used",
  "need",
  "red",
  "bed",
  "shed",
  "seed",
  "weed",
  "feed",
  "speed",
  "hundred",
  "sacred",
  "naked",
  "wicked",
  "beloved",
]);

/** True when the sentence narrates something in the past ("went", "lost", "started", "ago"). */
export const hasPastCue = (text: string): boolean => {
  const ws = words(text);
  for (let i = 0; i < ws.length; i++) {
    const w = ws[i]!;
    if (w === "ago" || w === "last" || w === "yesterday") return true;
    if (w === "didn't" || w === "wasn't" || w === "weren't" || w === "hadn't") return true;
    if (IRREGULAR_PAST.has(w)) return true;
    if (w.length > 4 && w.endsWith("ed") && !ADJECTIVE_ED.has(w)) {
      const prev = i > 0 ? ws[i - 1]! : "";
      if (!BE_WORDS.has(prev) && prev !== "get" && prev !== "feel" && prev !== "have" && prev !== "has") return true;
    }
  }
  return false;
};

/** True when the sentence talks about the future ("will", "going to", "next", "plan to"). */
export const hasFutureCue = (text: string): boolean => {
  const t = text.toLowerCase().replace(/[\u2018\u2019]/g, "'");
  return /\b(will|won't|shall|gonna|tomorrow|upcoming|soon)\b|\bnext\b(?!\s+(?:to|door)\b)|'ll\b|\b(going|plan|plans|planning|hope|hoping|want|wants|intend|intends|about) to\b|\blooking forward\b/.test(
    t,
  );
};
