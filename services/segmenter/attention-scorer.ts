/**
 * Attention shares for the segmenter's runtimes: the share of a turn's attention that goes to the
 * previous turn, read from one window [CLS] previous current [SEP] (attention-boundaries.ts
 * previousSpanAttention). A window holds only the pair, so a share does not depend on how the
 * runtime batched its input: the embedded engine and the Kafka stage get the same numbers.
 *
 * Cost: the runtimes call prepare() once per batch with every pair the batch will ask for (the
 * model runs them in batched forward passes beside the embedding call); share() then reads the
 * memo, and computes only a pair nobody prepared (the first turn of a Kafka chunk, whose
 * predecessor is in the stored state).
 */
import { compactKey, LruCache } from "../core/lru-cache.ts";
import type { TurnAttention } from "../core/ports.ts";
import { previousSpanAttention } from "./attention-boundaries.ts";

export interface TurnPair {
  previous: string;
  current: string;
}

/**
 * Memo entries kept by default (config cache.attentionPairs): pairs of recent batches, least
 * recently used dropped first. The memo only has to span one batch (prepare, then share), so it
 * stays small whatever the number of tenants.
 */
export const DEFAULT_ATTENTION_MEMO_ENTRIES = 4096;

/** Pairs longer than this are keyed by a digest, so a memo entry stays small with long turns. */
const DIGEST_KEY_CHARS = 512;

const keyOf = (p: TurnPair): string =>
  compactKey(`${p.previous.length}:${p.previous}\u0000${p.current}`, DIGEST_KEY_CHARS);

export class AttentionScorer {
  private readonly memo: LruCache<string, number>;

  constructor(
    readonly attention: TurnAttention,
    memoEntries = DEFAULT_ATTENTION_MEMO_ENTRIES,
  ) {
    this.memo = new LruCache(memoEntries);
  }

  /** Pairs memoised now (tests, bounds). */
  get size(): number {
    return this.memo.size;
  }

  /** Computes the shares of the pairs not memoised yet, in one attend() call. */
  async prepare(pairs: readonly TurnPair[]): Promise<void> {
    const todo = new Map<string, TurnPair>();
    for (const p of pairs) {
      const k = keyOf(p);
      if (this.memo.get(k) === undefined) todo.set(k, p);
    }
    if (todo.size === 0) return;
    const entries = [...todo.entries()];
    const windows = await this.attention.attend(entries.map(([, p]) => [p.previous, p.current]));
    entries.forEach(([k], i) => {
      const w = windows[i];
      if (!w) throw new Error("turn attention returned fewer windows than asked for");
      this.memo.set(k, previousSpanAttention(w.attention, w.size, w.spans)[1] ?? Number.NaN);
    });
  }

  /** The share of `current`'s attention on `previous` (NaN when either has no tokens). */
  async share(previous: string, current: string): Promise<number> {
    const k = keyOf({ previous, current });
    const memoised = this.memo.get(k);
    if (memoised !== undefined) return memoised;
    await this.prepare([{ previous, current }]);
    return this.memo.get(k) ?? Number.NaN;
  }
}
