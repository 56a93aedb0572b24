import { DelegatingEmbedder } from "./delegating-embedder.ts";
import { compactKey, LruCache } from "./lru-cache.ts";
import type { Embedder } from "./ports.ts";

/** Entries the cache keeps by default (config cache.embeddingEntries, MEMORY_EMBEDDING_CACHE_ENTRIES). */
export const DEFAULT_EMBEDDING_CACHE_ENTRIES = 4096;

/**
 * Texts longer than this are keyed by their SHA-256 instead of themselves: a long assistant turn
 * (tens of KB) would otherwise hold its whole text in the cache beside a 1.5 KB vector, and the
 * cache's memory is meant to be entries × (vector + a short key).
 */
const DIGEST_KEY_CHARS = 256;

const keyOf = (text: string): string => compactKey(text, DIGEST_KEY_CHARS);

/**
 * An LRU cache in front of an embedder, shared by every tenant of a process. Within a stage the
 * same text is asked for more than once (the Kafka segmenter embeds a chunk's turns in one call,
 * then reads each; the indexer's raw-turn consumer embeds turns its records consumer meets again
 * at segment close; a question is embedded once for several budgets); the model is the costliest
 * step, so each distinct text is embedded once while it is recent. Bounded: at most `capacity`
 * entries of one vector and a key of at most ~260 characters each, whatever the number of tenants.
 * stats() are the inner model's: they count real model work, not cache hits.
 */
export class CachingEmbedder extends DelegatingEmbedder {
  private readonly cache: LruCache<string, Float32Array>;
  hits = 0;

  constructor(
    inner: Embedder,
    readonly capacity = DEFAULT_EMBEDDING_CACHE_ENTRIES,
  ) {
    super(inner);
    this.cache = new LruCache(capacity);
  }

  /** Entries held now (tests, bounds). */
  get size(): number {
    return this.cache.size;
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    const keys = texts.map(keyOf);
    // Read every hit before the model call: the call's own entries must not evict them (a call of
    // more texts than the capacity still gets every vector back).
    const found = keys.map((k) => this.cache.get(k));
    const missing = new Map<string, string>();
    keys.forEach((k, i) => {
      if (found[i] === undefined) missing.set(k, texts[i] as string);
      else this.hits++;
    });
    const fresh = new Map<string, Float32Array>();
    if (missing.size > 0) {
      const vectors = await this.inner.embed([...missing.values()]);
      if (vectors.length !== missing.size)
        throw new Error(`embedder returned ${vectors.length} vectors for ${missing.size} texts`);
      [...missing.keys()].forEach((k, i) => {
        const v = vectors[i] as Float32Array;
        fresh.set(k, v);
        this.cache.set(k, v);
      });
    }
    return keys.map((k, i) => (found[i] ?? fresh.get(k)) as Float32Array);
  }

  close(): Promise<void> {
    return this.inner.close?.() ?? Promise.resolve();
  }
}
