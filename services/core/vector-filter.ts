/** Vector payload filters as a predicate (pure; used by the HNSW filter callback and brute-force path). */
import type { VectorFilter, VectorPayload } from "./ports.ts";

/** Case-insensitive key for entity names. */
export const entityKey = (s: string): string => s.normalize("NFKC").toLowerCase().replace(/\s+/g, " ").trim();

export type PayloadPredicate = (payload: VectorPayload) => boolean;

/**
 * The predicate for a filter, or undefined when the filter constrains nothing. Semantics (shared
 * with the Qdrant adapter): every given field must match; `types` and `entities` match any listed
 * value (an empty list constrains nothing); entities compare case-insensitively; a time bound only
 * matches items that have a time, inclusive on both ends.
 */
export const compileFilter = (filter: VectorFilter | undefined): PayloadPredicate | undefined => {
  if (!filter) return undefined;
  const checks: PayloadPredicate[] = [];
  const { conversation, kind, types, timeFrom, timeTo, entities } = filter;
  if (conversation !== undefined) checks.push((p) => p.conversation === conversation);
  if (kind !== undefined) checks.push((p) => p.kind === kind);
  if (types && types.length > 0) {
    const set = new Set<string>(types);
    checks.push((p) => p.type !== undefined && set.has(p.type));
  }
  if (timeFrom !== undefined || timeTo !== undefined) {
    const from = timeFrom ?? Number.NEGATIVE_INFINITY;
    const to = timeTo ?? Number.POSITIVE_INFINITY;
    checks.push((p) => p.time !== undefined && p.time >= from && p.time <= to);
  }
  if (entities && entities.length > 0) {
    const set = new Set(entities.map(entityKey));
    checks.push((p) => (p.entities ?? []).some((e) => set.has(entityKey(e))));
  }
  if (checks.length === 0) return undefined;
  return (p) => checks.every((c) => c(p));
};
