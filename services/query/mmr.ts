import { dot } from "../core/vector-math.ts";

export interface MmrCandidate {
  id: string;
  relevance: number;
  vector?: Float32Array;
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
  const pool = candidates.map((c) => ({ ...c, rel: c.relevance / maxRel, maxSim: 0 }));
  const chosen: MmrCandidate[] = [];
  while (chosen.length < limit && pool.length > 0) {
    let best = 0;
    let bestScore = Number.NEGATIVE_INFINITY;
    pool.forEach((c, i) => {
      const score = lambda * c.rel - (1 - lambda) * c.maxSim;
      if (score > bestScore) {
        bestScore = score;
        best = i;
      }
    });
    const [taken] = pool.splice(best, 1);
    if (!taken) break;
    chosen.push({ id: taken.id, relevance: taken.relevance, ...(taken.vector ? { vector: taken.vector } : {}) });
    if (taken.vector)
      for (const c of pool) if (c.vector) c.maxSim = Math.max(c.maxSim, dot(c.vector, taken.vector as Float32Array));
  }
  return chosen;
};
