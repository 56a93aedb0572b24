/**
 * The records consumer's view of the indexer's one embedder (issue 18). The model runs one call
 * at a time (its queue is first come, first served), and the indexer's two consumers share it.
 * What is more, onnxruntime-node runs a session on the event loop (its run() is a setImmediate
 * around the native call): for as long as a call lasts nothing else in the process moves, neither
 * the raw-turn consumer's store writes nor its Kafka commit. A segment's record texts in one call
 * (tens of texts, 1-2 s on a loaded machine, measured with MEMORY_TRACING) held every raw turn that
 * arrived meanwhile for all of them. Embedding them in slices, one call after another, lets a
 * raw-turn call and the process's other work in between any two slices: they wait for one slice at
 * most. Same vectors, same order; only the calls differ.
 */
import { DelegatingEmbedder } from "../core/delegating-embedder.ts";
import type { Embedder } from "../core/ports.ts";

export class SlicedEmbedder extends DelegatingEmbedder {
  constructor(
    inner: Embedder,
    /** Texts per call (at least 1). */
    readonly slice: number,
    /** Awaited before each call (the indexer's FreshnessGate: raw-turn writes first). */
    private readonly before?: () => Promise<void>,
  ) {
    super(inner);
    if (!Number.isInteger(slice) || slice < 1) throw new Error(`slice must be a positive integer, got ${slice}`);
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    const out: Float32Array[] = [];
    for (let i = 0; i < texts.length; i += this.slice) {
      if (this.before) await this.before();
      out.push(...(await this.inner.embed(texts.slice(i, i + this.slice))));
    }
    return out;
  }

  // No close(): the inner embedder is shared, its owner closes it.
}
