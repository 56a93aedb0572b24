import type { VersionGraph } from "../core/ports.ts";
import type { MemoryRecord } from "../core/types.ts";
import type { RecordHistory, VersionEntry, VersionRelation } from "./types.ts";

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
