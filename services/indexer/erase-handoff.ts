/**
 * Record ids the indexer's raw-turn consumer erased on an erase control, handed to its records
 * consumer, whose erase control for the same erasure tombstones them too (issue 18).
 *
 * Why: both consumers erase on an erase control, each when it reaches it, and the raw-turn consumer
 * (it reads the sensory topic) usually gets there first. A segment of the erased conversation that
 * the records consumer was indexing at that moment has its records in the stores but its update
 * candidates not yet committed: the raw-turn consumer erases those records and tombstones them, then
 * the records consumer commits their candidate sets after the tombstones. When it reaches its own
 * erase control the records are gone, so it found nothing to tombstone, and the candidate sets of
 * erased records stayed live on the compacted update queue. With the ids handed over, its
 * tombstones come after every candidate set it wrote (its input order), as for the records it erases.
 *
 * In memory and bounded (oldest first out): a tombstone more than needed is harmless, and ids are
 * kept rather than taken, so every erase-tenant control (one per partition, each behind that
 * partition's records) tombstones them. A process restart between the two consumers' erasures
 * loses them (the race is then back for that erasure).
 */

/** Ids kept at most (about 100 bytes each). */
export const ERASE_HANDOFF_MAX_IDS = 50_000;

export class ErasedRecordsHandOff {
  /** Ids by tenant, then by conversation ("" for a tenant erasure), in insertion order. */
  private readonly byTenant = new Map<string, Map<string, Set<string>>>();
  private readonly order: { tenant: string; conversation: string; ids: readonly string[] }[] = [];
  private size = 0;

  constructor(readonly maxIds = ERASE_HANDOFF_MAX_IDS) {
    if (!Number.isInteger(maxIds) || maxIds < 1) throw new Error(`maxIds must be a positive integer, got ${maxIds}`);
  }

  /** The raw-turn consumer erased these records (of a conversation, or of the whole tenant). */
  give(tenant: string, conversation: string | undefined, ids: readonly string[]): void {
    if (ids.length === 0) return;
    const scope = conversation ?? "";
    let conversations = this.byTenant.get(tenant);
    if (!conversations) {
      conversations = new Map();
      this.byTenant.set(tenant, conversations);
    }
    let held = conversations.get(scope);
    if (!held) {
      held = new Set();
      conversations.set(scope, held);
    }
    const fresh = ids.filter((id) => !held.has(id));
    for (const id of fresh) held.add(id);
    this.order.push({ tenant, conversation: scope, ids: fresh });
    this.size += fresh.length;
    while (this.size > this.maxIds && this.order.length > 0) this.evictOldest();
  }

  /**
   * What the raw-turn consumer erased that an erasure of this scope covers: a conversation's
   * erasure its own ids and the tenant's; a tenant's erasure every id of the tenant.
   */
  erasedBy(tenant: string, conversation: string | undefined): string[] {
    const conversations = this.byTenant.get(tenant);
    if (!conversations) return [];
    if (conversation === undefined) return [...conversations.values()].flatMap((ids) => [...ids]);
    return [...(conversations.get(conversation) ?? []), ...(conversations.get("") ?? [])];
  }

  private evictOldest(): void {
    const oldest = this.order.shift();
    if (!oldest) return;
    const conversations = this.byTenant.get(oldest.tenant);
    const held = conversations?.get(oldest.conversation);
    if (!conversations || !held) return;
    for (const id of oldest.ids) if (held.delete(id)) this.size--;
    if (held.size === 0) conversations.delete(oldest.conversation);
    if (conversations.size === 0) this.byTenant.delete(oldest.tenant);
  }
}
