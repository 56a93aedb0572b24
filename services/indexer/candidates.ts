/**
 * Update candidates, computed by the indexer for each new record: older records of the same tenant
 * (any conversation) that consolidation should compare it with. A pure selection over the
 * neighbours found, and a small async function that finds them with the stores. Online updates
 * stay soft: candidates are only written down here, nothing else changes until consolidation.
 */
import { mapLimit } from "../core/map-limit.ts";
import type { GraphStore, VectorStore } from "../core/ports.ts";
import { nameKey } from "../core/text/names.ts";
import { analyse } from "../core/text/statement.ts";
import type { MemoryRecord, UpdateCandidate } from "../core/types.ts";
import { cosine } from "../core/vector-math.ts";

export interface CandidateSettings {
  /** Cosine similarity of the record texts at or above which an older record is a candidate. */
  similarityThreshold: number;
  /** Nearest neighbours looked at per route. */
  neighbours: number;
  /** Most candidates kept per record (similarity ones first, then by similarity). */
  maxPerRecord: number;
  /**
   * Records whose neighbours are looked up at the same time (default 4). Each record's lookup is
   * three store reads, then one or two more, each a round trip to the store; one record after
   * another, a segment of 30 records was 150 round trips end to end (seconds on Neo4j under load).
   * The reads do not depend on each other (the batch is written before), so the result is the same.
   */
  concurrency?: number;
}

export const DEFAULT_CANDIDATE_SETTINGS: CandidateSettings = {
  similarityThreshold: 0.8,
  neighbours: 12,
  maxPerRecord: 8,
  concurrency: 4,
};

export interface Neighbour {
  record: MemoryRecord;
  /** Cosine similarity of the two record texts. */
  similarity: number;
}

const topicKey = (t: string): string => t.normalize("NFKC").toLowerCase().replace(/\s+/g, " ").trim();

const entityNames = (r: MemoryRecord): Set<string> => {
  const out = new Set<string>();
  for (const e of r.entities) {
    out.add(nameKey(e.name));
    for (const a of e.aliases ?? []) out.add(nameKey(a));
  }
  out.delete("");
  return out;
};

const REASON_RANK: Record<UpdateCandidate["reason"], number> = {
  similarity: 0,
  "entity-attribute": 1,
  "entity-topic": 2,
};

/**
 * The candidates of one record among its neighbours (pure): a neighbour qualifies by similarity
 * (at or above the threshold), by sharing an entity and a topic, or by having the same subject and
 * an attribute slot in common (where someone lives, works, what they like: a change there rarely
 * shares a topic word). The record itself and other tenants' records never qualify.
 */
export const selectCandidates = (
  record: MemoryRecord,
  neighbours: readonly Neighbour[],
  settings: CandidateSettings = DEFAULT_CANDIDATE_SETTINGS,
): UpdateCandidate[] => {
  const tenant = record.source.tenant;
  const myEntities = entityNames(record);
  const myTopics = new Set(record.topics.map(topicKey).filter(Boolean));
  const me = analyse(record);
  const mySlots = new Set(me.slots.map((s) => s.key));
  const seen = new Set<string>();
  const out: UpdateCandidate[] = [];
  for (const n of neighbours) {
    const other = n.record;
    if (other.id === record.id || other.source.tenant !== tenant || seen.has(other.id)) continue;
    seen.add(other.id);
    const sharedEntities = [...entityNames(other)].filter((e) => myEntities.has(e)).sort();
    const sharedTopics = [...new Set(other.topics.map(topicKey))].filter((t) => myTopics.has(t)).sort();
    let reason: UpdateCandidate["reason"] | undefined;
    if (n.similarity >= settings.similarityThreshold) reason = "similarity";
    else if (sharedEntities.length > 0 && sharedTopics.length > 0) reason = "entity-topic";
    else if (mySlots.size > 0 && me.subject !== "") {
      const theirs = analyse(other);
      if (theirs.subject === me.subject && theirs.slots.some((s) => mySlots.has(s.key))) reason = "entity-attribute";
    }
    if (!reason) continue;
    out.push({
      recordId: record.id,
      candidateId: other.id,
      tenant,
      similarity: Number(n.similarity.toFixed(6)),
      sharedEntities,
      sharedTopics,
      reason,
    });
  }
  out.sort(
    (a, b) =>
      REASON_RANK[a.reason] - REASON_RANK[b.reason] ||
      b.similarity - a.similarity ||
      (a.candidateId < b.candidateId ? -1 : 1),
  );
  return out.slice(0, Math.max(0, settings.maxPerRecord));
};

