/**
 * VectorBlock.filler (a tenant's load) leaves the block as a put() of each item in order would:
 * the same inverse norms bit for bit (inverseNorms, four vectors at a time), the same posting
 * lists (memoised keys, entity names deduplicated after normalisation) and the same vectors,
 * payloads and search results; a label given twice is replaced as put() replaces it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { inverseNorm, inverseNorms, VectorBlock } from "../../services/core/adapters/hnsw/vector-block.ts";
import type { VectorFilter, VectorPayload } from "../../services/core/ports.ts";
import { compileFilter } from "../../services/core/vector-filter.ts";
import { seededRandom } from "../helpers/seeded.ts";

describe("inverseNorms", () => {
  it("equals inverseNorm of each vector bit for bit, for any range", () => {
    const rnd = seededRandom(7);
    for (const dim of [1, 3, 384]) {
      const items = 23;
      const data = Float32Array.from({ length: items * dim }, () => (rnd() * 2 - 1) * (rnd() < 0.2 ? 40 : 1));
      for (const [from, to] of [
        [0, 0],
        [0, 1],
        [0, 4],
        [2, 9],
        [5, 23],
        [0, 23],
      ] as const) {
        const out = new Float32Array(items);
        inverseNorms(data, dim, from, to, out);
        for (let j = 0; j < items; j++) {
          const want = j >= from && j < to ? inverseNorm(data, j * dim, dim) : 0;
          assert.ok(Object.is(out[j], want), `dim ${dim}, [${from}, ${to}), item ${j}`);
        }
      }
    }
  });
});

describe("VectorBlock.filler", () => {
  it("gives the state of a put of each item in order", () => {
    const rnd = seededRandom(11);
    const dim = 8;
    const names = ["Caroline", "caroline", " CAROLINE ", "Melanie", "LGBTQ", "ﬁsh", "Fish"];
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
    const items = Array.from({ length: 41 }, (_, i) => {
      const entities = Array.from({ length: Math.floor(rnd() * 4) }, () => pick(names));
      const payload: VectorPayload = {
        tenant: "t",
        conversation: pick(["c1", "c2", "c3"]),
        kind: pick(["record", "turn"] as const),
        ...(rnd() < 0.5 ? { type: pick(["event", "fact"] as const) } : {}),
        ...(entities.length > 0 || rnd() < 0.5 ? { entities } : {}),
      };
      // Label 7 twice: the later item replaces the first.
      const label = i === 30 ? 7 : i;
      return { label, vector: Float32Array.from({ length: dim }, () => rnd() * 2 - 1), payload };
    });
    const one = new VectorBlock(dim, 4);
    for (const it of items) one.put(it.label, it.vector, it.payload);
    const all = new VectorBlock(dim, 4);
    all.put(100, items[0]?.vector as Float32Array, { tenant: "t", conversation: "c9", kind: "turn" });
    all.remove(100);
    const fill = all.filler();
    for (const it of items) fill.put(it.label, it.vector, it.payload);
    fill.done();
    assert.equal(all.count, one.count);
    for (const it of items) {
      assert.deepEqual(all.vectorOf(it.label), one.vectorOf(it.label));
      assert.equal(all.payloadOf(it.label), one.payloadOf(it.label));
      assert.equal(all.slotOfLabel(it.label), one.slotOfLabel(it.label));
    }
    const filters: (VectorFilter | undefined)[] = [
      undefined,
      { kind: "record" },
      { conversation: "c2" },
      { kind: "turn", conversation: "c1" },
      { entities: ["caroline"] },
      { kind: "record", entities: ["fish", "melanie"] },
      { entities: ["lgbtq"], types: ["event"] },
    ];
    const query = Float64Array.from({ length: dim }, () => rnd() * 2 - 1);
    for (const f of filters) {
      const predicate = compileFilter(f) ?? (() => true);
      const a = all.admissible(f, predicate);
      const b = one.admissible(f, predicate);
      assert.deepEqual([...a], [...b], JSON.stringify(f));
      assert.deepEqual(all.topK(query, a, 10), one.topK(query, b, 10), JSON.stringify(f));
    }
  });
});
