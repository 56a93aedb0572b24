/**
 * An embedder that wraps another one (a cache, slices, a prefetch): the model's id, dimension and
 * stats are the inner one's, so that stats() always counts real model work, whatever the wrappers;
 * each wrapper only says how it embeds. It has no close(): a wrapper that owns the inner embedder
 * adds one (CachingEmbedder), the others leave it to the owner.
 */
import type { Embedder, EmbedderStats } from "./ports.ts";

export abstract class DelegatingEmbedder implements Embedder {
  constructor(protected readonly inner: Embedder) {}

  get id(): string {
    return this.inner.id;
  }

  get dimension(): number {
    return this.inner.dimension;
  }

  stats(): EmbedderStats {
    return this.inner.stats();
  }

  abstract embed(texts: readonly string[]): Promise<Float32Array[]>;
}
