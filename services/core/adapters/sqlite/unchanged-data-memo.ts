/**
 * Results of reads kept until the database changes, for reads that every query repeats over data
 * that changes rarely against it (the known entity and topic names of a tenant or conversation,
 * a loose index scan of hundreds of seeks). Any change empties the memo: the stamp is
 * `PRAGMA data_version` (changes when another connection commits) with `total_changes()` (rows
 * this connection changed, committed or not), read once per lookup; so while writes keep coming
 * every lookup reads afresh, and a kept result is never older than the data. At most `capacity`
 * results are kept (the oldest dropped first), whatever the number of tenants and conversations.
 */
export class UnchangedDataMemo<V> {
  private readonly entries = new Map<string, V>();
  private stamp: string | undefined;

  constructor(
    private readonly readStamp: () => string,
    private readonly capacity: number,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`UnchangedDataMemo: capacity must be a whole number >= 1, got ${capacity}`);
  }

  /** The kept result of `key` while nothing changed, else `read()`'s (then kept). */
  get(key: string, read: () => V): V {
    const stamp = this.readStamp();
    if (stamp !== this.stamp) {
      this.entries.clear();
      this.stamp = stamp;
    }
    const kept = this.entries.get(key);
    if (kept !== undefined) return kept;
    const value = read();
    if (this.entries.size >= this.capacity) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(key, value);
    return value;
  }
}
