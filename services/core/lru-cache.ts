import { createHash } from "node:crypto";

/**
 * A cache key of bounded size for a text: the text itself when it has at most `maxChars`
 * characters, else its SHA-256. A long text (a turn of tens of KB) would otherwise be held as a key
 * beside a small value; the prefixes keep the two kinds of key apart.
 */
export const compactKey = (text: string, maxChars: number): string =>
  text.length > maxChars ? `#${createHash("sha256").update(text).digest("base64")}` : `=${text}`;

/**
 * A bounded least-recently-used map: a Map keeps insertion order, so re-inserting on every hit
 * keeps the oldest entry first and eviction is O(1). Used for memoised pure results (vectors,
 * attention shares, place names) and for the embedded runtime's per-conversation stage states, whose
 * owner acts on what is dropped through `onEvict`.
 */
export class LruCache<K, V> {
  private readonly entries = new Map<K, V>();

  constructor(
    readonly capacity: number,
    private readonly onEvict?: (key: K, value: V) => void,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`LRU capacity must be >= 1, got ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, value);
    return value;
  }

  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size <= this.capacity) return;
    const [oldest, dropped] = this.entries.entries().next().value as [K, V];
    this.entries.delete(oldest);
    this.onEvict?.(oldest, dropped);
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  /** The keys, least recently used first (without touching them). */
  keys(): K[] {
    return [...this.entries.keys()];
  }

  /** The values, least recently used first (without touching them). */
  values(): V[] {
    return [...this.entries.values()];
  }
}
