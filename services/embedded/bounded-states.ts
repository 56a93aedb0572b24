/**
 * The embedded runtime's in-memory copy of per-conversation stage state (segmenter, encoder),
 * bounded by entries: without a bound the map would hold every conversation of every tenant the
 * process has seen. The durable copy is in the state store, so a dropped entry is only read again;
 * `onEvict` lets the owner act on what is dropped (the segmenter closes an open segment, which the
 * idle check, reading this map, would otherwise never see). Least recently used dropped first: a
 * Map keeps insertion order, and every read or write re-inserts its key at the end.
 */
export class BoundedStates<S> {
  private readonly entries = new Map<string, S>();

  constructor(
    readonly capacity: number,
    private readonly onEvict?: (key: string, state: S) => void,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`state capacity must be >= 1, got ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: string): S | undefined {
    const state = this.entries.get(key);
    if (state === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, state);
    return state;
  }

  set(key: string, state: S): void {
    this.entries.delete(key);
    this.entries.set(key, state);
    while (this.entries.size > this.capacity) {
      const [oldest, dropped] = this.entries.entries().next().value as [string, S];
      this.entries.delete(oldest);
      this.onEvict?.(oldest, dropped);
    }
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  keys(): string[] {
    return [...this.entries.keys()];
  }

  /** A snapshot of the entries, oldest first (without touching them). */
  values(): S[] {
    return [...this.entries.values()];
  }
}
