/**
 * Raw turns written as they arrive (issue 18): the raw-turn routes (raw-dense, raw-lexical) find a
 * turn within seconds of its produce instead of at its segment's close. The same rows and vectors
 * as the segment-close write (derive.ts vectorTexts: same ids, same embedded text, same payload),
 * so the two writes are idempotent with each other in either order; the segment's writeBatch then
 * names the segment on the rows (TurnStore.writeTurns).
 */
import { turnRowId } from "../core/ids.ts";
import type { Embedder, GraphStore, VectorItem, VectorStore } from "../core/ports.ts";
import { turnEmbeddingText } from "../core/turn-text.ts";
import { type SegmentTurn, segmentTurnOf } from "../core/types.ts";

/** One arriving turn of a conversation (a sensory turn carries these fields and more). */
export interface ArrivingTurn extends SegmentTurn {
  tenant: string;
  conversation: string;
}

export interface RawTurnDeps {
  graph: Pick<GraphStore, "writeTurns">;
  vectors: Pick<VectorStore, "upsert">;
  embedder: Embedder;
  /** The second-opinion model (IndexerDeps.secondEmbedder): each turn's vector by it goes beside the first. */
  secondEmbedder?: Embedder;
}

/** The text a raw turn's vector is computed from (the boundary gate embeds the same string). */
export const rawTurnText = (t: Pick<SegmentTurn, "speaker" | "text">): string => turnEmbeddingText(t.speaker, t.text);

/** Every turn's vector: the given ones as they are, the missing ones embedded in one call. */
const completeVectors = async (
  embedder: Embedder,
  turns: readonly ArrivingTurn[],
  given: readonly (Float32Array | undefined)[] = [],
): Promise<Float32Array[]> => {
  const missing: number[] = [];
  for (let i = 0; i < turns.length; i++) if (given[i] === undefined) missing.push(i);
  if (missing.length === 0) return given as Float32Array[];
  const fresh = await embedder.embed(missing.map((i) => rawTurnText(turns[i] as ArrivingTurn)));
  const out = [...given];
  missing.forEach((turn, j) => {
    out[turn] = fresh[j];
  });
  return out as Float32Array[];
};

/**
 * Writes the turns' vectors, then their rows (a turn is only listed once its vector exists, as in
 * indexSegment), one write of each per tenant and conversation. `vectors` (same order as `turns`)
 * skips the embedding where the caller has a turn's vector already (the embedded runtime's boundary
 * gate; in Kafka, the vector the sensory stage sent with the turn); the turns without one (an
 * undefined entry) are embedded, in one call.
 */
export const indexRawTurns = async (
  deps: RawTurnDeps,
  turns: readonly ArrivingTurn[],
  vectors?: readonly (Float32Array | undefined)[],
): Promise<number> => {
  if (turns.length === 0) return 0;
  const embedded = await completeVectors(deps.embedder, turns, vectors);
  const seconds = deps.secondEmbedder ? await deps.secondEmbedder.embed(turns.map(rawTurnText)) : undefined;
  const groups = new Map<string, { tenant: string; conversation: string; items: VectorItem[]; rows: SegmentTurn[] }>();
  turns.forEach((t, i) => {
    const key = `${t.tenant}\u0000${t.conversation}`;
    let g = groups.get(key);
    if (!g) {
      g = { tenant: t.tenant, conversation: t.conversation, items: [], rows: [] };
      groups.set(key, g);
    }
    g.items.push({
      id: turnRowId(t.conversation, t.turnId),
      vector: embedded[i] as Float32Array,
      payload: { tenant: t.tenant, conversation: t.conversation, kind: "turn", time: Date.parse(t.timestamp) },
      ...(seconds ? { second: seconds[i] as Float32Array } : {}),
    });
    g.rows.push(segmentTurnOf(t));
  });
  const byTenant = new Map<string, VectorItem[]>();
  for (const g of groups.values()) byTenant.set(g.tenant, [...(byTenant.get(g.tenant) ?? []), ...g.items]);
  for (const [tenant, items] of byTenant) await deps.vectors.upsert(tenant, items);
  for (const g of groups.values()) await deps.graph.writeTurns(g.tenant, g.conversation, g.rows);
  return turns.length;
};
