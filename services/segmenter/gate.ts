import { cosine, mean, norm } from "../core/vector-math.ts";

/** The published starting parameters of the boundary gate (docs/design.md §5, Segmenter). */
export interface GateParams {
  threshold: number;
  bias: number;
  wPhi: number;
  wCohesion: number;
  wLength: number;
  wTurns: number;
  surpriseOffset: number;
  surpriseScale: number;
  zWeight: number;
  cohesionScale: number;
  historySize: number;
  minHistory: number;
  softTokens: number;
  hardCapTokens: number;
  turnsFullPressure: number;
}

export const DEFAULT_GATE: GateParams = {
  threshold: 0.55,
  bias: -1.1,
  wPhi: 0.65,
  wCohesion: 0.45,
  wLength: 0.9,
  wTurns: 0.3,
  surpriseOffset: 0.2,
  surpriseScale: 0.14,
  zWeight: 0.45,
  cohesionScale: 0.06,
  historySize: 64,
  minHistory: 5,
  softTokens: 700,
  hardCapTokens: 2000,
  turnsFullPressure: 16,
};

const clip = (x: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, x));
const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

/** Robust z-score of x against history (median / MAD), clipped to [-2, 4]; 0 until enough history. */
export const robustZ = (x: number, history: readonly number[], minHistory: number): number => {
  if (history.length < minHistory) return 0;
  const med = median(history);
  const mad = median(history.map((h) => Math.abs(h - med)));
  const scale = 1.4826 * mad;
  if (scale < 1e-9) return x > med ? 4 : 0;
  return clip((x - med) / scale, -2, 4);
};

/**
 * Mean pairwise cosine; a set of fewer than two vectors has no spread, so 1. The definition: the
 * gate uses its running form (SegmentSummary).
 */
export const cohesion = (vectors: readonly Float32Array[]): number => {
  if (vectors.length < 2) return 1;
  let sum = 0;
  let n = 0;
  for (let i = 0; i < vectors.length; i++)
    for (let j = i + 1; j < vectors.length; j++) {
      sum += cosine(vectors[i] as Float32Array, vectors[j] as Float32Array);
      n++;
    }
  return sum / n;
};

/** Length pressure: -1.3 below the soft size, rising linearly to 3.0 at the hard cap. */
export const lengthPressure = (tokens: number, p: GateParams): number => {
  if (tokens <= p.softTokens) return -1.3;
  const t = clip((tokens - p.softTokens) / (p.hardCapTokens - p.softTokens), 0, 1);
  return -1.3 + t * 4.3;
};

/** Turn pressure: -0.85 at one exchange (two turns), rising linearly to 1.0. */
export const turnPressure = (turns: number, p: GateParams): number => {
  const t = clip((turns - 2) / (p.turnsFullPressure - 2), 0, 1);
  return -0.85 + t * 1.85;
};

/**
 * What the gate needs of the open segment, in constant space (no per-turn vectors): the count, the
 * float32 running sum of the vectors (exactly what mean() accumulates, in the same order, so the
 * centroid is bit-identical), the last two vectors, the float64 sum of the unit vectors and the
 * running sum of pairwise cosines (so cohesion is O(d) per turn instead of O(n^2 d)). Cohesion is
 * the same quantity as cohesion() below but summed in another order, so it can differ from it in
 * the last bits (at most 1e-15 over the LoCoMo dev set, where every boundary came out identical).
 */
export interface SegmentSummary {
  count: number;
  sum: Float32Array;
  /** The last one or two vectors, oldest first. */
  last: readonly Float32Array[];
  unitSum: Float64Array;
  /** Sum over all pairs i<j of cosine(v_i, v_j). */
  pairCosines: number;
}

/** Sum of cosine(v_i, c) over the summarised vectors: (sum of unit vectors) . c / |c|. */
const cosinesWith = (s: SegmentSummary, c: Float32Array): number => {
  const n = norm(c);
  if (n === 0) return 0;
  let d = 0;
  for (let i = 0; i < s.unitSum.length; i++) d += (s.unitSum[i] as number) * (c[i] as number);
  return d / n;
};

/** The summary of a one-vector segment. */
export const summaryOf = (v: Float32Array): SegmentSummary => extendSummary(undefined, v);

/** The summary with v appended; the inputs are not modified. */
export const extendSummary = (s: SegmentSummary | undefined, v: Float32Array): SegmentSummary => {
  const sum = new Float32Array(v.length);
  const unitSum = new Float64Array(v.length);
  const n = norm(v);
  for (let i = 0; i < v.length; i++) {
    // Float32Array assignment rounds like mean()'s accumulation: identical centroids.
    sum[i] = (s ? (s.sum[i] as number) : 0) + (v[i] as number);
    unitSum[i] = (s ? (s.unitSum[i] as number) : 0) + (n === 0 ? 0 : (v[i] as number) / n);
  }
  return {
    count: (s?.count ?? 0) + 1,
    sum,
    last: [...(s?.last.slice(-1) ?? []), Float32Array.from(v)],
    unitSum,
    pairCosines: s ? s.pairCosines + cosinesWith(s, v) : 0,
  };
};

/** Summary of a list of vectors (tests, migration of the old state that kept every vector). */
export const summarise = (vectors: readonly Float32Array[]): SegmentSummary => {
  let s: SegmentSummary | undefined;
  for (const v of vectors) s = extendSummary(s, v);
  if (!s) throw new Error("summary of no vectors");
  return s;
};

/** Mean pairwise cosine of the summarised vectors; fewer than two have no spread, so 1. */
const cohesionOf = (count: number, pairCosines: number): number =>
  count < 2 ? 1 : pairCosines / ((count * (count - 1)) / 2);

const centroid = (s: SegmentSummary): Float32Array => {
  const out = new Float32Array(s.sum.length);
  for (let i = 0; i < out.length; i++) out[i] = (s.sum[i] as number) / s.count;
  return out;
};

export interface GateInput {
  segment: SegmentSummary;
  segmentTokens: number;
  candidate: Float32Array;
  surpriseHistory: readonly number[];
}

export interface GateOutput {
  surprise: number;
  z: number;
  phi: number;
  cohesionDrop: number;
  lengthPressure: number;
  turnPressure: number;
  p: number;
  cut: boolean;
}

/** Should the open segment close before the candidate turn? */
export const evaluateGate = (input: GateInput, p: GateParams = DEFAULT_GATE): GateOutput => {
  const { segment, candidate } = input;
  const surprise = 1 - Math.max(cosine(candidate, centroid(segment)), cosine(candidate, mean(segment.last)));
  const z = robustZ(surprise, input.surpriseHistory, p.minHistory);
  const absolute = clip((surprise - p.surpriseOffset) / p.surpriseScale, -1, 2.5);
  const phi = Math.max(absolute, p.zWeight * z);
  // A single turn has no cohesion to lose yet; without this guard every second turn would cut.
  const cohesionDrop =
    segment.count < 2
      ? 0
      : cohesionOf(segment.count, segment.pairCosines) -
        cohesionOf(segment.count + 1, segment.pairCosines + cosinesWith(segment, candidate));
  const L = lengthPressure(input.segmentTokens, p);
  const N = turnPressure(segment.count, p);
  const logit =
    p.bias + p.wPhi * phi + p.wCohesion * Math.min(2.5, cohesionDrop / p.cohesionScale) + p.wLength * L + p.wTurns * N;
  const prob = sigmoid(logit);
  return {
    surprise,
    z,
    phi,
    cohesionDrop,
    lengthPressure: L,
    turnPressure: N,
    p: prob,
    cut: prob >= p.threshold,
  };
};
