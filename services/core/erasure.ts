/**
 * The erasure rule of a conversation, written once for every graph store: what goes (its records
 * with everything derived from them, its segments, raw turns and dead letters), which ids are
 * reported erased (so the caller deletes the same vectors), and how the records of other
 * conversations are repaired (consolidation undone: a record it had superseded becomes current
 * again, merged sources from it are removed). A store runs the rule in one of its transactions
 * (GraphTransactions.transact); a tenant's erasure is every row of it (GraphMaintenance.deleteTenant,
 * which names the records it deleted).
 * What then stays on disk is the store's purgeDeleted (docs/erasure.md).
 */
import { setImmediate as nextTurn } from "node:timers/promises";
import { turnRowId } from "./ids.ts";
import { conversationKey } from "./keys.ts";
import type {
  ConversationHoldings,
  ErasedIds,
  GraphMaintenance,
  GraphTransactions,
  TransactionWrites,
} from "./ports.ts";
import type { MemoryRecord } from "./types.ts";

/** A dependant as it must be once the conversation is gone, or undefined when it does not change. */
const repaired = (
  record: MemoryRecord,
  conversation: string,
  erased: ReadonlySet<string>,
): { record: MemoryRecord; restored: boolean } | undefined => {
  let out = record;
  const superseder = record.valid.supersededBy;
  const restored = superseder !== undefined && erased.has(superseder);
  if (restored) out = { ...out, valid: { from: out.valid.from } };
  const sources = out.mergedSources ?? [];
  const kept = sources.filter((src) => src.conversation !== conversation);
  if (kept.length !== sources.length) {
    const { mergedSources: _dropped, ...rest } = out;
    out = kept.length > 0 ? { ...rest, mergedSources: kept } : rest;
  }
  return out === record ? undefined : { record: out, restored };
};

/**
 * Records and raw turns erased per transaction. On the 100K scale store one conversation (405
 * records, 419 turns) was one SQLite transaction of 0.25-0.45 s on the event loop, and up to 1.1 s
 * with the log's checkpoint in its commit; a step of 64 records takes 20-40 ms, of 64 turns 4-5 ms
 * (docs/benchmarks.md, "Erasure in steps, checkpoints on a worker thread").
 */
export const ERASURE_STEP = 64;

/**
 * The writes that erase a conversation, given what it holds (or, with a limit, what one step of
 * the erasure read: its first records and turns, the records those supersede). A step that did
 * not read everything deletes what it read; the last one deletes the rest of the conversation and
 * repairs merged sources. Pure.
 */
export const erasureWrites = (
  tenant: string,
  conversation: string,
  held: ConversationHoldings,
): { writes: TransactionWrites; result: ErasedIds } => {
  const erased = new Set(held.recordIds);
  const rewrites: MemoryRecord[] = [];
  let restored = 0;
  for (const dependant of held.dependants) {
    if (dependant.source.conversation === conversation || erased.has(dependant.id)) continue;
    const fixed = repaired(dependant, conversation, erased);
    if (!fixed) continue;
    rewrites.push(fixed.record);
    if (fixed.restored) restored++;
  }
  return {
    writes: {
      records: rewrites,
      deleteRecords: held.recordIds,
      ...(held.complete
        ? { deleteConversation: conversation, deleteDeadLetters: [conversationKey(tenant, conversation)] }
        : { deleteTurns: { conversation, turnIds: held.turnIds } }),
    },
    result: {
      records: held.recordIds,
      turns: held.turnIds.map((turnId) => turnRowId(conversation, turnId)),
      restored,
    },
  };
};

/**
 * Erasure of one conversation from the graph store, in steps of at most `step` records and raw
 * turns, each one transaction, with a turn of the event loop between them: its records with every
 * index row, full-text row, candidate and edge, then its raw turns, and in the last step its
 * segments, what is left of its turns and its dead letters. Records of other conversations that it
 * had superseded become current again (in the step that deletes their superseder); merged sources
 * from it are removed (in the last step). Returns the erased record ids and turn row ids (the
 * vector ids to delete with them).
 *
 * Why steps: a transaction holds the store, and on SQLite the event loop, for as long as it runs.
 * Between two steps the store answers queries; one of them may see the conversation partly gone,
 * which the erasure was asked for anyway. A crash between steps leaves a part, and the erasure
 * asked again (it is idempotent) finishes it.
 */
export const eraseConversation = (
  store: GraphTransactions,
  tenant: string,
  conversation: string,
  step: number = store.erasureStep ?? ERASURE_STEP,
): Promise<ErasedIds> => eraseInSteps(store, tenant, conversation, step, true);

const eraseInSteps = async (
  store: GraphTransactions,
  tenant: string,
  conversation: string,
  step: number,
  dependants: boolean,
): Promise<ErasedIds> => {
  if (!((Number.isInteger(step) && step > 0) || step === Number.POSITIVE_INFINITY))
    throw new RangeError(`eraseConversation: step must be a whole number >= 1 or Infinity, got ${step}`);
  const limit = Number.isFinite(step) ? { limit: step } : {};
  const erased: ErasedIds = { records: [], turns: [], restored: 0 };
  for (;;) {
    const { result, complete } = await store.transact(tenant, { conversation, ...limit, dependants }, (view) => {
      const { writes, result } = erasureWrites(tenant, conversation, view.conversation);
      return { writes, result: { result, complete: view.conversation.complete } };
    });
    erased.records.push(...result.records);
    erased.turns.push(...result.turns);
    erased.restored += result.restored;
    if (complete) return erased;
    await nextTurn();
  }
};

/**
 * Erasure of a tenant from the graph store: each conversation holding a record or a segment in
 * steps (eraseConversation), then every row left (names, days, raw turns of no segment yet, the
 * tenant's own rows) in one transaction (deleteTenant). Returns the ids of the records deleted, each
 * read in the transaction that deleted it, as deleteTenant's are. One transaction for the whole
 * tenant held the event loop for 1.8 s on a tenant of 22K items (the 100K scale store). A store
 * that takes no steps (erasureStep Infinity: Neo4j) deletes the tenant through deleteTenant alone.
 */
export const eraseTenant = async (
  store: GraphTransactions & Pick<GraphMaintenance, "tenantConversations" | "deleteTenant">,
  tenant: string,
  step: number = store.erasureStep ?? ERASURE_STEP,
): Promise<string[]> => {
  if (step === Number.POSITIVE_INFINITY) return store.deleteTenant(tenant);
  const records: string[] = [];
  for (const conversation of await store.tenantConversations(tenant)) {
    // Nothing to repair: the records that depend on it are the tenant's, and go too.
    records.push(...(await eraseInSteps(store, tenant, conversation, step, false)).records);
    await nextTurn();
  }
  records.push(...(await store.deleteTenant(tenant)));
  return records;
};
