/**
 * Attention-peak boundary refinement (docs/design.md §5, Segmenter; after LightMem): a token classifier's
 * upper-layer self-attention, averaged over layers and heads, says how much each turn (or
 * sentence) still looks at the one before it. Where that sentence-to-previous-sentence attention
 * has a local minimum the text stopped referring back: a topic break. Those candidates are
 * intersected with the similarity gate's candidate cuts, so a boundary needs both signals.
 *
 * Conventions: turns are 0..n-1; a cut b (1 <= b <= n-1) starts a new segment at turn b; the
 * score of b is the mean attention mass turn b's tokens put on turn b-1's tokens (score 0 is
 * undefined: NaN).
 *
 * The first part is pure (attention matrices in, numbers out); the model I/O is in
 * {@link turnAttentionScores} at the end, on top of the `TokenClassifier` port (the ONNX adapter
 * loaded with attentions by whoever wires the segmenter).
 */
import type { TokenClassifier } from "../core/ports.ts";

/** Token positions [start, end) of one sentence/turn inside a sequence. */
export interface Span {
  start: number;
  end: number;
}

/**
 * For a square attention matrix (row-major [size, size], rows = queries, each row a softmax over
 * keys) and consecutive spans, returns per span i >= 1 the mean over span i's tokens of the share
 * of their attention that goes to span i-1; index 0 and empty spans give NaN. The first and last
 * positions (the special tokens, which soak up much of the attention) are masked: each row is
 * renormalised over the remaining keys.
 */
export const previousSpanAttention = (attention: ArrayLike<number>, size: number, spans: readonly Span[]): number[] => {
  if (attention.length !== size * size) {
    throw new Error(`attention has ${attention.length} entries, expected ${size}x${size}`);
  }
  for (const s of spans) {
    if (s.start < 0 || s.end > size || s.start > s.end)
      throw new Error(`span [${s.start}, ${s.end}) outside [0, ${size})`);
  }
  const masked = (u: number): boolean => u === 0 || u === size - 1;
  return spans.map((span, i) => {
    const prev = spans[i - 1];
    if (prev === undefined || span.end <= span.start || prev.end <= prev.start) return Number.NaN;
    let acc = 0;
    let rows = 0;
    for (let t = span.start; t < span.end; t++) {
      if (masked(t)) continue;
      let total = 0;
      let toPrev = 0;
      for (let u = 0; u < size; u++) {
        if (masked(u)) continue;
        const a = attention[t * size + u]!;
        total += a;
        if (u >= prev.start && u < prev.end) toPrev += a;
      }
      acc += total > 0 ? toPrev / total : 0;
      rows++;
    }
    return rows > 0 ? acc / rows : Number.NaN;
  });
};

export interface MinimaOptions {
  /**
   * How far below its neighbours a minimum must lie (the smaller of the two rises; a point with
   * one neighbour uses that one). Default 0: any strict local minimum.
   */
  minDepth?: number;
}

/**
 * Local minima of a score sequence (NaN = undefined, skipped: neighbours are the nearest defined
 * scores). A point is a minimum when it is strictly below its left neighbour and the sequence
 * rises after it (a flat valley counts once, at its first point; the right neighbour is the first
 * different value after the flat run). The first and last defined points compare with their one
 * neighbour; a point with no different neighbour (a constant sequence) is no minimum.
 */
export const localMinima = (scores: readonly number[], opts: MinimaOptions = {}): number[] => {
  const depth = opts.minDepth ?? 0;
  const vals = scores.map((s, i) => ({ s, i })).filter((x) => Number.isFinite(x.s));
  const out: number[] = [];
  vals.forEach(({ s, i }, k) => {
    const left = k > 0 ? vals[k - 1]!.s : undefined;
    if (left !== undefined && !(s < left)) return;
    let j = k + 1;
    while (j < vals.length && vals[j]!.s === s) j++;
    const right = j < vals.length ? vals[j]!.s : undefined;
    if (right !== undefined && right < s) return;
    const rises = [left, right].filter((x): x is number => x !== undefined).map((x) => x - s);
    if (rises.length === 0 || Math.min(...rises) < depth) return;
    out.push(i);
  });
  return out;
};

