import { dot } from "../core/vector-math.ts";

export interface MmrCandidate {
  id: string;
  relevance: number;
  vector?: Float32Array;
}

/**
 * The candidates' vectors copied once into one Float64Array (float32 to float64 is exact), so that
 * a pair's similarity reads two contiguous rows. The similarities are all-pairs work (n(n-1)/2 dot
 * products for n candidates, every one of which is taken in the end), so their speed is the cost of
 * MMR; the sum runs in dot's order (index ascending, one accumulator), which keeps every value
 * bit-equal to dot's.
 */
class VectorRows {
  private readonly data: Float64Array;

  private constructor(
    readonly dim: number,
    data: Float64Array,
  ) {
    this.data = data;
  }

  /** The rows, or undefined when the vectors differ in length (then dot's own min-length rule applies). */
  static of(vectors: readonly (Float32Array | undefined)[]): VectorRows | undefined {
    const dim = vectors.find((v) => v !== undefined)?.length ?? 0;
    if (vectors.some((v) => v !== undefined && v.length !== dim)) return undefined;
    const data = new Float64Array(vectors.length * dim);
    vectors.forEach((v, i) => {
      if (v) data.set(v, i * dim);
    });
    return new VectorRows(dim, data);
  }

  similarity(a: number, b: number): number {
    const d = this.data;
    const dim = this.dim;
    const x = a * dim;
    const y = b * dim;
    const end = dim - (dim % 4);
    let s = 0;
    let i = 0;
    // Unrolled, still one accumulator added to in index order: the same sum as dot's loop.
    for (; i < end; i += 4) {
      s += (d[x + i] as number) * (d[y + i] as number);
      s += (d[x + i + 1] as number) * (d[y + i + 1] as number);
      s += (d[x + i + 2] as number) * (d[y + i + 2] as number);
      s += (d[x + i + 3] as number) * (d[y + i + 3] as number);
    }
    for (; i < dim; i++) s += (d[x + i] as number) * (d[y + i] as number);
    return s;
  }
}

/**
 * Maximal marginal relevance: repeatedly take the candidate maximising
 * lambda * relevance - (1 - lambda) * max similarity to those already taken.
 * Relevance is scaled to [0, 1] first so lambda means the same whatever the fusion scores are.
 * Vectors are unit length; a candidate without a vector is never penalised for redundancy.
 */
export const maximalMarginalRelevance = (
  candidates: readonly MmrCandidate[],
  lambda: number,
  limit: number,
): MmrCandidate[] => {
  const maxRel = Math.max(1e-12, ...candidates.map((c) => c.relevance));
  const rel = candidates.map((c) => c.relevance / maxRel);
  const maxSim = new Float64Array(candidates.length);
  const hasVector = candidates.map((c) => c.vector !== undefined);
  const rows = VectorRows.of(candidates.map((c) => c.vector));
  const similarity = rows
    ? (a: number, b: number): number => rows.similarity(a, b)
    : (a: number, b: number): number =>
        dot(candidates[a]?.vector as Float32Array, candidates[b]?.vector as Float32Array);
  // Indexes of the candidates not taken yet, in the order given (ties go to the earlier one).
  const pool = candidates.map((_, i) => i);
  const chosen: MmrCandidate[] = [];
  while (chosen.length < limit && pool.length > 0) {
    let best = 0;
    let bestScore = Number.NEGATIVE_INFINITY;
    for (let p = 0; p < pool.length; p++) {
      const c = pool[p] as number;
      const score = lambda * (rel[c] as number) - (1 - lambda) * (maxSim[c] as number);
      if (score > bestScore) {
        bestScore = score;
        best = p;
      }
    }
    const [t] = pool.splice(best, 1);
    if (t === undefined) break;
    const taken = candidates[t] as MmrCandidate;
    chosen.push({ id: taken.id, relevance: taken.relevance, ...(taken.vector ? { vector: taken.vector } : {}) });
    if (taken.vector)
      for (const c of pool) {
        if (hasVector[c]) maxSim[c] = Math.max(maxSim[c] as number, similarity(c, t));
      }
  }
  return chosen;
};
