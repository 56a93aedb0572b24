import type { CompressionResult, Compressor } from "../core/ports.ts";
import { selfInformation } from "./english-frequency.ts";

const MONTHS =
  /^(jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sep(t(ember)?)?|oct(ober)?|nov(ember)?|dec(ember)?|monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|today|tomorrow|tonight|ago|last|next|week|month|year|weekend|spring|summer|autumn|fall|winter)$/i;

const core = (token: string): string => token.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, "");

/**
 * Words that say whether what follows holds: negations and conditions. They are among the most
 * frequent words, so the self-information rule (and a token classifier's low scores) would drop
 * them first, and a dropped "not" turns the statement around: "I'm not giving up!" was compressed
 * to "I'm giving up!" (10 of the dev set's 146 negations were dropped at r = 0.7); a dropped "if"
 * turns a condition into a claim ("I'm sure if I keep pushing, I'll reach my dreams" → "I'm sure
 * keep pushing, I'll reach my dreams": 2 of 6). The LLM encoder reads the compressed text.
 */
const POLARITY =
  /^(?:not|no|nor|never|none|nothing|nobody|nowhere|neither|cannot|without|if|unless|\p{L}+n['\u2019]t)$/iu;

/** Numbers, dates (seasons too), capitalised names, negations and conditions carry what a memory needs; they are never dropped. */
export const isForceKept = (token: string, sentenceInitial: boolean): boolean => {
  const w = core(token);
  if (w.length === 0) return false;
  if (/\p{N}/u.test(w)) return true;
  if (MONTHS.test(w)) return true;
  if (POLARITY.test(w)) return true;
  return !sentenceInitial && /^\p{Lu}/u.test(w) && w.toLowerCase() !== "i";
};

/**
 * The statistical default compressor (docs/design.md §5, Sensory): a word's keep score is its self-information
 * against corpus frequencies; the threshold is the r-quantile of the turn's scores, whole words
 * are kept or dropped, and force-kept words always survive.
 */
export class StatisticalCompressor implements Compressor {
  readonly id = "statistical-v1";

  async compress(text: string, keepRate: number): Promise<CompressionResult> {
    return compressStatistically(text, keepRate);
  }
}

export const compressStatistically = (text: string, keepRate: number): CompressionResult => {
  const tokens = text.split(/\s+/).filter(Boolean);
  if (tokens.length === 0 || keepRate >= 1) return { text, keptRatio: 1 };
  const scored = tokens.map((token, i) => {
    const prev = tokens[i - 1];
    const sentenceInitial = i === 0 || (prev !== undefined && /[.!?]["')\]]*$/.test(prev));
    const forced = isForceKept(token, sentenceInitial);
    const w = core(token);
    return { token, i, forced, score: w.length === 0 ? 0 : selfInformation(w) };
  });
  const quota = Math.max(1, Math.ceil(keepRate * tokens.length));
  const forced = scored.filter((s) => s.forced).length;
  const byScore = scored.filter((s) => !s.forced).sort((a, b) => b.score - a.score || a.i - b.i);
  const keep = new Set(scored.filter((s) => s.forced).map((s) => s.i));
  for (const s of byScore.slice(0, Math.max(0, quota - forced))) keep.add(s.i);
  const kept = scored.filter((s) => keep.has(s.i)).map((s) => s.token);
  if (kept.length === 0) return { text, keptRatio: 1 };
  return { text: kept.join(" "), keptRatio: kept.length / tokens.length };
};
