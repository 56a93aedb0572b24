/**
 * The second-opinion vectors of items written before the setting was on (issue 15). The indexer
 * writes a second vector beside every new one (services/indexer/indexer.ts), but a store built
 * without the setting keeps none, and the query then embeds every candidate without one at query
 * time: about 80 texts a question with the second model, which is most of its cost. This walks the
 * tenant's items that lack one, embeds the text the indexer would have embedded (a record's text, a
 * turn as "speaker: text", from the graph store's rows) and sets the vectors in place.
 *
 * Here in composition, not in a stage: it joins the indexer's text definitions with the stores and
 * the second model, as store-maintenance.ts joins the consolidator's rules with the stores.
 *
 * Safe beside a running indexer: an item is only updated where it still exists (a deletion wins),
 * and an item the indexer writes meanwhile gets the same vector of the same text. An id whose row
 * the graph store does not hold (a vector written just before a crash, before its row) has no text
 * here: it is skipped and counted, and the query goes on embedding it should it ever be a candidate.
 */
import { isTurnRowId, turnRowId } from "../core/keys.ts";
import type { Embedder, GraphStore, VectorStore } from "../core/ports.ts";
import { getTurnsByRowIds } from "../core/turn-order.ts";
import { recordVectorText } from "../indexer/derive.ts";
import { rawTurnText } from "../indexer/raw-turns.ts";

export interface BackfillDeps {
  graph: Pick<GraphStore, "getRecords" | "getTurns">;
  vectors: Pick<VectorStore, "idsWithoutSecond" | "setSecondVectors">;
  /** The second-opinion model (config secondOpinion). */
  embedder: Embedder;
}

export interface BackfillOptions {
  /** Ids read, texts embedded and vectors set per step (default 256). */
  batch?: number;
  /** Called after each step with the totals so far. */
  onProgress?: (report: BackfillReport) => void;
  /** Stops between steps when aborted; the report says how far it went. */
  signal?: AbortSignal;
}

export interface BackfillReport {
  tenant: string;
  /** Items that had no second vector and have one now. */
  set: number;
  /** Items without one whose text the graph store does not hold (see above): left as they were. */
  withoutText: number;
  /** Items deleted between the page's read and the update. */
  gone: number;
  ms: number;
}

export const DEFAULT_BACKFILL_BATCH = 256;

/** The stores that can be backfilled keep second vectors and can list the items without one. */
export const canBackfill = (vectors: Partial<Pick<VectorStore, "idsWithoutSecond" | "setSecondVectors">>): boolean =>
  vectors.idsWithoutSecond !== undefined && vectors.setSecondVectors !== undefined;

/** The texts the indexer embedded for these ids (records and raw turns); ids without a row are absent. */
const textsOf = async (
  graph: BackfillDeps["graph"],
  tenant: string,
  ids: readonly string[],
): Promise<Map<string, string>> => {
  const [records, turns] = await Promise.all([
    graph.getRecords(
      tenant,
      ids.filter((id) => !isTurnRowId(id)),
    ),
    getTurnsByRowIds(
      graph,
      tenant,
      ids.filter((id) => isTurnRowId(id)),
    ),
  ]);
  const out = new Map<string, string>();
  for (const r of records) out.set(r.id, recordVectorText(r));
  for (const t of turns) out.set(turnRowId(t.conversation, t.turnId), rawTurnText(t));
  return out;
};

/**
 * Gives every item of the tenant without a second vector one, a page at a time along the store's id
 * order (so an item skipped for want of text is not read again). Running it again finds only what
 * was written without one since.
 */
export const backfillSecondVectors = async (
  deps: BackfillDeps,
  tenant: string,
  options: BackfillOptions = {},
): Promise<BackfillReport> => {
  const { idsWithoutSecond, setSecondVectors } = deps.vectors;
  if (!idsWithoutSecond || !setSecondVectors) {
    throw new Error("this vector store keeps no second-opinion vectors (Qdrant): nothing to backfill");
  }
  const batch = options.batch ?? DEFAULT_BACKFILL_BATCH;
  if (!Number.isInteger(batch) || batch <= 0) throw new Error(`batch must be a positive integer, got ${batch}`);
  const started = performance.now();
  const report: BackfillReport = { tenant, set: 0, withoutText: 0, gone: 0, ms: 0 };
  let after: string | undefined;
  for (;;) {
    if (options.signal?.aborted) break;
    const ids = await idsWithoutSecond.call(deps.vectors, tenant, after, batch);
    if (ids.length === 0) break;
    after = ids[ids.length - 1];
    const texts = await textsOf(deps.graph, tenant, ids);
    const known = ids.filter((id) => texts.has(id));
    report.withoutText += ids.length - known.length;
    if (known.length > 0) {
      const vectors = await deps.embedder.embed(known.map((id) => texts.get(id) as string));
      const set = await setSecondVectors.call(
        deps.vectors,
        tenant,
        new Map(known.map((id, i) => [id, vectors[i] as Float32Array])),
      );
      report.set += set;
      report.gone += known.length - set;
    }
    report.ms = performance.now() - started;
    options.onProgress?.({ ...report });
    if (ids.length < batch) break;
  }
  report.ms = performance.now() - started;
  return report;
};
