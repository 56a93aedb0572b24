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
import { turnRowId } from "./ids.ts";
import { conversationKey } from "./keys.ts";
import type { ConversationHoldings, ErasedIds, GraphTransactions, TransactionWrites } from "./ports.ts";
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

/** The writes that erase a conversation, given what it holds. Pure. */
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
      deleteConversation: conversation,
      deleteDeadLetters: [conversationKey(tenant, conversation)],
    },
    result: {
      records: held.recordIds,
      turns: held.turnIds.map((turnId) => turnRowId(conversation, turnId)),
      restored,
    },
  };
};

/**
 * Erasure of one conversation from the graph store, in one transaction: its records with every
 * index row, full-text row, candidate and edge, its segments, raw turns and dead letters. Records
 * of other conversations that it had superseded become current again; merged sources from it are
 * removed. Returns the erased record ids and turn row ids (the vector ids to delete with them).
 */
export const eraseConversation = (store: GraphTransactions, tenant: string, conversation: string): Promise<ErasedIds> =>
  store.transact(tenant, { conversation }, (view) => erasureWrites(tenant, conversation, view.conversation));
