/**
 * A tenant's live vectors in one contiguous Float32Array, as stored (the bytes the `vectors` table
 * holds), with each one's inverse norm, a parallel label array and posting lists of labels by
 * kind, conversation and entity, so that a filtered exact search finds its admissible vectors
 * without visiting the rest of the tenant and scores them in one pass over memory instead of
 * copying each out of hnswlib (getPoint allocates a fresh JS array per vector), and a query's
 * reranks read the stored vectors from memory instead of from SQLite (vectorOf).
 *
 * Removal moves the last slot into the freed one and zeroes the last slot: a deleted vector does not
 * stay in this block's memory (erasure, docs/erasure.md). A grown block zeroes the buffer it leaves.
 */
import type { VectorFilter, VectorKind, VectorPayload } from "../../ports.ts";
import { entityKey, type PayloadPredicate } from "../../vector-filter.ts";

/**
 * The factor a vector is scaled by to unit length, in single precision (float sum,
 * 1/(sqrtf + 1e-30)): the exact path scores fround(v[i] * inverseNorm) (dotScores), the unit
 * vector the block held before it kept the stored vectors (hnswlib's own stored points may differ
 * from it in the last bit).
 */
export const inverseNorm = (v: Float32Array, offset = 0, dim = v.length): number => {
  const f = Math.fround;
  let norm = 0;
  for (let i = offset; i < offset + dim; i++) norm = f(norm + f((v[i] as number) * (v[i] as number)));
  return f(1 / f(f(Math.sqrt(norm)) + 1e-30));
};

/**
 * inverseNorm of the vectors in slots [from, to) of `data` into `out[from..to)`, four vectors at a
 * time: one vector's norm is a chain of dependent float32 additions, which waits on each add's
 * latency; four independent chains keep the FPU busy. Each vector's own sum is the same operations
 * in the same order as inverseNorm, so the results are bit-identical (a load computed ~35 ms of
 * them per tenant of 22K vectors one at a time).
 */
export const inverseNorms = (data: Float32Array, dim: number, from: number, to: number, out: Float32Array): void => {
  const f = Math.fround;
  let j = from;
  for (; j + 4 <= to; j += 4) {
    const b0 = j * dim;
    const b1 = b0 + dim;
    const b2 = b1 + dim;
    const b3 = b2 + dim;
    let n0 = 0;
    let n1 = 0;
    let n2 = 0;
    let n3 = 0;
    for (let i = 0; i < dim; i++) {
      const x0 = data[b0 + i] as number;
      const x1 = data[b1 + i] as number;
      const x2 = data[b2 + i] as number;
      const x3 = data[b3 + i] as number;
      n0 = f(n0 + f(x0 * x0));
      n1 = f(n1 + f(x1 * x1));
      n2 = f(n2 + f(x2 * x2));
      n3 = f(n3 + f(x3 * x3));
    }
    out[j] = f(1 / f(f(Math.sqrt(n0)) + 1e-30));
    out[j + 1] = f(1 / f(f(Math.sqrt(n1)) + 1e-30));
    out[j + 2] = f(1 / f(f(Math.sqrt(n2)) + 1e-30));
    out[j + 3] = f(1 / f(f(Math.sqrt(n3)) + 1e-30));
  }
  for (; j < to; j++) out[j] = inverseNorm(data, j * dim, dim);
};

/**
 * Where a filtered search finds its candidates: the labels of the smallest posting list that
 * covers the filter (kind, conversation, kind and conversation, or the union of the entities'
 * lists, of the filter's kind when it names one), or every live vector (`postings` empty) when the filter names none of those fields.
 * `bound` is how many labels that is (an upper bound on the admissible items); `complete` says
 * that being in the list already satisfies the whole filter (no other field to check).
 */
export interface CandidateSource {
  postings: ReadonlySet<number>[];
  bound: number;
  complete: boolean;
}

