import type { Embedder, GraphStore, VectorStore } from "../core/ports.ts";
import type { MemoryRecord, Segment } from "../core/types.ts";
import { deriveIndexBatch, vectorTexts } from "./derive.ts";

export interface IndexerDeps {
  graph: GraphStore;
  vectors: VectorStore;
  embedder: Embedder;
}

export interface IndexOutcome {
  records: number;
  turns: number;
  frames: number;
}

/**
 * The indexer sink: derived indexes are pure (derive.ts); writes are idempotent upserts keyed by
 * deterministic ids, so replaying a segment after a crash changes nothing. Vectors go first: a
 * record is only listed once its vector exists, so the dense route never misses a visible record.
 */
export const indexSegment = async (
  deps: IndexerDeps,
  segment: Segment,
  records: readonly MemoryRecord[],
): Promise<IndexOutcome> => {
  const batch = deriveIndexBatch(segment, records);
  const texts = vectorTexts(batch);
  const vectors = texts.length > 0 ? await deps.embedder.embed(texts.map((t) => t.text)) : [];
  await deps.vectors.upsert(
    batch.tenant,
    texts.map((t, i) => ({ id: t.id, vector: vectors[i] as Float32Array, payload: t.payload })),
  );
  await deps.graph.writeBatch(batch);
  return { records: batch.records.length, turns: segment.turns.length, frames: batch.eventFrames.length };
};
