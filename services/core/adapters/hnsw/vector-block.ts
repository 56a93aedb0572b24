/**
 * A tenant's live vectors in one contiguous Float32Array (unit length, as hnswlib's cosine space
 * stores them), with parallel label, kind and conversation arrays, so that a filtered exact search
 * scores every admissible vector in one pass over memory instead of copying each out of hnswlib
 * (getPoint allocates a fresh JS array per vector).
 *
 * Removal moves the last slot into the freed one and zeroes the last slot: a deleted vector does not
 * stay in this block's memory (erasure, docs/erasure.md). A grown block zeroes the buffer it leaves.
 */
import type { VectorFilter, VectorKind, VectorPayload } from "../../ports.ts";
import type { PayloadPredicate } from "../../vector-filter.ts";

const KIND_CODE: Record<VectorKind, number> = { record: 0, turn: 1 };

/**
 * hnswlib's normaliseVector in single precision (float sum, 1/(sqrtf + 1e-30), float products), so
 * that exact scores equal those computed from the index's own stored points.
 */
export const unitFloat32 = (v: Float32Array, out: Float32Array, offset: number): void => {
  const f = Math.fround;
  let norm = 0;
  for (let i = 0; i < v.length; i++) norm = f(norm + f((v[i] as number) * (v[i] as number)));
  const inv = f(1 / f(f(Math.sqrt(norm)) + 1e-30));
  for (let i = 0; i < v.length; i++) out[offset + i] = f((v[i] as number) * inv);
};

export interface ScoredLabel {
  label: number;
  score: number;
}

export class VectorBlock {
  readonly dim: number;
  private data: Float32Array;
  private labels: Int32Array;
  private kinds: Uint8Array;
  private convs: Int32Array;
  private payloads: VectorPayload[] = [];
  private readonly slotOf = new Map<number, number>();
  /** Conversation name -> small integer, so the common conversation filter is an integer compare. */
  private readonly convCode = new Map<string, number>();
  private size = 0;

  constructor(dim: number, capacity = 64) {
    this.dim = dim;
    const cap = Math.max(1, capacity);
    this.data = new Float32Array(cap * dim);
    this.labels = new Int32Array(cap);
    this.kinds = new Uint8Array(cap);
    this.convs = new Int32Array(cap);
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
    const labels = new Int32Array(cap);
    labels.set(this.labels);
    this.labels = labels;
    const kinds = new Uint8Array(cap);
    kinds.set(this.kinds);
    this.kinds = kinds;
    const convs = new Int32Array(cap);
    convs.set(this.convs);
    this.convs = convs;
  }

  private codeOf(conversation: string): number {
    let c = this.convCode.get(conversation);
    if (c === undefined) {
      c = this.convCode.size;
      this.convCode.set(conversation, c);
    }
    return c;
  }

  /** Adds or replaces the vector of a label (normalised here). */
  put(label: number, vector: Float32Array, payload: VectorPayload): void {
    if (vector.length !== this.dim) throw new Error(`VectorBlock: dimension ${vector.length}, expected ${this.dim}`);
    let slot = this.slotOf.get(label);
    if (slot === undefined) {
      if (this.size === this.labels.length) this.grow();
      slot = this.size++;
      this.slotOf.set(label, slot);
      this.labels[slot] = label;
    }
    unitFloat32(vector, this.data, slot * this.dim);
    this.kinds[slot] = KIND_CODE[payload.kind];
    this.convs[slot] = this.codeOf(payload.conversation);
    this.payloads[slot] = payload;
  }

  remove(label: number): void {
    const slot = this.slotOf.get(label);
    if (slot === undefined) return;
    this.slotOf.delete(label);
    const last = --this.size;
    const dim = this.dim;
    if (slot !== last) {
      const moved = this.labels[last] as number;
      this.data.copyWithin(slot * dim, last * dim, (last + 1) * dim);
      this.labels[slot] = moved;
      this.kinds[slot] = this.kinds[last] as number;
      this.convs[slot] = this.convs[last] as number;
      this.payloads[slot] = this.payloads[last] as VectorPayload;
      this.slotOf.set(moved, slot);
    }
    this.data.fill(0, last * dim, (last + 1) * dim);
    this.payloads.length = last;
  }

  /**
   * Slots of the live vectors the filter admits. Kind and conversation are checked on the side
   * arrays first; the full predicate runs only on what passes them.
   */
  admissible(filter: VectorFilter | undefined, predicate: PayloadPredicate): Int32Array {
    const kind = filter?.kind !== undefined ? KIND_CODE[filter.kind] : -1;
    let conv = -1;
    if (filter?.conversation !== undefined) {
      const c = this.convCode.get(filter.conversation);
      if (c === undefined) return new Int32Array(0);
      conv = c;
    }
    const out = new Int32Array(this.size);
    let n = 0;
    for (let s = 0; s < this.size; s++) {
      if (kind >= 0 && this.kinds[s] !== kind) continue;
      if (conv >= 0 && this.convs[s] !== conv) continue;
      if (predicate(this.payloads[s] as VectorPayload)) out[n++] = s;
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
    const dim = this.dim;
    const data = this.data;
    const scores = new Float64Array(slots.length);
    for (let j = 0; j < slots.length; j++) {
      const base = (slots[j] as number) * dim;
      let s = 0;
      for (let i = 0; i < dim; i++) s += (query[i] as number) * (data[base + i] as number);
      scores[j] = s;
    }
    const order = Array.from({ length: slots.length }, (_, j) => j);
    const labelOf = (j: number): number => this.labels[slots[j] as number] as number;
    order.sort((a, b) => (scores[b] as number) - (scores[a] as number) || labelOf(a) - labelOf(b));
    return order.slice(0, k).map((j) => ({ label: labelOf(j), score: scores[j] as number }));
  }
}
