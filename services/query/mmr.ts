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
 * MMR. Each sum runs in dot's order (index ascending, one accumulator), which keeps every value
 * bit-equal to dot's; `toTaken` scores four candidates against the one just taken at once, since
 * one sum is a chain of dependent additions that waits on each add's latency and four independent
 * chains keep the FPU busy (as vector-block.ts' dotScores and inverseNorms do).
 */
export class VectorRows {
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

  /** Row a's similarity to row b: dot's sum, index ascending. */
  similarity(a: number, b: number): number {
    const d = this.data;
    const dim = this.dim;
    const x = a * dim;
    const y = b * dim;
    let s = 0;
    for (let i = 0; i < dim; i++) s += (d[x + i] as number) * (d[y + i] as number);
    return s;
  }

  /**
   * `out[j]` = the similarity of row `rows[j]` to row `t`, for j < count: four rows at a time, each
   * row's own sum the same operations in the same order as `similarity` (a product is the same
   * whichever factor comes first), so every value is bit-equal to it.
   */
  toTaken(t: number, rows: Int32Array, count: number, out: Float64Array): void {
    const d = this.data;
    const dim = this.dim;
    const y = t * dim;
    let j = 0;
    for (; j + 4 <= count; j += 4) {
      const x0 = (rows[j] as number) * dim;
      const x1 = (rows[j + 1] as number) * dim;
      const x2 = (rows[j + 2] as number) * dim;
      const x3 = (rows[j + 3] as number) * dim;
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      for (let i = 0; i < dim; i++) {
        const q = d[y + i] as number;
        s0 += (d[x0 + i] as number) * q;
        s1 += (d[x1 + i] as number) * q;
        s2 += (d[x2 + i] as number) * q;
        s3 += (d[x3 + i] as number) * q;
      }
      out[j] = s0;
      out[j + 1] = s1;
      out[j + 2] = s2;
      out[j + 3] = s3;
    }
    for (; j < count; j++) out[j] = this.similarity(rows[j] as number, t);
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
  // The pool's candidates with a vector, and their similarities to the one just taken.
  const compared = new Int32Array(candidates.length);
  const sims = new Float64Array(candidates.length);
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
    if (!taken.vector) continue;
    let count = 0;
    for (const c of pool) if (hasVector[c]) compared[count++] = c;
    if (rows) rows.toTaken(t, compared, count, sims);
    else
      for (let j = 0; j < count; j++)
        sims[j] = dot(candidates[compared[j] as number]?.vector as Float32Array, taken.vector);
    for (let j = 0; j < count; j++) {
      const c = compared[j] as number;
      maxSim[c] = Math.max(maxSim[c] as number, sims[j] as number);
    }
  }
  return chosen;
};
