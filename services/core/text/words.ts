/**
 * Whitespace-separated words: the one count the encoder's sentence budgets, the packer's
 * "stands alone" rule and the bench's kept ratios share, so that they cannot drift apart.
 */

/** The number of maximal runs of non-whitespace characters in `s`. */
export const wordCount = (s: string): number => s.match(/\S+/g)?.length ?? 0;
