import type { RouteName } from "../core/query-types.ts";

export interface RankedList {
  route: RouteName;
  ids: readonly { id: string; score: number }[];
  /** What each of the list's ranks counts for against the other lists' (default 1). */
  weight?: number;
}

export interface Fused {
  id: string;
  score: number;
  routes: { route: RouteName; rank: number; score: number }[];
}

/**
 * Reciprocal Rank Fusion: RRF(d) = sum over lists of w / (k + rank(d)), ranks from 1, w the list's
 * weight (1 unless it says otherwise). Ties are broken by id so the fused order is deterministic.
 */
export const reciprocalRankFusion = (lists: readonly RankedList[], k = 60): Fused[] => {
  const fused = new Map<string, Fused>();
  for (const list of lists) {
    const weight = list.weight ?? 1;
    const seen = new Set<string>();
    for (const hit of list.ids) {
      if (seen.has(hit.id)) continue;
      seen.add(hit.id);
      const rank = seen.size;
      const entry = fused.get(hit.id) ?? { id: hit.id, score: 0, routes: [] };
      entry.score += weight / (k + rank);
      entry.routes.push({ route: list.route, rank, score: hit.score });
      fused.set(hit.id, entry);
    }
  }
  return [...fused.values()].sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
};