/**
 * Boundaries both signals agree on: the similarity gate's cuts that have an attention candidate
 * within `tolerance` turns (default 0: the same cut). Sorted, unique, gate positions.
 */
export const intersectBoundaries = (
  attentionCandidates: readonly number[],
  similarityCuts: readonly number[],
  tolerance = 0,
): number[] => {
  if (!Number.isInteger(tolerance) || tolerance < 0) throw new Error(`tolerance must be a non-negative integer`);
  const att = [...new Set(attentionCandidates)].sort((a, b) => a - b);
  const out = new Set<number>();
  for (const c of similarityCuts) {
    if (att.some((a) => Math.abs(a - c) <= tolerance)) out.add(c);
  }
  return [...out].sort((a, b) => a - b);
};

/** Attention candidates from scores (local minima, cut 0 excluded) intersected with the gate's cuts. */
export const refineBoundaries = (
  scores: readonly number[],
  similarityCuts: readonly number[],
  opts: MinimaOptions & { tolerance?: number } = {},
): { candidates: number[]; boundaries: number[] } => {
  const candidates = localMinima(scores, opts).filter((b) => b >= 1);
  return { candidates, boundaries: intersectBoundaries(candidates, similarityCuts, opts.tolerance ?? 0) };
};

// ---------------------------------------------------------------------------------------------
// Model I/O

export interface TurnAttentionOptions {
  /** Layers averaged, counted from the top (default: the upper half of the model's layers). */
  upperLayers?: number;
}

/**
 * The truncation of a (previous, current) pair into one window of `capacity` content tokens:
 * the previous turn keeps its end, the current its beginning, each gets at least half the window
 * when the other needs it.
 */
export const pairLengths = (prev: number, cur: number, capacity: number): { prev: number; cur: number } => {
  const half = Math.floor(capacity / 2);
  const p = Math.min(prev, Math.max(half, capacity - cur));
  return { prev: p, cur: Math.min(cur, capacity - p) };
};

/**
 * Sentence-to-previous-sentence attention of consecutive turns: each pair (turn b-1, turn b) is
 * one model sequence [special, b-1's tokens, b's tokens, special], all pairs batched; the
 * attention of the upper layers averaged over layers and heads, specials masked. Returns one
 * score per turn (index 0 and turns without tokens: NaN). Deterministic for a given model.
 */
export const turnAttentionScores = async (
  classifier: TokenClassifier,
  turns: readonly string[],
  opts: TurnAttentionOptions = {},
): Promise<number[]> => {
  const ids = turns.map((t) =>
    t
      .split(/\s+/)
      .filter(Boolean)
      .flatMap((w) => classifier.wordPieces(w)),
  );
  const pairs: { b: number; seq: number[]; spans: Span[] }[] = [];
  for (let b = 1; b < turns.length; b++) {
    const prev = ids[b - 1]!;
    const cur = ids[b]!;
    if (prev.length === 0 || cur.length === 0) continue;
    const len = pairLengths(prev.length, cur.length, classifier.capacity);
    const p = prev.slice(prev.length - len.prev);
    const c = cur.slice(0, len.cur);
    const off = classifier.prefixLength;
    pairs.push({
      b,
      seq: [...p, ...c],
      spans: [
        { start: off, end: off + p.length },
        { start: off + p.length, end: off + p.length + c.length },
      ],
    });
  }
  const scores = turns.map(() => Number.NaN);
  if (pairs.length === 0) return scores;
  const res = await classifier.run(
    pairs.map((p) => p.seq),
    opts.upperLayers !== undefined ? { upperLayers: opts.upperLayers } : {},
  );
  pairs.forEach((pair, k) => {
    const r = res[k]!;
    scores[pair.b] = previousSpanAttention(r.attention!, r.size, pair.spans)[1]!;
  });
  return scores;
};

/** Model scores, their local minima, and the cuts both the attention and the similarity gate agree on. */
export const attentionBoundaries = async (
  classifier: TokenClassifier,
  turns: readonly string[],
  similarityCuts: readonly number[],
  opts: TurnAttentionOptions & MinimaOptions & { tolerance?: number } = {},
): Promise<{ scores: number[]; candidates: number[]; boundaries: number[] }> => {
  const scores = await turnAttentionScores(classifier, turns, opts);
  return { scores, ...refineBoundaries(scores, similarityCuts, opts) };
};
