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
import type { TurnAttention } from "../core/ports.ts";
import { previousSpanAttention } from "./attention-boundaries.ts";

export interface TurnPair {
  previous: string;
  current: string;
}

/** Memo entries kept (pairs of recent batches); oldest dropped first. */
const MEMO_LIMIT = 4096;

const keyOf = (p: TurnPair): string => `${p.previous.length}:${p.previous}\u0000${p.current}`;

export class AttentionScorer {
  private readonly memo = new Map<string, number>();

  constructor(readonly attention: TurnAttention) {}

  /** Computes the shares of the pairs not memoised yet, in one attend() call. */
  async prepare(pairs: readonly TurnPair[]): Promise<void> {
    const todo = new Map<string, TurnPair>();
    for (const p of pairs) {
      const k = keyOf(p);
      if (!this.memo.has(k)) todo.set(k, p);
    }
    if (todo.size === 0) return;
    const entries = [...todo.entries()];
    const windows = await this.attention.attend(entries.map(([, p]) => [p.previous, p.current]));
    entries.forEach(([k], i) => {
      const w = windows[i];
      if (!w) throw new Error("turn attention returned fewer windows than asked for");
      this.remember(k, previousSpanAttention(w.attention, w.size, w.spans)[1] ?? Number.NaN);
    });
  }

  /** The share of `current`'s attention on `previous` (NaN when either has no tokens). */
  async share(previous: string, current: string): Promise<number> {
    const k = keyOf({ previous, current });
    if (!this.memo.has(k)) await this.prepare([{ previous, current }]);
    return this.memo.get(k) ?? Number.NaN;
  }

  private remember(k: string, v: number): void {
    this.memo.set(k, v);
    if (this.memo.size > MEMO_LIMIT) {
      const oldest = this.memo.keys().next().value;
      if (oldest !== undefined) this.memo.delete(oldest);
    }
  }
}
