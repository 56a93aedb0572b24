/**
 * The stores' side of an erase control, shared by the indexer's two consumers (records, and raw
 * turns as they arrive: raw-turn-stage.ts): whatever in-flight writes put in the stores after the
 * caller's immediate erasure is erased again with the same rule (services/core/erasure.ts).
 */
import type { UpdateCandidatesEvent } from "../core/adapters/kafka/serde.ts";
import { PoisonError, type StageInput, type StageOutput } from "../core/adapters/kafka/stage-runtime.ts";
import { isErasure } from "../core/adapters/kafka/topics.ts";
import { eraseConversation, tenantRecordIds } from "../core/erasure.ts";
import { parseConversationKey } from "../core/keys.ts";
import type { GraphStore, VectorStore } from "../core/ports.ts";
import type { ErasedRecordsHandOff } from "./erase-handoff.ts";

export interface IndexerErasure {
  tenant: string;
  conversation?: string;
  records: number;
  turns: number;
}

export interface EraseDeps {
  graph: GraphStore;
  vectors: VectorStore;
  /** What an erase control erased again (records and raw turns), for metrics and logs. */
  onErased?(erasure: IndexerErasure): void;
  /**
   * The process's hand-off between its two consumers (erase-handoff.ts): the raw-turn consumer
   * gives the records it erased, the records consumer tombstones them too.
   */
  handOff?: { role: "give" | "take"; ids: ErasedRecordsHandOff };
}

/** The stores' side of an erase control; returns the erased record ids (for their tombstones). */
export const eraseInStores = async (
  deps: EraseDeps,
  tenant: string,
  conversation: string | undefined,
): Promise<{ records: string[]; turns: number }> => {
  let records: string[];
  let turns = 0;
  if (conversation !== undefined) {
    const erased = await eraseConversation(deps.graph, tenant, conversation);
    records = erased.records;
    turns = erased.turns.length;
    await deps.vectors.delete(tenant, [...erased.records, ...erased.turns]);
    // By payload too: vectors of turns whose rows the immediate erasure had already removed.
    await deps.vectors.deleteConversation?.(tenant, conversation);
  } else {
    records = await tenantRecordIds(deps.graph, tenant);
    await deps.graph.deleteTenant(tenant);
    await deps.vectors.deleteTenant(tenant);
  }
  await deps.vectors.flush();
  if (records.length > 0 || turns > 0 || conversation === undefined) {
    // Deleted is not yet gone from the stores' files (docs/erasure.md).
    await deps.vectors.purgeDeleted?.(tenant);
    await deps.graph.purgeDeleted?.();
  }
  return { records, turns };
};

/**
 * A control message on either of the indexer's inputs: an erase control erases again and returns
 * the update-queue tombstones of every record it or the caller's immediate erasure removed (the
 * ids travel on the control); other controls (flush, session end, idle) mean nothing here. Whichever
 * of the two consumers erases a record first tombstones it, so no candidate set outlives it.
 */
export const eraseControl = async (
  deps: EraseDeps,
  key: string,
  input: Extract<StageInput<unknown>, { kind: "control" }>,
): Promise<StageOutput<UpdateCandidatesEvent>[]> => {
  if (!isErasure(input.control)) return [];
  const parsed = parseConversationKey(key);
  if (!parsed) throw new PoisonError(`key "${key}" is not tenant/conversation`);
  const conversation = input.control === "erase" ? parsed.conversation : undefined;
  const erased = await eraseInStores(deps, parsed.tenant, conversation);
  deps.onErased?.({
    tenant: parsed.tenant,
    ...(conversation !== undefined ? { conversation } : {}),
    records: erased.records.length,
    turns: erased.turns,
  });
  // The records this erasure removed again, and those the stores' erasure removed before the
  // control (its ids travel on it): every candidate set written for them is ahead of the tombstone.
  const handOff = deps.handOff;
  if (handOff?.role === "give") handOff.ids.give(parsed.tenant, conversation, erased.records);
  const handedOver = handOff?.role === "take" ? handOff.ids.erasedBy(parsed.tenant, conversation) : [];
  const ids = [...new Set([...erased.records, ...(input.erasedIds ?? []), ...handedOver])];
  if (conversation !== undefined) await deleteLateCandidates(deps.graph, parsed.tenant, ids, erased.records);
  return ids.map((recordId) => ({ key: recordId, control: "erase" }));
};

/**
 * Candidate rows of records erased before this control (by the other consumer, or by the caller's
 * immediate erasure) that were written after that erasure: the records consumer computes a
 * segment's candidates after writing its records, and the other consumer's erase can run in
 * between, so this erasure finds no record and its candidates stay in the graph store. They go
 * here; an id whose record exists again (the same text indexed in another conversation) is kept.
 */
const deleteLateCandidates = async (
  graph: GraphStore,
  tenant: string,
  ids: readonly string[],
  erasedNow: readonly string[],
): Promise<void> => {
  const again = new Set(erasedNow);
  const earlier = ids.filter((id) => !again.has(id));
  if (earlier.length === 0) return;
  await graph.transact(tenant, { records: earlier }, (view) => ({
    writes: { deleteRecords: earlier.filter((id) => !view.records.has(id)) },
    result: undefined,
  }));
};
