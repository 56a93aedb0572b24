/**
 * Results of the reads every query makes (the known entity and topic names and the record count of
 * a tenant or conversation before the routes; the lexical routes' scope counts), kept until the
 * tenant's data changes. Those reads go over every MENTIONED_IN / TAGS relationship, Record or Turn
 * node of the scope, so their cost grows with the tenant, while the data they read changes rarely
 * against the questions asked of it.
 *
 * The writers (indexer, consolidator) are other processes than the query service, so a change is
 * seen through the tenant's write stamps on its Tenant node: `stamp` for records and their index
 * (entities, topics, validity), `turnStamp` for raw turns (which arrive turn by turn, far more
 * often than records change). Every write transaction that changes what a memo reads sets the
 * stamp of that data to a fresh random value in that same transaction (stampCypher), and again
 * once it has committed: Neo4j applies a commit to the store in steps (property updates, then
 * deletes, then index updates), so a reader between the steps may see the new stamp with part of
 * the data and keep that view; the stamp set after the commit retires it. (The one set in the
 * transaction is for a writer that stops between the two: without it nothing would change.) A lookup
 * reads the stamps (one index seek); a kept result is returned only while the stamp it was read
 * under is still the tenant's. A stamp is random, not a counter, so a tenant erased and written
 * again never repeats a stamp a memo holds. No stamp (a tenant not yet written, or erased, or
 * written before stamps existed and not stamped since): nothing is kept.
 *
 * The stamp is read before the data, so a result is never older than its stamp: a write that
 * commits between the two reads leaves the result kept under the older stamp, which the next
 * lookup finds changed.
 */

import { LruCache } from "../../lru-cache.ts";

/** What a stamp covers: records and their index rows, or raw turns. */
export type StampedData = "records" | "turns";

/** The node property of each stamp. */
export const STAMP_PROPERTY: Record<StampedData, string> = { records: "stamp", turns: "turnStamp" };

/**
 * Sets fresh stamps of `data` on the tenant's node ($tenant), the last statement of a write
 * transaction. MATCH, not MERGE: a tenant without its node (erased) has no stamp, and no memo keeps
 * its reads.
 */
export const stampCypher = (data: readonly StampedData[]): string =>
  `MATCH (t:Tenant {tenant: $tenant}) SET ${data.map((d) => `t.${STAMP_PROPERTY[d]} = randomUUID()`).join(", ")}`;

/** A tenant's stamps (null: none). */
export type TenantStamps = Record<StampedData, string | null>;

/** Reads the stamps of tenants (a tenant without a node: absent or both null). */
export type StampRead = (tenants: readonly string[]) => Promise<Map<string, TenantStamps>>;

/**
 * Stamp reads of lookups that start together (query.ts asks for the names and the count at once)
 * share one statement. A lookup joins only a read that has not been sent yet, so every read starts
 * after the lookups it answers: none is answered by a read older than its call.
 */
export class TenantStampReader {
  private waiting: { tenants: Set<string>; result: Promise<Map<string, TenantStamps>> } | undefined;

  constructor(private readonly readStamps: StampRead) {}

  async stampOf(tenant: string, data: StampedData): Promise<string | null> {
    let batch = this.waiting;
    if (batch === undefined) {
      const tenants = new Set<string>();
      const result = Promise.resolve().then(() => {
        // Sent now: later lookups start a read of their own.
        this.waiting = undefined;
        return this.readStamps([...tenants]);
      });
      batch = { tenants, result };
      this.waiting = batch;
    }
    batch.tenants.add(tenant);
    return (await batch.result).get(tenant)?.[data] ?? null;
  }
}

/**
 * Kept results of reads of `data` by key, each with the tenant's stamp of that data it was read
 * under; at most `capacity` (the least recently used dropped first).
 */
export class TenantStampMemo<V> {
  private readonly entries: LruCache<string, { stamp: string; value: V }>;

  constructor(
    private readonly stamps: TenantStampReader,
    private readonly data: StampedData,
    capacity: number,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`TenantStampMemo: capacity must be a whole number >= 1, got ${capacity}`);
    this.entries = new LruCache(capacity);
  }

  /** The kept result of `key` (a read of `tenant`'s data) while the tenant's stamp is unchanged, else `read()`'s. */
  async get(tenant: string, key: string, read: () => Promise<V>): Promise<V> {
    const stamp = await this.stamps.stampOf(tenant, this.data);
    if (stamp === null) {
      this.entries.delete(key);
      return read();
    }
    const kept = this.entries.get(key);
    if (kept !== undefined && kept.stamp === stamp) return kept.value;
    const value = await read();
    this.entries.set(key, { stamp, value });
    return value;
  }
}
