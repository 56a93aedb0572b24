import { Tiktoken } from "js-tiktoken/lite";
import o200k from "js-tiktoken/ranks/o200k_base";

let encoder: Tiktoken | undefined;
const enc = (): Tiktoken => {
  encoder ??= new Tiktoken(o200k);
  return encoder;
};

/** Exact o200k_base token count (the GPT-4o family tokenizer). */
export const countTokens = (text: string): number => (text.length === 0 ? 0 : enc().encode(text).length);

/** Longest prefix of text that fits in maxTokens, cut on a token boundary. */
export const truncateToTokens = (text: string, maxTokens: number): string => {
  const ids = enc().encode(text);
  if (ids.length <= maxTokens) return text;
  return enc().decode(ids.slice(0, Math.max(0, maxTokens)));
};
