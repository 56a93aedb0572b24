import type { Embedder, GraphStore, VectorStore } from "../core/ports.ts";
import type { MemoryRecord, Segment, UpdateCandidate } from "../core/types.ts";
import { type CandidateSettings, DEFAULT_CANDIDATE_SETTINGS, findUpdateCandidates } from "./candidates.ts";
import { deriveIndexBatch, vectorTexts } from "./derive.ts";

export interface IndexerDeps {
  graph: GraphStore;
  vectors: VectorStore;
  embedder: Embedder;
  /**
   * The second-opinion model (config secondOpinion): when set, every vector written carries its
   * vector of the same text too (VectorItem.second), which the query reads by id.
   */
  secondEmbedder?: Embedder;
  /** Update-candidate selection (default: DEFAULT_CANDIDATE_SETTINGS); false: write no candidates. */
  candidates?: CandidateSettings | false;
  /**
   * Awaited before each store step (the vector upsert, the batch write, each round of the
   * segment's candidate lookups): the Kafka indexer's FreshnessGate, which lets its raw-turn writes
   * go first.
   */
  yieldTo?: () => Promise<void>;
  /**
   * Called once the segment's texts are embedded, before its store steps: the Kafka indexer starts
   * embedding the next segment of its chunk then (embedding-prefetch.ts).
   */
  onEmbedded?: () => void;
}

export interface IndexOutcome {
  records: number;
  turns: number;
  frames: number;
  /**
   * The update candidates written for consolidation (the Kafka stage also produces them to the
   * update queue): the indexer says what it wrote, nobody needs to watch the store.
   */
  candidates: UpdateCandidate[];
}

/**
 * The vectors of the texts, in order, and which of them are stored already. Raw turns written as
 * they arrived (raw-turns.ts) have theirs stored: those are read back, not embedded again (a long
 * turn is embedded once), and not written again either (same vector, same payload).
 */
const embedMissing = async (
  deps: Pick<IndexerDeps, "vectors" | "embedder" | "secondEmbedder">,
  tenant: string,
  texts: readonly { id: string; text: string; payload: { kind: string } }[],
): Promise<{ vectors: Float32Array[]; stored: ReadonlySet<string> }> => {
  if (texts.length === 0) return { vectors: [], stored: new Set() };
  const turnIds = texts.filter((t) => t.payload.kind === "turn").map((t) => t.id);
  const stored = new Map<string, Float32Array>();
  // A turn stored without the second-opinion vector (written before the setting was on) is written
  // again with one; a store that keeps no second vectors (Qdrant) is not asked for them.
  const needsSecond = deps.secondEmbedder !== undefined && deps.vectors.getSecondVectors !== undefined;
  if (turnIds.length > 0) {
    for (const item of await deps.vectors.get(tenant, turnIds)) {
      if (!needsSecond || item.second) stored.set(item.id, item.vector);
    }
  }
  const missing = texts.filter((t) => !(t.payload.kind === "turn" && stored.has(t.id)));
  const fresh = missing.length > 0 ? await deps.embedder.embed(missing.map((t) => t.text)) : [];
  const byId = new Map(missing.map((t, i) => [t.id, fresh[i] as Float32Array]));
  return {
    vectors: texts.map((t) => (stored.get(t.id) ?? byId.get(t.id)) as Float32Array),
    stored: new Set(stored.keys()),
  };
};

/**
 * The indexer sink: derived indexes are pure (derive.ts); writes are idempotent upserts keyed by
 * deterministic ids, so replaying a segment after a crash changes nothing (its candidates too: see
 * findUpdateCandidates on what a replay finds in the store). Vectors go first: a
 * record is only listed once its vector exists, so the dense route never misses a visible record.
 * Then each new record's update candidates (older records to consolidate it with) are written to
 * the update queue; online updates stay soft: nothing else changes until consolidation.
 */
export const indexSegment = async (
  deps: IndexerDeps,
  segment: Segment,
  records: readonly MemoryRecord[],
): Promise<IndexOutcome> => {
  const batch = deriveIndexBatch(segment, records);
  const texts = vectorTexts(batch);
  const { vectors, stored } = await embedMissing(deps, batch.tenant, texts);
  deps.onEmbedded?.();
  if (deps.yieldTo) await deps.yieldTo();
  const fresh = texts.flatMap((t, i) =>
    stored.has(t.id) ? [] : [{ id: t.id, vector: vectors[i] as Float32Array, payload: t.payload, text: t.text }],
  );
  const seconds = deps.secondEmbedder ? await deps.secondEmbedder.embed(fresh.map((f) => f.text)) : undefined;
  await deps.vectors.upsert(
    batch.tenant,
    fresh.map(({ text: _text, ...item }, i) => (seconds ? { ...item, second: seconds[i] as Float32Array } : item)),
  );
  if (deps.yieldTo) await deps.yieldTo();
  await deps.graph.writeBatch(batch);
  let candidates: UpdateCandidate[] = [];
  if (deps.candidates !== false && batch.records.length > 0) {
    const vectorOf = new Map<string, Float32Array>();
    texts.forEach((t, i) => {
      if (t.payload.kind === "record") vectorOf.set(t.id, vectors[i] as Float32Array);
    });
    const found = await findUpdateCandidates(
      deps,
      batch.tenant,
      batch.records,
      vectorOf,
      deps.candidates ?? DEFAULT_CANDIDATE_SETTINGS,
      { conversation: segment.conversation, end: segment.end },
    );
    if (found.length > 0) await deps.graph.putUpdateCandidates(found);
    candidates = found;
  }
  return {
    records: batch.records.length,
    turns: segment.turns.length,
    frames: batch.eventFrames.length,
    candidates,
  };
};