const kindKey = (kind: VectorKind): string => `k\u0000${kind}`;
const convKey = (conversation: string): string => `c\u0000${conversation}`;
const kindConvKey = (kind: VectorKind, conversation: string): string => `kc\u0000${kind}\u0000${conversation}`;
const entKey = (entity: string): string => `e\u0000${entityKey(entity)}`;
const kindEntKey = (kind: VectorKind, entity: string): string => `ke\u0000${kind}\u0000${entityKey(entity)}`;

/** The posting keys an item is listed under. */
const keysOf = (p: VectorPayload): string[] => {
  const keys = [kindKey(p.kind), convKey(p.conversation), kindConvKey(p.kind, p.conversation)];
  for (const e of new Set((p.entities ?? []).map(entityKey))) keys.push(entKey(e), kindEntKey(p.kind, e));
  return keys;
};

/**
 * keysOf memoised (VectorBlock.filler): the keys of each kind + conversation and of each kind +
 * entity name as written, built once, the same strings in the same order as keysOf's.
 */
class KeyMemo {
  private readonly base = new Map<string, Map<string, readonly string[]>>();
  /** kind -> entity as written -> [entityKey, entKey, kindEntKey]. */
  private readonly ents = new Map<string, Map<string, readonly [string, string, string]>>();

  keysOf(p: VectorPayload): readonly string[] {
    let byConv = this.base.get(p.kind);
    if (!byConv) {
      byConv = new Map();
      this.base.set(p.kind, byConv);
    }
    let base = byConv.get(p.conversation);
    if (!base) {
      base = [kindKey(p.kind), convKey(p.conversation), kindConvKey(p.kind, p.conversation)];
      byConv.set(p.conversation, base);
    }
    const entities = p.entities;
    if (!entities || entities.length === 0) return base;
    let byName = this.ents.get(p.kind);
    if (!byName) {
      byName = new Map();
      this.ents.set(p.kind, byName);
    }
    const keys = base.slice();
    // keysOf's new Set(entities.map(entityKey)): each normalised name once, first one first.
    const seen: string[] = [];
    for (const name of entities) {
      let e = byName.get(name);
      if (!e) {
        const k = entityKey(name);
        e = [k, entKey(k), kindEntKey(p.kind, k)];
        byName.set(name, e);
      }
      if (entities.length > 1) {
        if (seen.includes(e[0])) continue;
        seen.push(e[0]);
      }
      keys.push(e[1], e[2]);
    }
    return keys;
  }
}

const EMPTY: ReadonlySet<number> = new Set();

export interface ScoredLabel {
  label: number;
  score: number;
}

export class VectorBlock {
  readonly dim: number;
  /** The stored vectors, not normalised: vectorOf returns them as written. */
  private data: Float32Array;
  /** inverseNorm of each slot's vector (exact in float32, so stored here without loss). */
  private inverse: Float32Array;
  private labels: Int32Array;
  private payloads: VectorPayload[] = [];
  private readonly slotOf = new Map<number, number>();
  /**
   * Labels by kind, conversation, kind + conversation, entity key and kind + entity key: a filtered search reads the
   * smallest list that covers its filter instead of checking every live vector of the tenant, so
   * its cost follows what the filter admits, not the tenant's size.
   */
  private readonly postings = new Map<string, Set<number>>();
  private size = 0;

  constructor(dim: number, capacity = 64) {
    this.dim = dim;
    const cap = Math.max(1, capacity);
    this.data = new Float32Array(cap * dim);
    this.inverse = new Float32Array(cap);
    this.labels = new Int32Array(cap);
  }

  get count(): number {
    return this.size;
  }

  private grow(): void {
    const cap = this.labels.length * 2;
    const data = new Float32Array(cap * this.dim);
    data.set(this.data);
    this.data.fill(0);
    this.data = data;
    const inverse = new Float32Array(cap);
    inverse.set(this.inverse);
    this.inverse.fill(0);
    this.inverse = inverse;
    const labels = new Int32Array(cap);
    labels.set(this.labels);
    this.labels = labels;
  }

