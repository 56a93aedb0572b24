/**
 * Turns free text into a safe FTS5 MATCH expression: the distinct word tokens, FTS syntax stripped,
 * very common stop words dropped, each token quoted, joined with OR (BM25 then ranks by overlap).
 * Pure, no SQL.
 */

const STOP_WORDS = new Set([
  "a",
  "about",
  "after",
  "all",
  "also",
  "am",
  "an",
  "and",
  "any",
  "are",
  "as",
  "at",
  "be",
  "been",
  "before",
  "being",
  "but",
  "by",
  "can",
  "could",
  "did",
  "do",
  "does",
  "doing",
  "for",
  "from",
  "had",
  "has",
  "have",
  "having",
  "he",
  "her",
  "hers",
  "him",
  "his",
  "how",
  "i",
  "if",
  "in",
  "into",
  "is",
  "it",
  "its",
  "me",
  "my",
  "of",
  "on",
  "or",
  "our",
  "she",
  "so",
  "than",
  "that",
  "the",
  "their",
  "them",
  "then",
  "there",
  "these",
  "they",
  "this",
  "those",
  "to",
  "too",
  "us",
  "very",
  "was",
  "we",
  "were",
  "what",
  "when",
  "where",
  "which",
  "who",
  "whom",
  "why",
  "will",
  "with",
  "would",
  "you",
  "your",
]);

/** Most tokens a query keeps (long texts would otherwise make very wide OR queries). */
export const MAX_QUERY_TOKENS = 32;

/** Lower-cased word tokens (letters and digits of any script), in order, with duplicates. */
export const wordTokens = (text: string): string[] =>
  text
    .normalize("NFKC")
    .toLowerCase()
    .match(/[\p{L}\p{N}]+/gu) ?? [];

export const isStopWord = (token: string): boolean => STOP_WORDS.has(token);

/**
 * The MATCH expression for `text`, or undefined when nothing searchable is left (empty text,
 * punctuation only, stop words only): the caller then returns no hits.
 */
export const buildFtsQuery = (text: string, maxTokens = MAX_QUERY_TOKENS): string | undefined => {
  const seen = new Set<string>();
  for (const token of wordTokens(text)) {
    if (isStopWord(token) || seen.has(token)) continue;
    seen.add(token);
    if (seen.size >= maxTokens) break;
  }
  if (seen.size === 0) return undefined;
  // Tokens hold only letters and digits, so quoting cannot be escaped out of; quoted tokens are
  // also never read as the FTS5 keywords AND / OR / NOT / NEAR.
  return [...seen].map((t) => `"${t}"`).join(" OR ");
};
