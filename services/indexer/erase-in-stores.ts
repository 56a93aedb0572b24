/**
 * The stores' side of an erase control, split between the indexer's two consumers by what each
 * writes. The raw-turn consumer (raw-turn-stage.ts) writes raw turns only, so it erases only those
 * (rows and vectors) and produces no tombstone: eraseRawTurnsControl. The records consumer alone
 * erases records (and raw turns again, the whole conversation or tenant with the same rule:
 * services/core/erasure.ts) and tombstones them on the update queue: eraseControl. Its tombstones
 * thus always follow every candidate set it produced for those records (its input order), whichever
 * consumer reaches the control first, in whichever process, across restarts: no state is shared.
 */
import type { UpdateCandidatesEvent } from "../core/adapters/kafka/serde.ts";
import { PoisonError, type StageInput, type StageOutput } from "../core/adapters/kafka/stage-runtime.ts";
import { eraseTenantShare, isErasure, partitionOfKey } from "../core/adapters/kafka/topics.ts";
import { eraseConversation, eraseTenant } from "../core/erasure.ts";
import { conversationKey, parseConversationKey } from "../core/keys.ts";
import type { GraphStore, VectorStore } from "../core/ports.ts";

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
    ({ records, turns } = await eraseConversationInStores(deps, tenant, conversation));
  } else {
    records = await eraseTenant(deps.graph, tenant);
    await deps.vectors.deleteTenant(tenant);
  }
  await purgeAfterErasure(deps, tenant, records.length > 0 || turns > 0 || conversation === undefined);
  return { records, turns };
};

/** One conversation from both stores (the purge is the caller's, once for all it erases). */
const eraseConversationInStores = async (
  deps: EraseDeps,
  tenant: string,
  conversation: string,
): Promise<{ records: string[]; turns: number }> => {
  const erased = await eraseConversation(deps.graph, tenant, conversation);
  await deps.vectors.delete(tenant, [...erased.records, ...erased.turns]);
  // By payload too: vectors of turns whose rows the immediate erasure had already removed.
  await deps.vectors.deleteConversation?.(tenant, conversation);
  return { records: erased.records, turns: erased.turns.length };
};

/**
 * The vector store flushed and purged, then, when the erasure deleted anything (a tenant's always
 * counts), the graph store purged: deleted is not yet gone from the stores' files
 * (docs/erasure.md). The vectors' purge runs even when nothing was deleted: an erasure delivered
 * again after its process stopped between its deletes and their purge finds nothing to delete,
 * while the deleted vectors may still be in the tenant's index file (marked deleted); with nothing
 * to zero it costs the tenant's load at most.
 */
const purgeAfterErasure = async (deps: EraseDeps, tenant: string, deleted: boolean): Promise<void> => {
  await deps.vectors.flush();
  await deps.vectors.purgeDeleted?.(tenant);
  if (!deleted) return;
  await deps.graph.purgeDeleted?.();
};

/**
 * One partition's share of a tenant erasure: the tenant's conversations whose key the pipeline
 * routes to that partition, each erased as a conversation is (one transaction, naming its records),
 * then, when no record of the tenant is left, what remains of it (names, days, the tenant's rows).
 * A conversation of another partition is that partition's control's: an indexer (this one or
 * another instance) may be writing its in-flight records right now, and their candidate sets must
 * reach the update queue before their tombstones, which only that partition's order guarantees.
 * Deleting them here could tombstone a record before its candidate set lands, which then stays
 * live. Returns the erased record ids.
 */