  /**
   * put() of each item in order (a tenant's stored rows at load), with the same resulting state:
   * the posting keys come from a memo kept for this fill only (a tenant's kinds, conversations
   * and entity names repeat over thousands of items: each one's keys were normalised and
   * concatenated again per item), and the new slots' inverse norms are computed by done(), four
   * at a time (inverseNorms): the block is not searched between the first put and done(). A label
   * already in the block goes through put() itself.
   */
  filler(): { put: (label: number, vector: Float32Array, payload: VectorPayload) => void; done: () => void } {
    const memo = new KeyMemo();
    const first = this.size;
    const put = (label: number, vector: Float32Array, payload: VectorPayload): void => {
      // A replaced label may sit in a slot before `first`, which done() does not cover.
      if (this.slotOf.has(label)) this.put(label, vector, payload);
      else this.place(label, vector, payload, memo.keysOf(payload));
    };
    return { put, done: () => inverseNorms(this.data, this.dim, first, this.size, this.inverse) };
  }

  /** Adds or replaces the vector of a label. */
  put(label: number, vector: Float32Array, payload: VectorPayload): void {
    const slot = this.place(label, vector, payload, keysOf(payload));
    this.inverse[slot] = inverseNorm(vector);
  }

  /**
   * put() but for the inverse norm (the caller's: at once, or the filler's done()): the slot,
   * the posting lists under `keys` (keysOf(payload)), the vector and the payload.
   */
  private place(label: number, vector: Float32Array, payload: VectorPayload, keys: readonly string[]): number {
    if (vector.length !== this.dim) throw new Error(`VectorBlock: dimension ${vector.length}, expected ${this.dim}`);
    let slot = this.slotOf.get(label);
    if (slot === undefined) {
      if (this.size === this.labels.length) this.grow();
      slot = this.size++;
      this.slotOf.set(label, slot);
      this.labels[slot] = label;
    } else {
      this.unlist(label, this.payloads[slot] as VectorPayload);
    }
    this.list(keys, label);
    this.data.set(vector, slot * this.dim);
    this.payloads[slot] = payload;
    return slot;
  }

  remove(label: number): void {
    const slot = this.slotOf.get(label);
    if (slot === undefined) return;
    this.slotOf.delete(label);
    this.unlist(label, this.payloads[slot] as VectorPayload);
    const last = --this.size;
    const dim = this.dim;
    if (slot !== last) {
      const moved = this.labels[last] as number;
      this.data.copyWithin(slot * dim, last * dim, (last + 1) * dim);
      this.inverse[slot] = this.inverse[last] as number;
      this.labels[slot] = moved;
      this.payloads[slot] = this.payloads[last] as VectorPayload;
      this.slotOf.set(moved, slot);
    }
    this.data.fill(0, last * dim, (last + 1) * dim);
    this.inverse[last] = 0;
    this.payloads.length = last;
  }

  private list(keys: readonly string[], label: number): void {
    for (const key of keys) {
      let set = this.postings.get(key);
      if (!set) {
        set = new Set();
        this.postings.set(key, set);
      }
      set.add(label);
    }
  }

  private unlist(label: number, payload: VectorPayload): void {
    for (const key of keysOf(payload)) {
      const set = this.postings.get(key);
      if (!set) continue;
      set.delete(label);
      if (set.size === 0) this.postings.delete(key);
    }
  }

  /** The candidates of a filter (see CandidateSource): a few map lookups, no scan. */
  source(filter: VectorFilter | undefined): CandidateSource {
    const all: CandidateSource = { postings: [], bound: this.size, complete: filter === undefined };
    if (!filter) return all;
    const { kind, conversation, types, timeFrom, timeTo, entities } = filter;
    const restricted = (types?.length ?? 0) > 0 || timeFrom !== undefined || timeTo !== undefined;
    const hasEntities = (entities?.length ?? 0) > 0;
    const options: CandidateSource[] = [];
    const one = (key: string, complete: boolean): CandidateSource => {
      const set = this.postings.get(key) ?? EMPTY;
      return { postings: [set], bound: set.size, complete };
    };
    if (kind !== undefined && conversation !== undefined) {
      options.push(one(kindConvKey(kind, conversation), !restricted && !hasEntities));
    } else if (kind !== undefined) {
      options.push(one(kindKey(kind), !restricted && !hasEntities));
    } else if (conversation !== undefined) {
      options.push(one(convKey(conversation), !restricted && !hasEntities));
    }
    if (hasEntities) {
      const keys = [...new Set((entities ?? []).map(entityKey))].map((e) =>
        kind === undefined ? entKey(e) : kindEntKey(kind, e),
      );
      const lists = keys.map((k) => this.postings.get(k) ?? EMPTY);
      options.push({
        postings: lists,
        bound: lists.reduce((n, l) => n + l.size, 0),
        complete: conversation === undefined && !restricted,
      });
    }
    if (options.length === 0) return { ...all, complete: !restricted };
    return options.reduce((best, o) => (o.bound < best.bound ? o : best));
  }

