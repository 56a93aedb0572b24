import type { RankedList } from "./rrf.ts";

/**
 * The two ends of an event, for a question about how long it took or has gone on: among the best
 * hits of the question's dense lists (records and raw turns, dated by their event or turn time),
 * the earliest and the latest. "How long did it take to open the studio" is answered by the turn
 * that first speaks of the plan and the one that says it opened, sessions apart; the similarity
 * routes rank the mentions in between as high, and a budget of a few hundred tokens keeps only
 * the best of them. The ends go to the fusion as one more list, earliest first; undefined when
 * the hits have no two distinct times.
 */
export const bothEnds = (
  dense: readonly RankedList[],
  timeOf: ReadonlyMap<string, number>,
  perList: number,
): RankedList | undefined => {
  const pool: { id: string; time: number }[] = [];
  for (const list of dense)
    for (const hit of list.ids.slice(0, perList)) {
      const time = timeOf.get(hit.id);
      if (time !== undefined) pool.push({ id: hit.id, time });
    }
  if (pool.length < 2) return undefined;
  pool.sort((a, b) => a.time - b.time || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const first = pool[0] as { id: string; time: number };
  const last = pool[pool.length - 1] as { id: string; time: number };
  if (first.time === last.time) return undefined;
  return {
    route: "time",
    ids: [
      { id: first.id, score: 2 },
      { id: last.id, score: 1 },
    ],
  };
};
