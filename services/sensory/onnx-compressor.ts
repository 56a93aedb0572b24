/**
 * LLMLingua-2-style compressor (docs/design.md §5, Sensory): a token classifier gives every sub-token a
 * keep probability (softmax over its 2 labels); sub-token probabilities become word
 * probabilities; the words above the r-quantile survive, plus the force-kept ones (numbers,
 * dates, capitalised names: isForceKept); if nothing survives the original is kept.
 *
 * Words are the whitespace-separated tokens of the text, as in the statistical compressor, so
 * output is always a subsequence of the input's words joined by single spaces, and keptRatio is
 * comparable between the two compressors.
 *
 * Word aggregation: the mean over the word's sub-tokens (default; the manifest or the options may
 * say "first" or "max"). LLMLingua-2 uses the mean: its labels are word-level (every sub-token of
 * a kept word was trained as "keep"), so all pieces carry evidence and the mean is the least noisy
 * estimate; "first" ignores the pieces that tell a rare word apart, "max" lets one confident piece
 * keep a long word (numbers split into many pieces).
 *
 * Windows: a text with more sub-tokens than the model window is split on word boundaries into
 * consecutive windows, each filled greedily; the quantile is taken per window (as LLMLingua-2
 * does per chunk), so a long text compresses exactly like its windows compressed one by one and
 * concatenated. A single word longer than a window is scored from its first window-full of pieces.
 *
 * Batching: all windows of one call go through the model together (batchSize sequences per
 * session.run), and compress() calls made while a run is in flight are coalesced into the next run.
 *
 * The model is reached through the `TokenClassifier` port; loading one (the ONNX adapter) is the
 * process wiring's job (onnx-compressor-config.ts).
 */
import type { CompressionResult, Compressor, TokenClassifier, WordAggregation } from "../core/ports.ts";
import { isForceKept } from "./statistical-compressor.ts";

/** The whitespace-separated words of a text. */
export const splitWords = (text: string): string[] => text.split(/\s+/).filter(Boolean);

