/**
 * The conversations the gateway produced turns for lately, per tenant, so that a tenant-wide flush
 * can name them (a flush control is keyed by conversation). Bounded in total, not per tenant: a
 * per-tenant cap alone still grows with the number of tenants. The least recently written
 * conversation is forgotten first; a forgotten one is simply not flushed by a tenant-wide flush,
 * and its open segment closes when it goes idle, as it would without a flush.
 */
export class RecentConversations {
  /** tenant → its conversations, oldest first (a Set keeps insertion order). */
  private readonly byTenant = new Map<string, Set<string>>();
  /** Every remembered pair, least recently written first; the value is [tenant, conversation]. */
  private readonly order = new Map<string, readonly [string, string]>();

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`capacity must be >= 1, got ${capacity}`);
  }

  get size(): number {
    return this.order.size;
  }

  remember(tenant: string, conversation: string): void {
    // JSON of the pair: unambiguous whatever separators the names contain.
    const key = JSON.stringify([tenant, conversation]);
    this.order.delete(key);
    this.order.set(key, [tenant, conversation]);
    let set = this.byTenant.get(tenant);
    if (!set) {
      set = new Set();
      this.byTenant.set(tenant, set);
    }
    set.delete(conversation);
    set.add(conversation);
    while (this.order.size > this.capacity) {
      const [oldestKey, [t, c]] = this.order.entries().next().value as [string, readonly [string, string]];
      this.order.delete(oldestKey);
      this.dropFromTenant(t, c);
    }
  }

  /** The tenant's remembered conversations, least recently written first. */
  of(tenant: string): string[] {
    return [...(this.byTenant.get(tenant) ?? [])];
  }

  forget(tenant: string, conversation: string): void {
    this.order.delete(JSON.stringify([tenant, conversation]));
    this.dropFromTenant(tenant, conversation);
  }

  forgetTenant(tenant: string): void {
    for (const conversation of this.byTenant.get(tenant) ?? [])
      this.order.delete(JSON.stringify([tenant, conversation]));
    this.byTenant.delete(tenant);
  }

  private dropFromTenant(tenant: string, conversation: string): void {
    const set = this.byTenant.get(tenant);
    if (!set) return;
    set.delete(conversation);
    if (set.size === 0) this.byTenant.delete(tenant);
  }
}
