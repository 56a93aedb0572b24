/**
 * The records consumer's embedding of the next segment while the current one is in the stores
 * (issue 18). A segment's indexing is its record texts' embedding, then Neo4j round trips (vector
 * upsert, graph batch, candidate lookups and writes) during which the indexer process only waits.
 * When the chunk holds a next segment, its texts are embedded meanwhile: Neo4j works on one segment
 * while the model works on the next. The vectors are the same whatever the call (onnxruntime gives
 * the same floats for a text in any batch), so only the time changes. The indexer process runs its
 * model on a worker thread (composition/parts.ts openStageEmbedderThread), so the stores' answers
 * are handled while the next segment is embedded. Tried on two loaded cores with the model on the
 * event loop, it gained nothing; on a quiet machine, with the worker, the freshness bench's
 * throughput phase takes ~12% less wall time (docs/benchmarks.md, issue 18).
 *
 * Bounded: it holds the texts of the last few segments asked ahead (one per partition handled at
 * once), each taken by the embed() that asks for it; past PREFETCHES_KEPT the oldest is dropped
 * (its embed() then asks the model again).
 */
import { DelegatingEmbedder } from "../core/delegating-embedder.ts";

/** Segments' texts held ahead at most: one per partition the records consumer handles at once. */
const PREFETCHES_KEPT = 4;

export class EmbeddingPrefetch extends DelegatingEmbedder {
  private readonly ahead = new Map<string, Promise<Float32Array | undefined>>();
  /** The texts of each prefetch not yet taken, oldest first. */
  private readonly prefetches: string[][] = [];

  /** Starts embedding `texts` now, for an embed() that asks for them later; not awaited. */
  prefetch(texts: readonly string[]): void {
    const wanted = [...new Set(texts)];
    if (wanted.length === 0) return;
    this.prefetches.push(wanted);
    while (this.prefetches.length > PREFETCHES_KEPT)
      for (const t of this.prefetches.shift() ?? []) this.ahead.delete(t);
    // A failed prefetch is not an error of anyone's yet: the embed() that wants the texts asks again.
    const call = this.inner.embed(wanted).catch(() => undefined);
    wanted.forEach((text, i) => {
      this.ahead.set(
        text,
        call.then((vs) => vs?.[i]),
      );
    });
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    const early = texts.map((t) => this.ahead.get(t));
    for (const t of texts) this.ahead.delete(t);
    const got = await Promise.all(early.map((p) => p ?? Promise.resolve(undefined)));
    const missing = [...new Set(texts.filter((_, i) => got[i] === undefined))];
    const fresh = missing.length > 0 ? await this.inner.embed(missing) : [];
    const byText = new Map(missing.map((t, i) => [t, fresh[i] as Float32Array]));
    return texts.map((t, i) => (got[i] ?? byText.get(t)) as Float32Array);
  }

  // No close(): the inner embedder is shared, its owner closes it.
}
