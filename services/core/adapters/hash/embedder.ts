/**
 * HashingEmbedder: a deterministic FAKE embedder for unit tests of other components.
 *
 * NOT FOR PRODUCTION. It has no notion of meaning: texts are similar only when they share
 * words. Vectors are feature-hashed lower-cased word unigrams and bigrams (FNV-1a, signed)
 * in `dimension` slots (default 256), L2-normalised. Texts without any word map to one
 * fixed unit vector. Use OnnxEmbedder (services/core/adapters/onnx/embedder.ts) for real
 * embeddings.
 */
import type { Embedder, EmbedderStats } from "../../ports.ts";

const WORD = /[\p{L}\p{N}]+/gu;
const EMPTY_FEATURE = "\u0000empty";

/** 32-bit FNV-1a over the UTF-16 code units. */
const fnv1a = (s: string): number => {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
};

export class HashingEmbedder implements Embedder {
  readonly id: string;
  readonly dimension: number;
  private readonly counters: EmbedderStats = { calls: 0, texts: 0, ms: 0 };

  constructor(dimension = 256) {
    if (!Number.isInteger(dimension) || dimension < 2) throw new Error(`dimension must be an integer >= 2`);
    this.dimension = dimension;
    this.id = `hash:${dimension}`;
  }

  stats(): EmbedderStats {
    return { ...this.counters };
  }

  /** Synchronous core, handy in tests. */
  embedOne(text: string): Float32Array {
    const words = text.toLowerCase().match(WORD) ?? [];
    const features: string[] = words.map((w) => `u:${w}`);
    for (let i = 0; i + 1 < words.length; i++) features.push(`b:${words[i]} ${words[i + 1]}`);
    if (features.length === 0) features.push(EMPTY_FEATURE);
    const v = new Float32Array(this.dimension);
    for (const f of features) {
      const h = fnv1a(f);
      const slot = h % this.dimension;
      v[slot] = (v[slot] ?? 0) + ((h >>> 31) & 1 ? -1 : 1);
    }
    let norm = 0;
    for (const x of v) norm += x * x;
    if (norm === 0) {
      // All features cancelled out: fall back to the fixed empty-text direction.
      v[fnv1a(EMPTY_FEATURE) % this.dimension] = 1;
      return v;
    }
    const inv = 1 / Math.sqrt(norm);
    for (let i = 0; i < v.length; i++) v[i] = (v[i] ?? 0) * inv;
    return v;
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    const t0 = performance.now();
    const out = texts.map((t) => this.embedOne(t));
    this.counters.calls += 1;
    this.counters.texts += texts.length;
    this.counters.ms += performance.now() - t0;
    return out;
  }
}
