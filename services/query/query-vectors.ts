import type { VectorStore } from "../core/ports.ts";

/**
 * The stored vectors one query reads, each id read once. The graph routes' reranks ask for
 * overlapping ids (a record found by both the entity and the topic route) and the diversity step
 * asks again for the fused candidates, most of which a rerank read already; every read decodes
 * rows (vector and payload), which at a depth of 200 hits per graph route was a large share of a
 * tenant-wide query's time. A vector read once stands for the rest of the query.
 */
export class QueryVectors {
  private readonly known = new Map<string, Float32Array>();

  constructor(
    private readonly store: Pick<VectorStore, "get" | "getVectors">,
    private readonly tenant: string,
  ) {}

  /** The vectors of these ids that the store holds (ids it does not hold are absent). */
  async of(ids: readonly string[]): Promise<ReadonlyMap<string, Float32Array>> {
    const missing = [...new Set(ids)].filter((id) => !this.known.has(id));
    if (missing.length > 0) {
      // The vectors alone where the store can (no payload decoded: nothing here reads it).
      if (this.store.getVectors)
        for (const [id, vector] of await this.store.getVectors(this.tenant, missing)) this.known.set(id, vector);
      else for (const item of await this.store.get(this.tenant, missing)) this.known.set(item.id, item.vector);
    }
    const out = new Map<string, Float32Array>();
    for (const id of ids) {
      const v = this.known.get(id);
      if (v) out.set(id, v);
    }
    return out;
  }
}
