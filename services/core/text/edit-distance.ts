/**
 * Bounded edit distance for fuzzy matching of rare terms (a misspelled name in a question).
 * Optimal string alignment: insertions, deletions, substitutions and adjacent transpositions
 * ("Melaine" / "Melanie") each cost 1. No installed direct dependency offers transpositions
 * (js-levenshtein, present only transitively, counts a swap as 2), hence this small one. Pure.
 */

/**
 * The OSA distance of a and b if it is at most `max`, else max + 1 (rows stop early once every
 * cell exceeds the bound, so a far pair costs little).
 */
export const boundedEditDistance = (a: string, b: string, max: number): number => {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  if (a === b) return 0;
  let prev2: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, (prev2[j - 2] as number) + 1);
      row.push(d);
      if (d < best) best = d;
    }
    if (best > max) return max + 1;
    prev2 = prev;
    prev = row;
  }
  return Math.min(prev[b.length] as number, max + 1);
};

/** Edits a word of this length may differ by and still be the same name: none below 5 letters, 1, 2 from 9. */
export const fuzzyTolerance = (length: number): number => (length < 5 ? 0 : length < 9 ? 1 : 2);
