/**
 * The HNSW store's filtered exact path (contiguous vector blocks) against a brute-force reference
 * computed in double precision from the raw vectors, on a seeded random set with filters; after
 * upserts that replace vectors, deletes and a reopen (index read back from its file).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { VectorBlock } from "../../services/core/adapters/hnsw/vector-block.ts";
import { HnswVectorStore } from "../../services/core/adapters/hnsw/vector-store.ts";
import type { VectorFilter, VectorItem, VectorPayload } from "../../services/core/ports.ts";
import type { RecordType } from "../../services/core/types.ts";
import { compileFilter } from "../../services/core/vector-filter.ts";
import { seededRandom } from "../helpers/seeded.ts";

const DIM = 48;
const TENANT = "t";
const TYPES: RecordType[] = ["fact", "event", "preference", "plan"];
const CONVS = ["c0", "c1", "c2", "c3"];
const PEOPLE = ["Ann", "Bo", "Cy", "Dee", "Eli"];

const randomVector = (rnd: () => number): Float32Array => {
  const v = new Float32Array(DIM);
  for (let i = 0; i < DIM; i++) v[i] = rnd() * 2 - 1;
  return v;
};

const makeItems = (n: number, rnd: () => number, offset = 0): VectorItem[] =>
  Array.from({ length: n }, (_, i) => {
    const kind = rnd() < 0.3 ? "turn" : "record";
    const payload: VectorPayload = {
      tenant: TENANT,
      conversation: CONVS[Math.floor(rnd() * CONVS.length)] as string,
      kind,
      time: Math.floor(rnd() * 1000),
      ...(kind === "record"
        ? {
            type: TYPES[Math.floor(rnd() * TYPES.length)] as RecordType,
            entities: PEOPLE.filter(() => rnd() < 0.3),
          }
        : {}),
    };
    return { id: `v${i + offset}`, vector: randomVector(rnd), payload };
  });

const cosine = (a: Float32Array, b: Float32Array): number => {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += (a[i] as number) * (b[i] as number);
    aa += (a[i] as number) ** 2;
    bb += (b[i] as number) ** 2;
  }
  return ab / Math.sqrt(aa * bb);
};

const reference = (
  live: Map<string, VectorItem>,
  q: Float32Array,
  k: number,
  filter: VectorFilter,
): { id: string; score: number }[] => {
  const pred = compileFilter(filter) ?? (() => true);
  return [...live.values()]
    .filter((it) => pred(it.payload))
    .map((it) => ({ id: it.id, score: cosine(it.vector, q) }))
    .sort((a, b) => b.score - a.score)
    .slice(0, k);
};

const FILTERS: VectorFilter[] = [
  { conversation: "c1" },
  { kind: "turn" },
  { conversation: "c2", kind: "record" },
  { kind: "record", types: ["event", "plan"] },
  { conversation: "c0", timeFrom: 200, timeTo: 700 },
  { entities: ["ann", "DEE"] },
  { kind: "record", entities: ["Cy", "eli"] },
  { conversation: "missing" },
  { conversation: "c3", kind: "record", types: ["fact"], entities: ["Bo"], timeFrom: 100 },
];

const assertSame = async (store: HnswVectorStore, live: Map<string, VectorItem>, rnd: () => number): Promise<void> => {
  for (let round = 0; round < 10; round++) {
    const q = randomVector(rnd);
    for (const filter of FILTERS) {
      for (const k of [1, 7, 40]) {
        const got = await store.search(TENANT, q, k, filter);
        const want = reference(live, q, k, filter);
        assert.deepEqual(
          got.map((h) => h.id),
          want.map((h) => h.id),
          `ids, filter ${JSON.stringify(filter)}, k ${k}`,
        );
        got.forEach((h, i) => {
          assert.ok(Math.abs(h.score - (want[i]?.score ?? Number.NaN)) < 1e-5, `score of ${h.id}`);
          assert.deepEqual(h.payload, live.get(h.id)?.payload);
        });
      }
    }
  }
};

describe("HnswVectorStore filtered exact path", () => {
  it("equals a brute-force reference, with filters, after replacements, deletes and a reopen", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hnsw-exact-"));
    const rnd = seededRandom(18);
    // bruteForceLimit above the set: every filtered search takes the exact path.
    let store = HnswVectorStore.open(dir, { bruteForceLimit: 10_000 });
    try {
      const live = new Map<string, VectorItem>();
      const first = makeItems(1500, rnd);
      await store.upsert(TENANT, first);
      for (const it of first) live.set(it.id, it);
      await assertSame(store, live, rnd);

      // Replace some vectors (and payloads), delete others.
      const replaced = makeItems(200, rnd).map((it, i) => ({ ...it, id: `v${i * 5}` }));
      await store.upsert(TENANT, replaced);
      for (const it of replaced) live.set(it.id, it);
      const gone = [...live.keys()].filter((_, i) => i % 7 === 3);
      await store.delete(TENANT, gone);
      for (const id of gone) live.delete(id);
      await assertSame(store, live, rnd);

      await store.close();
      store = HnswVectorStore.open(dir, { bruteForceLimit: 10_000 });
      await assertSame(store, live, rnd);
      assert.equal(store.rebuilds, 0, "the index came back from its file");
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a removed vector leaves no copy in the block", () => {
    const block = new VectorBlock(4, 2);
    const p = (conversation: string): VectorPayload => ({ tenant: TENANT, conversation, kind: "record" });
    block.put(1, new Float32Array([1, 0, 0, 0]), p("a"));
    block.put(2, new Float32Array([0, 3, 0, 0]), p("b"));
    block.put(3, new Float32Array([0, 0, 5, 5]), p("a"));
    block.remove(1);
    block.remove(3);
    assert.equal(block.count, 1);
    const q = Float64Array.from([0, 1, 0, 0]);
    assert.deepEqual(
      block.topK(
        q,
        block.admissible({ conversation: "b" }, () => true),
        5,
      ),
      [{ label: 2, score: 1 }],
    );
    assert.equal(block.admissible({ conversation: "a" }, () => true).length, 0);
    // The internal buffers hold only the live vector (as stored) and its inverse norm: every
    // other float is zero.
    const { data, inverse } = block as unknown as { data: Float32Array; inverse: Float32Array };
    assert.deepEqual(
      [...data].filter((x) => x !== 0),
      [3],
    );
    assert.deepEqual(
      [...inverse].filter((x) => x !== 0),
      [Math.fround(1 / 3)],
    );
    assert.deepEqual(block.vectorOf(2), new Float32Array([0, 3, 0, 0]));
    assert.equal(block.vectorOf(1), undefined);
  });
});

describe("VectorBlock candidate sources", () => {
  it("admit exactly what the filter admits, after replacements and removals, reading only a posting list", () => {
    const rnd = seededRandom(1818);
    const block = new VectorBlock(DIM, 4);
    const live = new Map<number, VectorItem>();
    const items = makeItems(600, rnd);
    items.forEach((it, label) => {
      block.put(label, it.vector, it.payload);
      live.set(label, it);
    });
    // Replace payloads (kind, conversation and entities change), remove others.
    for (const [i, it] of makeItems(120, rnd).entries()) {
      block.put(i * 3, it.vector, it.payload);
      live.set(i * 3, it);
    }
    for (let label = 1; label < 600; label += 7) {
      block.remove(label);
      live.delete(label);
    }
    for (const filter of FILTERS) {
      const pred = compileFilter(filter) ?? (() => true);
      const want = [...live].filter(([, it]) => pred(it.payload)).map(([label]) => label);
      const source = block.source(filter);
      const got = [...block.admissibleFrom(source, pred)].map((s) => block.labelAt(s));
      assert.deepEqual(
        got.sort((a, b) => a - b),
        want.sort((a, b) => a - b),
        `filter ${JSON.stringify(filter)}`,
      );
      assert.ok(source.bound >= want.length, "the bound bounds");
      if (filter.kind !== undefined || filter.conversation !== undefined || filter.entities !== undefined) {
        assert.ok(
          source.bound < live.size || want.length === live.size,
          `a posting list, not the tenant: ${JSON.stringify(filter)}`,
        );
      }
      if (source.complete) {
        const member = VectorBlock.member(source);
        assert.deepEqual(
          [...live.keys()].filter(member).sort((a, b) => a - b),
          want,
          "a complete source's members are the admitted items",
        );
      }
    }
  });
});

describe("HnswVectorStore above the exact limit", () => {
  it("answers kind, conversation and entity filters through the filtered walk with the filter kept", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hnsw-walk-"));
    const rnd = seededRandom(81);
    const store = HnswVectorStore.open(dir, { bruteForceLimit: 20 });
    try {
      const items = makeItems(1200, rnd);
      await store.upsert(TENANT, items);
      const live = new Map(items.map((it) => [it.id, it]));
      let agree = 0;
      let total = 0;
      for (let round = 0; round < 10; round++) {
        const q = randomVector(rnd);
        for (const filter of FILTERS) {
          const got = await store.search(TENANT, q, 10, filter);
          const want = reference(live, q, 10, filter);
          const pred = compileFilter(filter) ?? (() => true);
          assert.ok(
            got.every((h) => pred(h.payload)),
            `every hit admitted, filter ${JSON.stringify(filter)}`,
          );
          const wantIds = new Set(want.map((h) => h.id));
          agree += got.filter((h) => wantIds.has(h.id)).length;
          total += want.length;
        }
      }
      // Approximate, but close to exact search on this set (recall@10).
      assert.ok(agree / total >= 0.9, `recall@10 ${agree / total}`);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
