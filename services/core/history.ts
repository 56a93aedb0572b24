/**
 * A record's version history (pure): built from its version graph (walkVersionGraph over the graph
 * store), the same for every runtime. Here in core, not in the consolidator stage, because the
 * query service (another stage) answers history requests in the distributed runtime.
 */
import type { RecordRelation, VersionGraph } from "./ports.ts";
import type { MemoryRecord } from "./types.ts";

/** How a version relates to the record the history was asked for. */
export type VersionRelation =
  | "self"
  /** An earlier version in the chain (superseded, directly or through others). */
  | "earlier"
  /** A later version in the chain. */
  | "later"
  /** Merged with it as a duplicate (either side of the merge). */
  | "duplicate"
  /** Adds detail to a version of the chain (REFINES it). */
  | "refines"
  /** A version of the chain adds detail to it. */
  | "refined-by";

export interface VersionEntry {
  id: string;
  text: string;
  relation: VersionRelation;
  validFrom: string;
  validTo?: string;
  supersededBy?: string;
  current: boolean;
  record: MemoryRecord;
}

/** A record's version history: the chain of versions with valid ranges and the edges between them. */
export interface RecordHistory {
  id: string;
  /** The current version of the chain (the head), when there is one. */
  current?: string;
  /** Oldest first (by valid.from, then id). */
  versions: VersionEntry[];
  relations: RecordRelation[];
}

const byValidFrom = (a: MemoryRecord, b: MemoryRecord): number =>
  Date.parse(a.valid.from) - Date.parse(b.valid.from) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * A record's version history from its version graph (pure): every version with its valid range,
 * how it relates to the record asked about, the current head of the chain, and the edges.
 * Undefined when the record is not in the graph.
 */
export const buildHistory = (id: string, graph: VersionGraph): RecordHistory | undefined => {
  const records = new Map(graph.records.map((r) => [r.id, r]));
  const asked = records.get(id);
  if (!asked) return undefined;
  const chain = new Set([id]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const r of graph.relations) {
      if (r.relation === "REFINES") continue;
      if (chain.has(r.from) !== chain.has(r.to)) {
        chain.add(r.from);
        chain.add(r.to);
        grew = true;
      }
    }
  }
  const duplicates = new Set(
    graph.relations
      .filter((r) => r.relation === "DUPLICATE_OF" && (r.from === id || r.to === id))
      .map((r) => (r.from === id ? r.to : r.from)),
  );
  const relationOf = (r: MemoryRecord): VersionRelation => {
    if (r.id === id) return "self";
    if (duplicates.has(r.id)) return "duplicate";
    if (!chain.has(r.id)) {
      return graph.relations.some((e) => e.relation === "REFINES" && e.from === r.id && chain.has(e.to))
        ? "refines"
        : "refined-by";
    }
    return byValidFrom(r, asked) < 0 ? "earlier" : "later";
  };
  let head: MemoryRecord | undefined = asked;
  const seen = new Set<string>();
  while (head?.valid.supersededBy && !seen.has(head.id)) {
    seen.add(head.id);
    head = records.get(head.valid.supersededBy);
  }
  const versions: VersionEntry[] = [...records.values()].sort(byValidFrom).map((r) => ({
    id: r.id,
    text: r.text,
    relation: relationOf(r),
    validFrom: r.valid.from,
    ...(r.valid.to ? { validTo: r.valid.to } : {}),
    ...(r.valid.supersededBy ? { supersededBy: r.valid.supersededBy } : {}),
    current: r.valid.to === undefined,
    record: r,
  }));
  return {
    id,
    ...(head && head.valid.to === undefined ? { current: head.id } : {}),
    versions,
    relations: graph.relations,
  };
};