  /** Whether a live label is listed in the source (the HNSW filter callback of a complete source). */
  static member(source: CandidateSource): (label: number) => boolean {
    const [only, ...rest] = source.postings;
    if (!only) return () => true;
    if (rest.length === 0) return (label) => only.has(label);
    return (label) => source.postings.some((p) => p.has(label));
  }

  /**
   * The slot of a live label, or -1 when it is not in the block (slots move on removal: valid
   * until the next change).
   */
  slotOfLabel(label: number): number {
    return this.slotOf.get(label) ?? -1;
  }

  /**
   * Copies of the vectors of these slots as stored (the bytes a read of their `vectors` rows
   * returns), views on one new buffer: one allocation for the lot instead of one per vector
   * (a fresh ArrayBuffer per vector cost more than the copy).
   */
  copiesOf(slots: readonly number[]): Float32Array[] {
    const dim = this.dim;
    const buffer = new Float32Array(slots.length * dim);
    return slots.map((slot, j) => {
      buffer.set(this.data.subarray(slot * dim, (slot + 1) * dim), j * dim);
      return buffer.subarray(j * dim, (j + 1) * dim);
    });
  }

  /** A copy of a live label's vector as stored (undefined when it is not in the block). */
  vectorOf(label: number): Float32Array | undefined {
    const slot = this.slotOf.get(label);
    return slot === undefined ? undefined : this.copiesOf([slot])[0];
  }

  /** The payload of a live label (undefined when it is not in the block). */
  payloadOf(label: number): VectorPayload | undefined {
    const slot = this.slotOf.get(label);
    return slot === undefined ? undefined : this.payloads[slot];
  }

  /**
   * Slots of the live vectors the filter admits, read from the filter's candidate source (its
   * smallest posting list; every slot when it names no indexed field). The predicate runs on each
   * candidate unless the source alone decides the filter.
   */
  admissibleFrom(source: CandidateSource, predicate: PayloadPredicate): Int32Array {
    if (source.postings.length === 0) return this.scan(source.complete ? undefined : predicate);
    const out = new Int32Array(source.bound);
    let n = 0;
    const seen = source.postings.length > 1 ? new Set<number>() : undefined;
    for (const list of source.postings) {
      for (const label of list) {
        if (seen) {
          if (seen.has(label)) continue;
          seen.add(label);
        }
        const slot = this.slotOf.get(label);
        if (slot === undefined) continue;
        if (source.complete || predicate(this.payloads[slot] as VectorPayload)) out[n++] = slot;
      }
    }
    return out.subarray(0, n);
  }

  /**
   * Slots of the live vectors the filter admits (every posting list considered: admissibleFrom of
   * the filter's source).
   */
  admissible(filter: VectorFilter | undefined, predicate: PayloadPredicate): Int32Array {
    return this.admissibleFrom(this.source(filter), predicate);
  }

  /** Every live slot the predicate admits (a filter naming no indexed field). */
  private scan(predicate: PayloadPredicate | undefined): Int32Array {
    const out = new Int32Array(this.size);
    let n = 0;
    for (let s = 0; s < this.size; s++) {
      if (!predicate || predicate(this.payloads[s] as VectorPayload)) out[n++] = s;
    }
    return out.subarray(0, n);
  }

