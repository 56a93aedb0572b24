import type { RecordStore, VersionGraph, VersionStore } from "./ports.ts";

/** A bound on how far a version chain is followed, so a corrupted cycle cannot run away. */
export const MAX_VERSION_NODES = 256;

/**
 * A record's version graph, whatever the store: the chain of versions joined by SUPERSEDES and
 * DUPLICATE_OF edges in either direction, plus the records that refine any of them. Derived from
 * relationsOf and getRecords, so no store implements it.
 */
export const walkVersionGraph = async (
  store: Pick<VersionStore, "relationsOf"> & Pick<RecordStore, "getRecords">,
  tenant: string,
  id: string,
): Promise<VersionGraph> => {
  if ((await store.getRecords(tenant, [id])).length === 0) return { records: [], relations: [] };
  const chain = new Set([id]);
  let frontier = [id];
  while (frontier.length > 0 && chain.size < MAX_VERSION_NODES) {
    const next: string[] = [];
    for (const r of await store.relationsOf(tenant, frontier)) {
      if (r.relation === "REFINES") continue;
      for (const other of [r.from, r.to]) {
        if (chain.has(other) || chain.size >= MAX_VERSION_NODES) continue;
        chain.add(other);
        next.push(other);
      }
    }
    frontier = next;
  }
  const relations = await store.relationsOf(tenant, [...chain]);
  const ids = new Set(chain);
  for (const r of relations) {
    if (r.relation !== "REFINES") continue;
    ids.add(r.from);
    ids.add(r.to);
  }
  const records = await store.getRecords(tenant, [...ids]);
  const known = new Set(records.map((r) => r.id));
  return { records, relations: relations.filter((r) => known.has(r.from) && known.has(r.to)) };
};
