import type { Embedder, GraphStore, VectorStore } from "../core/ports.ts";
import type { MemoryRecord, Segment, UpdateCandidate } from "../core/types.ts";
import {
  type CandidateSettings,
  DEFAULT_CANDIDATE_SETTINGS,
  findUpdateCandidates,
  type SegmentPlace,
} from "./candidates.ts";
import { deriveIndexBatch, vectorTexts } from "./derive.ts";

export interface IndexerDeps {
  graph: GraphStore;
  vectors: VectorStore;
  embedder: Embedder;
  /** Update-candidate selection (default: DEFAULT_CANDIDATE_SETTINGS); false: write no candidates. */
  candidates?: CandidateSettings | false;
  /**
   * Awaited before each store step (the vector upsert, the batch write, each round of the
   * segment's candidate lookups): the Kafka indexer's FreshnessGate, which lets its raw-turn writes
   * go first.
   */
  yieldTo?: () => Promise<void>;
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
  deps: Pick<IndexerDeps, "vectors" | "embedder">,
  tenant: string,
  texts: readonly { id: string; text: string; payload: { kind: string } }[],
): Promise<{ vectors: Float32Array[]; stored: ReadonlySet<string> }> => {
  if (texts.length === 0) return { vectors: [], stored: new Set() };
  const turnIds = texts.filter((t) => t.payload.kind === "turn").map((t) => t.id);
  const stored = new Map<string, Float32Array>();
  if (turnIds.length > 0) for (const item of await deps.vectors.get(tenant, turnIds)) stored.set(item.id, item.vector);
  const missing = texts.filter((t) => !(t.payload.kind === "turn" && stored.has(t.id)));
  const fresh = missing.length > 0 ? await deps.embedder.embed(missing.map((t) => t.text)) : [];
  const byId = new Map(missing.map((t, i) => [t.id, fresh[i] as Float32Array]));
  return {
    vectors: texts.map((t) => (stored.get(t.id) ?? byId.get(t.id)) as Float32Array),
    stored: new Set(stored.keys()),
  };
};

/** One segment and its records, as the encoder sends them. */
export interface SegmentRecords {
  segment: Segment;
  records: readonly MemoryRecord[];
}

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
): Promise<IndexOutcome> => (await indexSegments(deps, [{ segment, records }]))[0] as IndexOutcome;

/**
 * Several segments indexed as one group (group commit, issue 18: the Kafka indexer's backlog), with
 * the outcome of each as indexSegment would give it one at a time in the same order: per tenant,
 * one embedding call for all the group's texts, one vector upsert, each segment's graph batch in
 * order, one candidate search round for all the records (each record sees the store as of its own
 * segment: later segments of the group are hidden from it, findUpdateCandidates) and one write of
 * the candidates. On Neo4j each step is a transaction and a tenant scan per segment otherwise.
 */
export const indexSegments = async (deps: IndexerDeps, items: readonly SegmentRecords[]): Promise<IndexOutcome[]> => {
  const outcomes: IndexOutcome[] = [];
  const byTenant = new Map<string, number[]>();
  items.forEach((item, i) => {
    const list = byTenant.get(item.segment.tenant) ?? [];
    list.push(i);
    byTenant.set(item.segment.tenant, list);
  });
  for (const [tenant, indexes] of byTenant) {
    const done = await indexTenantGroup(
      deps,
      tenant,
      indexes.map((i) => items[i] as SegmentRecords),
    );
    indexes.forEach((i, j) => {
      outcomes[i] = done[j] as IndexOutcome;
    });
  }
  return outcomes;
};

const indexTenantGroup = async (
  deps: IndexerDeps,
  tenant: string,
  group: readonly SegmentRecords[],
): Promise<IndexOutcome[]> => {
  const batches = group.map(({ segment, records }) => deriveIndexBatch(segment, records));
  const texts = batches.flatMap((batch) => vectorTexts(batch));
  const { vectors, stored } = await embedMissing(deps, tenant, texts);
  if (deps.yieldTo) await deps.yieldTo();
  await deps.vectors.upsert(
    tenant,
    texts.flatMap((t, i) =>
      stored.has(t.id) ? [] : [{ id: t.id, vector: vectors[i] as Float32Array, payload: t.payload }],
    ),
  );
  for (const batch of batches) {
    if (deps.yieldTo) await deps.yieldTo();
    await deps.graph.writeBatch(batch);
  }
  const records = batches.flatMap((b) => b.records);
  const found: UpdateCandidate[] = [];
  if (deps.candidates !== false && records.length > 0) {
    const vectorOf = new Map<string, Float32Array>();
    texts.forEach((t, i) => {
      if (t.payload.kind === "record") vectorOf.set(t.id, vectors[i] as Float32Array);
    });
    const places: SegmentPlace[] = batches.flatMap((b, order) =>
      b.records.map(() => ({ conversation: b.segment.conversation, end: b.segment.end, order })),
    );
    found.push(
      ...(await findUpdateCandidates(
        deps,
        tenant,
        records,
        vectorOf,
        deps.candidates ?? DEFAULT_CANDIDATE_SETTINGS,
        places,
      )),
    );
    if (found.length > 0) await deps.graph.putUpdateCandidates(found);
  }
  return batches.map((b) => {
    const mine = new Set(b.records.map((r) => r.id));
    return {
      records: b.records.length,
      turns: b.segment.turns.length,
      frames: b.eventFrames.length,
      candidates: found.filter((c) => mine.has(c.recordId)),
    };
  });
};
