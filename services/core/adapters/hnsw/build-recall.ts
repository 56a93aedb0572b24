/**
 * Recall@k of an HNSW graph built with given parameters against exact search, and what the build
 * cost: how the store's build parameters (m, efConstruction) are chosen. The graph is built the way
 * HnswVectorStore builds one (cosine space, the same seed, points added one at a time) and searched
 * the way its unfiltered path searches (ef = max(efSearch, k)); the reference is an exact scan in
 * double precision.
 */
import hnswlib from "hnswlib-node";

export interface BuildRecallOptions {
  m: number;
  efConstruction: number;
  efSearch: number;
  k: number;
  seed?: number;
  /**
   * Only these labels are admissible (the store's filtered walk: a kind, a subject): searched with
   * the store's filtered ef, max(efSearch, 2k), and scored against the exact top k among them.
   */
  admissible?: (label: number) => boolean;
}

/** The exact neighbours of each query: the top k labels and the k-th score (ties count as found). */
export interface ExactNeighbours {
  labels: number[];
  kthScore: number;
  /** Score of any point for this query. */
  scoreOf: (label: number) => number;
}

export interface BuildRecall {
  m: number;
  efConstruction: number;
  efSearch: number;
  k: number;
  filtered: boolean;
  /**
   * Mean over the queries of the share of the k found that are among the exact top k (a point
   * whose score equals the exact k-th score counts: duplicate texts have equal vectors).
   */
  recall: number;
  /** Lowest recall of one query. */
  minRecall: number;
  /** Milliseconds per point added. */
  insertMs: number;
  /** Milliseconds per search. */
  searchMs: number;
}

const unit = (v: Float32Array): Float64Array => {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += (v[i] as number) ** 2;
  const n = Math.sqrt(s) || 1;
  return Float64Array.from(v, (x) => x / n);
};

/** The exact top k of every query over the admissible points by cosine (ties: lower label first). */
export const exactTopK = (
  points: readonly Float32Array[],
  queries: readonly Float32Array[],
  k: number,
  admissible: (label: number) => boolean = () => true,
): ExactNeighbours[] => {
  const units = points.map(unit);
  return queries.map((q) => {
    const uq = unit(q);
    const all = new Float64Array(units.length);
    units.forEach((p, label) => {
      let s = 0;
      for (let i = 0; i < uq.length; i++) s += (uq[i] as number) * (p[i] as number);
      all[label] = s;
    });
    const order = [...all.keys()].filter(admissible);
    order.sort((a, b) => (all[b] as number) - (all[a] as number) || a - b);
    const labels = order.slice(0, k);
    return {
      labels,
      kthScore: labels.length > 0 ? (all[labels[labels.length - 1] as number] as number) : Number.NEGATIVE_INFINITY,
      scoreOf: (label) => all[label] as number,
    };
  });
};

/** Builds one graph over the points (label = index) and measures its recall@k on the queries. */
export const measureBuildRecall = (
  points: readonly Float32Array[],
  queries: readonly Float32Array[],
  exact: readonly ExactNeighbours[],
  options: BuildRecallOptions,
): BuildRecall => {
  const dim = (points[0] as Float32Array).length;
  const index = new hnswlib.HierarchicalNSW("cosine", dim);
  index.initIndex({
    maxElements: points.length,
    m: options.m,
    efConstruction: options.efConstruction,
    randomSeed: options.seed ?? 100,
    allowReplaceDeleted: true,
  });
  const b0 = performance.now();
  points.forEach((p, label) => {
    index.addPoint(Array.from(p), label);
  });
  const insertMs = (performance.now() - b0) / points.length;
  const k = Math.min(options.k, points.length);
  index.setEf(options.admissible ? Math.max(options.efSearch, k * 2) : Math.max(options.efSearch, k));
  let sum = 0;
  let min = 1;
  const s0 = performance.now();
  queries.forEach((q, i) => {
    const e = exact[i] as ExactNeighbours;
    const found = index.searchKnn(Array.from(q), k, options.admissible).neighbors;
    const inTop = new Set(e.labels);
    // float32 points vs the double-precision reference: equal scores within rounding.
    const hit = found.filter((label) => inTop.has(label) || e.scoreOf(label) >= e.kthScore - 1e-6).length / k;
    sum += hit;
    min = Math.min(min, hit);
  });
  const searchMs = (performance.now() - s0) / Math.max(1, queries.length);
  return {
    m: options.m,
    efConstruction: options.efConstruction,
    efSearch: options.efSearch,
    k,
    filtered: options.admissible !== undefined,
    recall: queries.length > 0 ? sum / queries.length : 1,
    minRecall: min,
    insertMs,
    searchMs,
  };
};
