import type { Embedder, EmbedderStats } from "./ports.ts";

/**
 * An LRU cache in front of an embedder. The pipeline embeds the same text more than once (a turn
 * for the boundary gate, then again as a raw turn for the fallback route); the model is the
 * costliest step of ingest, so each distinct text is embedded once while it is recent.
 * stats() are the inner model's: they count real model work, not cache hits.
 */
export class CachingEmbedder implements Embedder {
  private readonly cache = new Map<string, Float32Array>();
  hits = 0;

  constructor(
    private readonly inner: Embedder,
    private readonly capacity = 4096,
  ) {}

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
    const missing = new Set(texts.filter((t) => !this.cache.has(t)));
    if (missing.size > 0) {
      const list = [...missing];
      const vectors = await this.inner.embed(list);
      for (const [i, t] of list.entries()) this.remember(t, vectors[i] as Float32Array);
    }
    return texts.map((t) => {
      const v = this.cache.get(t);
      if (!v) throw new Error("embedding cache lost a vector it was just given");
      if (!missing.has(t)) this.hits++;
      this.remember(t, v);
      return v;
    });
  }

  close(): Promise<void> {
    return this.inner.close?.() ?? Promise.resolve();
  }

  private remember(text: string, vector: Float32Array): void {
    this.cache.delete(text);
    this.cache.set(text, vector);
    while (this.cache.size > this.capacity) {
      const oldest = this.cache.keys().next().value;
      if (oldest === undefined) break;
      this.cache.delete(oldest);
    }
  }
}
