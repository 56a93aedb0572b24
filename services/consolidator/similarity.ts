/**
 * Similarity measures the consolidation rules compare two statements with: character-trigram
 * Dice of the normalised texts, and set measures over content tokens and slot values.
 */

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