/** Which words may not be dropped (numbers, dates, capitalised names not at a sentence start). */
export const forcedWords = (words: readonly string[]): boolean[] =>
  words.map((w, i) => {
    const prev = words[i - 1];
    const sentenceInitial = i === 0 || (prev !== undefined && /[.!?]["')\]]*$/.test(prev));
    return isForceKept(w, sentenceInitial);
  });

/** A run of consecutive words that fits one model window. */
export interface Window {
  /** Index of the window's first word in the text. */
  start: number;
  /** One past its last word. */
  end: number;
  /** Content token ids (concatenated word pieces, truncated for an over-long single word). */
  ids: number[];
  /** For each content token, the index of its word (absolute). */
  wordOf: number[];
}

/**
 * Greedy word-boundary windows: words are added while their pieces fit `capacity` tokens. A
 * word with no pieces (it normalises to nothing) joins the current window without tokens.
 */
export const planWindows = (pieces: readonly (readonly number[])[], capacity: number): Window[] => {
  if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`window capacity must be >= 1, got ${capacity}`);
  const windows: Window[] = [];
  let cur: Window | undefined;
  pieces.forEach((p, w) => {
    if (cur !== undefined && cur.ids.length + p.length > capacity) {
      windows.push(cur);
      cur = undefined;
    }
    cur ??= { start: w, end: w, ids: [], wordOf: [] };
    const take = p.slice(0, capacity);
    for (const id of take) {
      cur.ids.push(id);
      cur.wordOf.push(w);
    }
    cur.end = w + 1;
  });
  if (cur !== undefined) windows.push(cur);
  return windows;
};

/**
 * Word probabilities from sub-token probabilities. wordOf[t] is token t's word index relative to
 * `start`; words without tokens get 0 (they can only survive as force-kept words).
 */
export const aggregateWordProbabilities = (
  tokenProbs: ArrayLike<number>,
  wordOf: readonly number[],
  start: number,
  words: number,
  mode: WordAggregation,
): number[] => {
  const sum = new Array<number>(words).fill(0);
  const count = new Array<number>(words).fill(0);
  const first = new Array<number>(words).fill(Number.NaN);
  const max = new Array<number>(words).fill(Number.NEGATIVE_INFINITY);
  for (let t = 0; t < wordOf.length; t++) {
    const w = wordOf[t]! - start;
    const p = tokenProbs[t]!;
    if (w < 0 || w >= words)
      throw new Error(`token ${t} belongs to word ${w + start}, outside [${start}, ${start + words})`);
    sum[w]! += p;
    count[w]! += 1;
    if (Number.isNaN(first[w]!)) first[w] = p;
    max[w] = Math.max(max[w]!, p);
  }
  return sum.map((s, w) => {
    if (count[w] === 0) return 0;
    if (mode === "first") return first[w]!;
    if (mode === "max") return max[w]!;
    return s / count[w]!;
  });
};

/**
 * The r-quantile rule: force-kept words count as probability 1 (as LLMLingua-2's force tokens),
 * the threshold is the ceil(r·n)-th largest probability, ties at the threshold broken by
 * position, so exactly max(ceil(r·n), forced) words survive. Returns a keep flag per word.
 */
export const selectByQuantile = (probs: readonly number[], forced: readonly boolean[], keepRate: number): boolean[] => {
  const n = probs.length;
  if (n === 0) return [];
  if (keepRate >= 1) return probs.map(() => true);
  const quota = Math.max(1, Math.ceil(keepRate * n));
  const keep = forced.slice(0, n).map(Boolean);
  while (keep.length < n) keep.push(false);
  let kept = keep.filter(Boolean).length;
  const ranked = probs
    .map((p, i) => ({ p: Number.isFinite(p) ? p : 0, i }))
    .filter((x) => !keep[x.i])
    .sort((a, b) => b.p - a.p || a.i - b.i);
  for (const x of ranked) {
    if (kept >= quota) break;
    keep[x.i] = true;
    kept++;
  }
  return keep;
};

export interface OnnxCompressorOptions {
  /** Default: the manifest's word_aggregation ("mean"). */
  aggregation?: WordAggregation;
}

interface Pending {
  texts: readonly string[];
  keepRate: number;
  resolve: (r: CompressionResult[]) => void;
  reject: (e: unknown) => void;
}

export class OnnxCompressor implements Compressor {
  readonly id: string;
  readonly aggregation: WordAggregation;
  private readonly classifier: TokenClassifier;
  private readonly ownsClassifier: boolean;
  private pending: Pending[] = [];
  private draining = false;

  constructor(classifier: TokenClassifier, opts: OnnxCompressorOptions & { ownsClassifier?: boolean } = {}) {
    this.classifier = classifier;
    this.aggregation = opts.aggregation ?? classifier.aggregation;
    this.ownsClassifier = opts.ownsClassifier ?? false;
    this.id = `onnx:${classifier.name}:${this.aggregation}`;
  }

  /** The windows a text is split into (for inspection and tests). */
  windows(text: string): { words: string[]; windows: Window[] } {
    const words = splitWords(text);
    return {
      words,
      windows: planWindows(
        words.map((w) => this.classifier.wordPieces(w)),
        this.classifier.capacity,
      ),
    };
  }

  async compress(text: string, keepRate: number): Promise<CompressionResult> {
    const [r] = await this.compressMany([text], keepRate);
    return r!;
  }

  /** Several texts (turns) at once; their windows share session.run batches. */
  compressMany(texts: readonly string[], keepRate: number): Promise<CompressionResult[]> {
    if (!(keepRate > 0 && keepRate <= 1))
      return Promise.reject(new Error(`keepRate must be in (0, 1], got ${keepRate}`));
    return new Promise((resolve, reject) => {
      this.pending.push({ texts, keepRate, resolve, reject });
      if (!this.draining) {
        this.draining = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        const reqs = this.pending.splice(0);
        try {
          const results = await this.compressNow(reqs);
          reqs.forEach((r, i) => {
            r.resolve(results[i]!);
          });
        } catch (err) {
          for (const r of reqs) r.reject(err);
        }
      }
    } finally {
      this.draining = false;
    }
  }

  private async compressNow(reqs: readonly Pending[]): Promise<CompressionResult[][]> {
    interface Job {
      text: string;
      keepRate: number;
      words: string[];
      windows: Window[];
    }
    const jobs: Job[][] = reqs.map((r) =>
      r.texts.map((text) => {
        if (r.keepRate >= 1) return { text, keepRate: r.keepRate, words: [], windows: [] };
        const { words, windows } = this.windows(text);
        return { text, keepRate: r.keepRate, words, windows };
      }),
    );
    const all = jobs.flat().flatMap((j) => j.windows);
    const classified = all.length > 0 ? await this.classifier.run(all.map((w) => w.ids)) : [];
    let k = 0;
    return jobs.map((js) =>
      js.map((job): CompressionResult => {
        if (job.words.length === 0) return { text: job.text, keptRatio: 1 };
        const forced = forcedWords(job.words);
        const kept: string[] = [];
        for (const w of job.windows) {
          const keep = classified[k++]!.keep;
          const n = w.end - w.start;
          const probs = aggregateWordProbabilities(keep, w.wordOf, w.start, n, this.aggregation);
          const flags = selectByQuantile(probs, forced.slice(w.start, w.end), job.keepRate);
          flags.forEach((f, i) => {
            if (f) kept.push(job.words[w.start + i]!);
          });
        }
        if (kept.length === 0) return { text: job.text, keptRatio: 1 };
        return { text: kept.join(" "), keptRatio: kept.length / job.words.length };
      }),
    );
  }

  async close(): Promise<void> {
    if (this.ownsClassifier) await this.classifier.close();
  }
}
