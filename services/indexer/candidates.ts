/**
 * Update candidates, computed by the indexer for each new record: older records of the same tenant
 * (any conversation) that consolidation should compare it with. A pure selection over the
 * neighbours found, and a small async function that finds them with the stores. Online updates
 * stay soft: candidates are only written down here, nothing else changes until consolidation.
 */
import { mapLimit } from "../core/map-limit.ts";
import type { GraphStore, ScoredId, VectorHit, VectorQuery, VectorStore } from "../core/ports.ts";
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
   * Store reads in flight at once where a store has no batched form (searchMany,
   * recordsByTopicsMany) and each search or topic lookup is a call of its own (default 4). One
   * after another, a segment of 30 records was 150 round trips end to end (seconds on Neo4j under
   * load). The reads do not depend on each other (the batch is written before), so the result is
   * the same.
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
  /** Awaited before each round of lookups (the indexer's FreshnessGate: raw-turn writes first). */
  yieldTo?: () => Promise<void>;
}

/** One record's lookup: `extra` more neighbours per route after a replay's later records were dropped. */
interface Lookup {
  record: MemoryRecord;
  index: number;
  vector: Float32Array;
  subject: string;
  extra: number;
}

interface Routes {
  near: VectorHit[];
  sameSubject: VectorHit[];
  topical: ScoredId[];
}

/**
 * The three routes of every lookup of a round: the vector searches in one searchMany call and the
 * topic lookups in one recordsByTopicsMany call where the stores have them (Neo4j: one statement
 * each for the whole segment, where a search per record was a round trip each), else one store
 * call per search, `concurrency` at a time. The answers are the same either way.
 */
const routesOf = async (
  deps: CandidateDeps,
  tenant: string,
  lookups: readonly Lookup[],
  settings: CandidateSettings,
): Promise<Routes[]> => {
  const limit = settings.concurrency ?? 4;
  const queries: VectorQuery[] = [];
  const topicLookups: { topics: readonly string[]; k: number }[] = [];
  for (const l of lookups) {
    const k = settings.neighbours + 1 + l.extra;
    queries.push({ vector: l.vector, k, filter: { kind: "record" } });
    if (l.subject) queries.push({ vector: l.vector, k, filter: { kind: "record", entities: [l.subject] } });
    if (l.record.topics.length > 0)
      topicLookups.push({ topics: l.record.topics, k: settings.neighbours * 4 + l.extra });
  }
  const { vectors, graph } = deps;
  const [hits, topical] = await Promise.all([
    vectors.searchMany
      ? vectors.searchMany(tenant, queries)
      : mapLimit(queries, limit, (q) => vectors.search(tenant, q.vector, q.k, q.filter)),
    graph.recordsByTopicsMany
      ? graph.recordsByTopicsMany(tenant, topicLookups)
      : mapLimit(topicLookups, limit, (t) => graph.recordsByTopics(tenant, t.topics, t.k)),
  ]);
  let h = 0;
  let t = 0;
  return lookups.map((l) => ({
    near: hits[h++] ?? [],
    sameSubject: l.subject ? (hits[h++] ?? []) : [],
    topical: l.record.topics.length > 0 ? (topical[t++] ?? []) : [],
  }));
};

/** The records of the ids (one getRecords for the whole round), by id. */
const recordsById = async (
  graph: GraphStore,
  tenant: string,
  ids: Iterable<string>,
): Promise<Map<string, MemoryRecord>> => {
  const wanted = [...new Set(ids)];
  const found = wanted.length > 0 ? await graph.getRecords(tenant, wanted) : [];
  return new Map(found.map((r) => [r.id, r]));
};

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
 *
 * The records are looked up together, round by round (routes, then the records found, then the
 * vectors of those no route scored): a few store calls per segment instead of five per record.
 * Each record's answer is the one a lookup of that record alone gives (the reads do not depend on
 * each other; the batch is written before).
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
  const perRecord: UpdateCandidate[][] = records.map(() => []);
  let pending: Lookup[] = records.flatMap((record, index) => {
    const vector = vectorOf.get(record.id);
    return vector ? [{ record, index, vector, subject: analyse(record).subject, extra: 0 }] : [];
  });
  // Later records of the conversation (a replay: see above) are dropped, and the routes asked
  // again for as many more, so that they do not crowd out what the first pass found. In stream
  // order there are none and this runs once.
  for (let round = 0; round < 3 && pending.length > 0; round++) {
    if (deps.yieldTo) await deps.yieldTo();
    const routes = await routesOf(deps, tenant, pending, settings);
    const idsOf = pending.map((l, j) => {
      const r = routes[j] as Routes;
      return [
        ...new Set([...r.near.map((h) => h.id), ...r.sameSubject.map((h) => h.id), ...r.topical.map((h) => h.id)]),
      ]
        .filter((id) => id !== l.record.id)
        .filter((id) => {
          const p = position.get(id);
          return p === undefined || p < l.index;
        });
    });
    const byId = await recordsById(deps.graph, tenant, idsOf.flat());
    const again: Lookup[] = [];
    const settled: { lookup: Lookup; kept: MemoryRecord[]; similarity: Map<string, number> }[] = [];
    pending.forEach((lookup, j) => {
      const found = (idsOf[j] as string[]).flatMap((id) => byId.get(id) ?? []);
      const dropped = found.filter(later).length;
      if (dropped > 0 && round < 2) {
        again.push({ ...lookup, extra: lookup.extra + dropped });
        return;
      }
      const r = routes[j] as Routes;
      const similarity = new Map<string, number>();
      for (const h of [...r.near, ...r.sameSubject]) similarity.set(h.id, h.score);
      settled.push({ lookup, kept: found.filter((x) => !later(x)), similarity });
    });
    const unscored = new Set(settled.flatMap((s) => s.kept.map((r) => r.id).filter((id) => !s.similarity.has(id))));
    const stored = new Map<string, Float32Array>();
    if (unscored.size > 0)
      for (const item of await deps.vectors.get(tenant, [...unscored])) stored.set(item.id, item.vector);
    for (const { lookup, kept, similarity } of settled) {
      for (const r of kept) {
        const v = similarity.has(r.id) ? undefined : stored.get(r.id);
        if (v) similarity.set(r.id, cosine(lookup.vector, v));
      }
      const neighbours = kept.map((r) => ({ record: r, similarity: similarity.get(r.id) ?? 0 }));
      perRecord[lookup.index] = neighbours.length === 0 ? [] : selectCandidates(lookup.record, neighbours, settings);
    }
    pending = again;
  }
  return perRecord.flat();
};