export interface CandidateDeps {
  graph: GraphStore;
  vectors: VectorStore;
  /** Awaited before each record's lookup (the indexer's FreshnessGate: raw-turn writes first). */
  yieldTo?: () => Promise<void>;
}

/**
 * Finds the update candidates of a batch of just-written records: nearest records by vector (the
 * whole tenant), nearest records of the same subject (vector search filtered by the subject
 * entity), and records sharing a topic (graph). Records of the same batch only count when they come
 * earlier in it, so each pair is proposed once.
 *
 * `segment` (the conversation and end of the segment the records come from): records of the same
 * conversation said after that segment's end are left out. In stream order they cannot exist yet;
 * they can when a segment is processed again after later ones were written (a Kafka indexer
 * replaying a chunk whose commit was lost to a rebalance, a crash before the commit), and the
 * replay must find the candidates the first pass found, not more.
 */
export const findUpdateCandidates = async (
  deps: CandidateDeps,
  tenant: string,
  records: readonly MemoryRecord[],
  vectorOf: ReadonlyMap<string, Float32Array>,
  settings: CandidateSettings = DEFAULT_CANDIDATE_SETTINGS,
  segment?: { conversation: string; end: string },
): Promise<UpdateCandidate[]> => {
  const position = new Map(records.map((r, i) => [r.id, i]));
  const segmentEnd = segment ? Date.parse(segment.end) : Number.NaN;
  const later = (r: MemoryRecord): boolean =>
    segment !== undefined && r.source.conversation === segment.conversation && Date.parse(r.source.saidAt) > segmentEnd;
  const perRecord = await mapLimit(
    records,
    settings.concurrency ?? 4,
    async (record, i): Promise<UpdateCandidate[]> => {
      const vector = vectorOf.get(record.id);
      if (!vector) return [];
      if (deps.yieldTo) await deps.yieldTo();
      const subject = analyse(record).subject;
      // Later records of the conversation (a replay: see above) are dropped, and the routes asked
      // again for as many more, so that they do not crowd out what the first pass found. In stream
      // order there are none and this runs once.
      let extra = 0;
      let neighbours: Neighbour[] = [];
      for (let round = 0; round < 3; round++) {
        const k = settings.neighbours + 1 + extra;
        const [near, sameSubject, topical] = await Promise.all([
          deps.vectors.search(tenant, vector, k, { kind: "record" }),
          subject
            ? deps.vectors.search(tenant, vector, k, { kind: "record", entities: [subject] })
            : Promise.resolve([]),
          record.topics.length > 0
            ? deps.graph.recordsByTopics(tenant, record.topics, settings.neighbours * 4 + extra)
            : Promise.resolve([]),
        ]);
        const similarity = new Map<string, number>();
        for (const h of [...near, ...sameSubject]) similarity.set(h.id, h.score);
        const ids = [
          ...new Set([...near.map((h) => h.id), ...sameSubject.map((h) => h.id), ...topical.map((h) => h.id)]),
        ]
          .filter((id) => id !== record.id)
          .filter((id) => {
            const p = position.get(id);
            return p === undefined || p < i;
          });
        const found = ids.length > 0 ? await deps.graph.getRecords(tenant, ids) : [];
        const dropped = found.filter(later).length;
        if (dropped > 0 && round < 2) {
          extra += dropped;
          continue;
        }
        const kept = found.filter((r) => !later(r));
        const unscored = kept.map((r) => r.id).filter((id) => !similarity.has(id));
        if (unscored.length > 0) {
          for (const item of await deps.vectors.get(tenant, unscored))
            similarity.set(item.id, cosine(vector, item.vector));
        }
        neighbours = kept.map((r) => ({ record: r, similarity: similarity.get(r.id) ?? 0 }));
        break;
      }
      return neighbours.length === 0 ? [] : selectCandidates(record, neighbours, settings);
    },
  );
  return perRecord.flat();
};
