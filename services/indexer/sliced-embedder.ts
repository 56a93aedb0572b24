/**
 * The records consumer's view of the indexer's one embedder (issue 18). The model runs one call
 * at a time (its queue is first come, first served), and the indexer's two consumers share it:
 * a segment's record texts in one call (tens of texts, seconds on a loaded machine) made every raw
 * turn that arrived meanwhile wait for all of them, which is what put the raw-turn p95 over 2 s.
 * Embedding them in slices, one call after another, lets a raw-turn call in between any two
 * slices: it waits for one slice at most. Same vectors, same order; only the calls differ.
 */
import type { Embedder, EmbedderStats } from "../core/ports.ts";

export class SlicedEmbedder implements Embedder {
  constructor(
    private readonly inner: Embedder,
    /** Texts per call (at least 1). */
    readonly slice: number,
  ) {
    if (!Number.isInteger(slice) || slice < 1) throw new Error(`slice must be a positive integer, got ${slice}`);
  }

  get id(): string {
    return this.inner.id;
  }

  get dimension(): number {
    return this.inner.dimension;
  }

  stats(): EmbedderStats {
    return this.inner.stats();
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    if (texts.length <= this.slice) return this.inner.embed(texts);
    const out: Float32Array[] = [];
    for (let i = 0; i < texts.length; i += this.slice)
      out.push(...(await this.inner.embed(texts.slice(i, i + this.slice))));
    return out;
  }

  // No close(): the inner embedder is shared, its owner closes it.
}