  labelAt(slot: number): number {
    return this.labels[slot] as number;
  }

  /**
   * The best k of the given slots by dot product with a unit query (exact), best first, ties by
   * label ascending.
   */
  topK(query: Float64Array, slots: Int32Array, k: number): ScoredLabel[] {
    const scores = dotScores(query, this.data, this.inverse, this.dim, slots);
    const labelOf = (j: number): number => this.labels[slots[j] as number] as number;
    return bestK(scores, labelOf, k).map((j) => ({ label: labelOf(j), score: scores[j] as number }));
  }
}

/**
 * The dot product of the unit query with the unit vector of each slot, fround(v[i] * inverse[slot])
 * (hnswlib's normalised point, computed here from the stored vector), each summed in dimension
 * order (the same float64 result as one item at a time). Four items are scored together: one
 * item's sum is a chain of dependent additions, which waits on each add's latency; four
 * independent chains keep the FPU busy (measured 1.8× on 2,000 × 384 scores, bit-identical: the
 * subject-filtered candidate search scores up to bruteForceLimit items per record written).
 */
export const dotScores = (
  query: Float64Array,
  data: Float32Array,
  inverse: Float32Array,
  dim: number,
  slots: Int32Array,
): Float64Array => {
  const f = Math.fround;
  const n = slots.length;
  const scores = new Float64Array(n);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const c0 = slots[j] as number;
    const c1 = slots[j + 1] as number;
    const c2 = slots[j + 2] as number;
    const c3 = slots[j + 3] as number;
    const b0 = c0 * dim;
    const b1 = c1 * dim;
    const b2 = c2 * dim;
    const b3 = c3 * dim;
    const i0 = inverse[c0] as number;
    const i1 = inverse[c1] as number;
    const i2 = inverse[c2] as number;
    const i3 = inverse[c3] as number;
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    for (let i = 0; i < dim; i++) {
      const q = query[i] as number;
      s0 += q * f((data[b0 + i] as number) * i0);
      s1 += q * f((data[b1 + i] as number) * i1);
      s2 += q * f((data[b2 + i] as number) * i2);
      s3 += q * f((data[b3 + i] as number) * i3);
    }
    scores[j] = s0;
    scores[j + 1] = s1;
    scores[j + 2] = s2;
    scores[j + 3] = s3;
  }
  for (; j < n; j++) {
    const slot = slots[j] as number;
    const base = slot * dim;
    const inv = inverse[slot] as number;
    let s = 0;
    for (let i = 0; i < dim; i++) s += (query[i] as number) * f((data[base + i] as number) * inv);
    scores[j] = s;
  }
  return scores;
};

/**
 * The indexes of the best k scores, best first, ties by label ascending: the first k of a full sort
 * in that order, found by keeping only the best k seen so far (most items lose against the k-th at
 * once), so a search for a few neighbours among thousands of candidates sorts k items, not all.
 */
export const bestK = (scores: Float64Array, labelOf: (j: number) => number, k: number): number[] => {
  const n = scores.length;
  const size = Math.max(0, Math.min(Math.floor(k), n));
  if (size === 0) return [];
  // a before b in the result order.
  const before = (a: number, b: number): boolean => {
    const sa = scores[a] as number;
    const sb = scores[b] as number;
    return sa > sb || (sa === sb && labelOf(a) < labelOf(b));
  };
  if (size * 4 > n) {
    // Most of the items are kept anyway: one sort.
    const order = Array.from({ length: n }, (_, j) => j);
    order.sort((a, b) => (scores[b] as number) - (scores[a] as number) || labelOf(a) - labelOf(b));
    return order.slice(0, size);
  }
  const top: number[] = [];
  for (let j = 0; j < n; j++) {
    if (top.length === size && !before(j, top[size - 1] as number)) continue;
    // Insert j in order (binary search for the first item it goes before).
    let lo = 0;
    let hi = top.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (before(top[mid] as number, j)) lo = mid + 1;
      else hi = mid;
    }
    top.splice(lo, 0, j);
    if (top.length > size) top.pop();
  }
  return top;
};
