import type { RouteName } from "../core/query-types.ts";

export interface RankedList {
  route: RouteName;
  ids: readonly { id: string; score: number }[];
}

export interface Fused {
  id: string;
  score: number;
  routes: { route: RouteName; rank: number; score: number }[];
}

/**
 * Reciprocal Rank Fusion: RRF(d) = sum over lists of 1 / (k + rank(d)), ranks from 1. Ties are
 * broken by id so the fused order is deterministic.
 */
export const reciprocalRankFusion = (lists: readonly RankedList[], k = 60): Fused[] => {
  const fused = new Map<string, Fused>();
  for (const list of lists) {
    const seen = new Set<string>();
    for (const hit of list.ids) {
      if (seen.has(hit.id)) continue;
      seen.add(hit.id);
      const rank = seen.size;
      const entry = fused.get(hit.id) ?? { id: hit.id, score: 0, routes: [] };
      entry.score += 1 / (k + rank);
      entry.routes.push({ route: list.route, rank, score: hit.score });
      fused.set(hit.id, entry);
    }
  }
  return [...fused.values()].sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
};
