/**
 * A bounded memo in two generations: entries go into the young map, which becomes the old one
 * when it holds half the capacity (the old one dropped); a hit in the old map moves the entry
 * back to the young one. What is used keeps its place and the size stays within the capacity,
 * as with least-recently-used eviction, but a hit is one Map lookup: an LRU Map's delete and
 * re-insert on every hit was most of the cost of counting a packed context's tokens (a thousand
 * piece lookups per query: tokens.ts). For memoised pure results only: nothing is told of what
 * is dropped (lru-cache.ts has that).
 */
export class GenerationalMemo<K, V> {
  private young = new Map<K, V>();
  private old = new Map<K, V>();

  constructor(private readonly capacity: number) {}

  get(key: K): V | undefined {
    const hit = this.young.get(key);
    if (hit !== undefined) return hit;
    const aged = this.old.get(key);
    if (aged !== undefined) this.set(key, aged);
    return aged;
  }

  set(key: K, value: V): void {
    if (this.young.size >= this.capacity / 2) {
      this.old = this.young;
      this.young = new Map();
    }
    this.young.set(key, value);
  }
}