const eraseShareInStores = async (
  deps: EraseDeps,
  tenant: string,
  share: { partition: number; partitions: number },
): Promise<{ records: string[]; turns: number; emptied: boolean }> => {
  const records: string[] = [];
  let turns = 0;
  for (const conversation of await deps.graph.tenantConversations(tenant)) {
    if (partitionOfKey(conversationKey(tenant, conversation), share.partitions) !== share.partition) continue;
    const erased = await eraseConversationInStores(deps, tenant, conversation);
    records.push(...erased.records);
    turns += erased.turns;
  }
  // The vectors too once the graph holds nothing of the tenant: raw turns' of every partition
  // (the raw-turn consumer erases them as well) and any left without a row.
  const emptied = await deps.graph.deleteTenantIfEmpty(tenant);
  if (emptied) await deps.vectors.deleteTenant(tenant);
  await purgeAfterErasure(deps, tenant, true);
  return { records, turns, emptied };
};

type ControlInput = Extract<StageInput<unknown>, { kind: "control" }>;

/** The erasure's tenant, and its conversation (undefined for a tenant's erasure); undefined for any other control. */
const erasureScope = (key: string, input: ControlInput): { tenant: string; conversation?: string } | undefined => {
  if (!isErasure(input.control)) return undefined;
  const parsed = parseConversationKey(key);
  if (!parsed) throw new PoisonError(`key "${key}" is not tenant/conversation`);
  return input.control === "erase" ? parsed : { tenant: parsed.tenant };
};

/**
 * A control message on the records consumer's input: an erase control erases again and returns the
 * update-queue tombstones of every record it or the caller's immediate erasure removed (those ids
 * travel on the control); other controls (flush, session end, idle) mean nothing here. Only this
 * consumer erases records, so a record it indexed is still there for this erasure to find and
 * tombstone after its candidate sets.
 */
export const eraseControl = async (
  deps: EraseDeps,
  key: string,
  input: ControlInput,
): Promise<StageOutput<UpdateCandidatesEvent>[]> => {
  const scope = erasureScope(key, input);
  if (!scope) return [];
  const { tenant, conversation } = scope;
  const share = input.control === "erase-tenant" ? eraseTenantShare(key) : undefined;
  const erased = share
    ? await eraseShareInStores(deps, tenant, share)
    : { ...(await eraseInStores(deps, tenant, conversation)), emptied: conversation === undefined };
  deps.onErased?.({
    tenant,
    ...(conversation !== undefined ? { conversation } : {}),
    records: erased.records.length,
    turns: erased.turns,
  });
  const ids = [...new Set([...erased.records, ...(input.erasedIds ?? [])])];
  // Candidates of a record erased before the control and written after that erasure: a tenant
  // emptied here has none left (deleteTenantIfEmpty, deleteTenant); otherwise they go now.
  if (!erased.emptied) await deleteLateCandidates(deps.graph, tenant, ids, erased.records);
  return ids.map((recordId) => ({ key: recordId, control: "erase" }));
};

/**
 * A control message on the raw-turn consumer's input: an erase control erases the raw turns (rows
 * and vectors) of the conversation or tenant, which is all this consumer writes, and nothing else.
 * No tombstone: the records, and their candidate sets, are the records consumer's (eraseControl).
 */
export const eraseRawTurnsControl = async (deps: EraseDeps, key: string, input: ControlInput): Promise<never[]> => {
  const scope = erasureScope(key, input);
  if (!scope) return [];
  const { tenant, conversation } = scope;
  const turns = await deps.graph.deleteRawTurns(tenant, conversation);
  // By payload: a turn's vector is written before its row, so one may have no row to name it.
  const vectors = await deps.vectors.deleteRawTurns(tenant, conversation);
  await purgeAfterErasure(deps, tenant, turns > 0 || vectors > 0 || conversation === undefined);
  deps.onErased?.({ tenant, ...(conversation !== undefined ? { conversation } : {}), records: 0, turns });
  return [];
};

/**
 * Candidate rows of records the caller's immediate erasure removed before this control that were
 * written after it: the records consumer computes a segment's candidates after writing its records,
 * and that erasure can run in between, so this erasure finds no record and its candidates stay in
 * the graph store. They go here; an id whose record exists again (the same text indexed in another
 * conversation) is kept.
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
