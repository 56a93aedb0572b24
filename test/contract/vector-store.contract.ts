/**
 * Contract suite every VectorStore implementation must pass. Vectors are deterministic (seeded PRNG),
 * so a failure reproduces exactly.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { VectorItem, VectorKind, VectorPayload, VectorQuery, VectorStore } from "../../services/core/ports.ts";
import type { RecordType } from "../../services/core/types.ts";
import { seededRandom } from "../helpers/seeded.ts";

export interface VectorStoreFixture {
  store: VectorStore;
  /** Closes the store and opens a new one over the same storage (persistence check). */
  reopen?: () => Promise<VectorStore>;
  cleanup: () => Promise<void>;
}

export interface VectorStoreContractOptions {
  /** A reason to skip the whole suite, or false/undefined to run it. */
  skip?: string | false;
}

/** The seeded PRNG shared by the tests (mulberry32). */
export const mulberry32 = seededRandom;

export const DIM = 16;

/** A unit vector with components in [-1, 1) from the PRNG. */
export const randomUnit = (rand: () => number, dim = DIM): Float32Array => {
  const v = new Float32Array(dim);
  let s = 0;
  for (let i = 0; i < dim; i++) {
    const x = rand() * 2 - 1;
    v[i] = x;
    s += x * x;
  }
  const n = Math.sqrt(s) || 1;
  for (let i = 0; i < dim; i++) v[i] = (v[i] as number) / n;
  return v;
};

/** A unit vector close to `base` (cosine about 0.99 for small eps). */
export const near = (base: Float32Array, rand: () => number, eps = 0.05): Float32Array => {
  const noise = randomUnit(rand, base.length);
  const v = new Float32Array(base.length);
  for (let i = 0; i < v.length; i++) v[i] = (base[i] as number) + eps * (noise[i] as number);
  const n = Math.hypot(...v);
  for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) / n;
  return v;
};

const cos = (a: Float32Array, b: Float32Array): number => {
  let d = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    d += (a[i] as number) * (b[i] as number);
    na += (a[i] as number) ** 2;
    nb += (b[i] as number) ** 2;
  }
  return d / Math.sqrt(na * nb);
};

const T0 = Date.UTC(2024, 0, 1);
const DAY = 86_400_000;
const TYPES: RecordType[] = ["fact", "event", "preference", "plan"];
const ENTITIES = ["Caroline", "Melanie", "Paris", "Acme"];

interface Spec {
  tenant: string;
  i: number;
  conversation?: string;
  kind?: VectorKind;
  vector?: Float32Array;
}

/** Item i of a tenant: conversation c{i%2}, kind turn for every 5th, type/entity cycling, time T0 + i days. */
const item = (rand: () => number, s: Spec): VectorItem => {
  const payload: VectorPayload = {
    tenant: s.tenant,
    conversation: s.conversation ?? `c${s.i % 2}`,
    kind: s.kind ?? (s.i % 5 === 4 ? "turn" : "record"),
    type: TYPES[s.i % TYPES.length] as RecordType,
    time: T0 + s.i * DAY,
    entities: [ENTITIES[s.i % ENTITIES.length] as string],
  };
  return { id: `item-${s.i}`, vector: s.vector ?? randomUnit(rand), payload };
};

const ids = (hits: readonly { id: string }[]): string[] => hits.map((h) => h.id);

export const runVectorStoreContract = (
  name: string,
  make: () => Promise<VectorStoreFixture>,
  opts: VectorStoreContractOptions = {},
): void => {
  const skip = opts.skip || false;
  describe(`VectorStore contract: ${name}`, { skip }, () => {
    let fx: VectorStoreFixture;
    let store: VectorStore;
    const A = "tenant-a";
    const B = "tenant-b";
    const N = 40;
    const rand = mulberry32(42);
    const itemsA = Array.from({ length: N }, (_, i) => item(rand, { tenant: A, i }));

    before(async () => {
      fx = await make();
      store = fx.store;
      await store.upsert(A, itemsA);
    });

    after(async () => {
      await fx?.cleanup();
    });

    it("counts what was written", async () => {
      assert.equal(await store.count(A), N);
      assert.equal(await store.count("nobody"), 0);
    });

    it("returns the nearest first, with scores", async () => {
      const target = itemsA[7] as VectorItem;
      const hits = await store.search(A, near(target.vector, mulberry32(7), 0.01), 5);
      assert.equal(hits.length, 5);
      assert.equal(hits[0]?.id, target.id);
      assert.ok((hits[0]?.score ?? 0) > 0.95, `top score ${hits[0]?.score}`);
      for (let i = 1; i < hits.length; i++) assert.ok((hits[i - 1]?.score ?? 0) >= (hits[i]?.score ?? 0));
      // Scores are cosine similarities: compare with the exact values.
      for (const h of hits) {
        const v = itemsA.find((x) => x.id === h.id)?.vector as Float32Array;
        assert.ok(Math.abs(h.score - cos(v, near(target.vector, mulberry32(7), 0.01))) < 1e-3);
      }
      assert.deepEqual(hits[0]?.payload, target.payload);
    });

    it("returns the exact k nearest (small set: exact ranking)", async () => {
      const q = randomUnit(mulberry32(99));
      const expected = [...itemsA]
        .map((x) => ({ id: x.id, s: cos(x.vector, q) }))
        .sort((a, b) => b.s - a.s)
        .slice(0, 3)
        .map((x) => x.id);
      assert.deepEqual(ids(await store.search(A, q, 3)), expected);
    });

    it("returns at most the number of items when k is larger, and nothing for k = 0", async () => {
      const q = randomUnit(mulberry32(5));
      assert.equal((await store.search(A, q, 1000)).length, N);
      assert.deepEqual(await store.search(A, q, 0), []);
    });

    it("filters by conversation", async () => {
      const hits = await store.search(A, randomUnit(mulberry32(1)), N, { conversation: "c1" });
      assert.equal(hits.length, N / 2);
      assert.ok(hits.every((h) => h.payload.conversation === "c1"));
    });

    it("filters by kind", async () => {
      const hits = await store.search(A, randomUnit(mulberry32(2)), N, { kind: "turn" });
      assert.equal(hits.length, N / 5);
      assert.ok(hits.every((h) => h.payload.kind === "turn"));
    });

    it("filters by types", async () => {
      const hits = await store.search(A, randomUnit(mulberry32(3)), N, { types: ["fact", "plan"] });
      assert.equal(hits.length, N / 2);
      assert.ok(hits.every((h) => h.payload.type === "fact" || h.payload.type === "plan"));
    });

    it("filters by time range (inclusive)", async () => {
      const hits = await store.search(A, randomUnit(mulberry32(4)), N, {
        timeFrom: T0 + 10 * DAY,
        timeTo: T0 + 14 * DAY,
      });
      assert.deepEqual(ids(hits).sort(), ["item-10", "item-11", "item-12", "item-13", "item-14"]);
      const open = await store.search(A, randomUnit(mulberry32(4)), N, { timeFrom: T0 + 35 * DAY });
      assert.equal(open.length, 5);
    });

    it("filters by entities, case-insensitively", async () => {
      const hits = await store.search(A, randomUnit(mulberry32(6)), N, { entities: ["paris", "ACME"] });
      assert.equal(hits.length, N / 2);
      assert.ok(hits.every((h) => ["Paris", "Acme"].includes(h.payload.entities?.[0] ?? "")));
    });

    it("combines filters and ranks within them", async () => {
      const target = itemsA[12] as VectorItem; // c0, record, fact, Caroline
      const hits = await store.search(A, target.vector, 3, { conversation: "c0", kind: "record", types: ["fact"] });
      assert.equal(hits[0]?.id, target.id);
      assert.ok(
        hits.every((h) => h.payload.conversation === "c0" && h.payload.kind === "record" && h.payload.type === "fact"),
      );
      assert.deepEqual(await store.search(A, target.vector, 3, { conversation: "nowhere" }), []);
    });

    it("answers a batch of searches (searchMany) as search() answers each one", async (t) => {
      const many = store.searchMany?.bind(store);
      if (!many) {
        t.skip("the store has no searchMany");
        return;
      }
      const qs = [11, 12, 13, 14].map((s) => randomUnit(mulberry32(s)));
      const batches: VectorQuery[][] = [
        // One kind for all (the candidate lookups' shape: one scan may serve them all).
        qs.flatMap((vector, i) => [
          { vector, k: 5 + i, filter: { kind: "record" as const } },
          { vector, k: 3, filter: { kind: "record" as const, entities: ["paris"] } },
        ]),
        // Mixed filters, k = 0, a k larger than the set, an empty filtered set, no filter.
        [
          { vector: qs[0] as Float32Array, k: 4, filter: { conversation: "c1", types: ["fact", "plan"] } },
          { vector: qs[1] as Float32Array, k: 0 },
          { vector: qs[2] as Float32Array, k: 1000, filter: { kind: "turn" } },
          { vector: qs[3] as Float32Array, k: 3, filter: { conversation: "nowhere" } },
          { vector: qs[0] as Float32Array, k: 6, filter: { timeFrom: T0 + 10 * DAY, timeTo: T0 + 30 * DAY } },
          { vector: qs[1] as Float32Array, k: 7 },
        ],
      ];
      for (const batch of batches) {
        const expected = await Promise.all(batch.map((q) => store.search(A, q.vector, q.k, q.filter)));
        assert.deepEqual(await many(A, batch), expected);
      }
      assert.deepEqual(await many(A, []), []);
      assert.deepEqual(await many("nobody", [{ vector: qs[0] as Float32Array, k: 3 }]), [[]]);
    });

    it("gets items by id in the order asked, skipping unknown ids", async () => {
      const got = await store.get(A, ["item-3", "missing", "item-1"]);
      assert.deepEqual(ids(got), ["item-3", "item-1"]);
      const v = got[0]?.vector as Float32Array;
      assert.equal(v.length, DIM);
      assert.ok(cos(v, itemsA[3]?.vector as Float32Array) > 0.9999);
      assert.deepEqual(got[0]?.payload, itemsA[3]?.payload);
    });

    it("gets the vectors alone (getVectors) as get() gets them, unknown ids and other tenants' absent", async (t) => {
      const vectorsOf = store.getVectors?.bind(store);
      if (!vectorsOf) {
        t.skip("the store has no getVectors");
        return;
      }
      const asked = ["item-3", "missing", "item-1", "item-3", ...itemsA.map((x) => x.id)];
      const got = await vectorsOf(A, asked);
      const expected = new Map((await store.get(A, asked)).map((x) => [x.id, x.vector]));
      assert.deepEqual([...got.keys()].sort(), [...expected.keys()].sort());
      for (const [id, v] of expected) assert.deepEqual(got.get(id), v, id);
      assert.equal((await vectorsOf("nobody", ["item-1"])).size, 0);
      assert.equal((await vectorsOf(A, [])).size, 0);
    });

    it("replaces an item on upsert of the same id", async () => {
      const fresh = randomUnit(mulberry32(1234));
      const replaced: VectorItem = {
        id: "item-0",
        vector: fresh,
        payload: { ...(itemsA[0] as VectorItem).payload, conversation: "c9", entities: ["Zed"] },
      };
      await store.upsert(A, [replaced]);
      assert.equal(await store.count(A), N);
      const hits = await store.search(A, fresh, 1);
      assert.equal(hits[0]?.id, "item-0");
      assert.ok((hits[0]?.score ?? 0) > 0.999);
      assert.equal(hits[0]?.payload.conversation, "c9");
      const [got] = await store.get(A, ["item-0"]);
      assert.ok(cos(got?.vector as Float32Array, fresh) > 0.9999);
      assert.deepEqual(
        (await store.search(A, fresh, N, { entities: ["zed"] })).map((h) => h.id),
        ["item-0"],
      );
      // The old vector no longer finds it first.
      const old = await store.search(A, (itemsA[0] as VectorItem).vector, N);
      const stale = old.find((h) => h.id === "item-0");
      assert.ok(!stale || stale.score < 0.99, `item-0 still scores ${stale?.score} for its old vector`);
    });

    it("deletes items", async () => {
      await store.delete(A, ["item-5", "item-6", "not-there"]);
      assert.equal(await store.count(A), N - 2);
      assert.deepEqual(await store.get(A, ["item-5", "item-6"]), []);
      const hits = await store.search(A, (itemsA[5] as VectorItem).vector, N);
      assert.ok(!ids(hits).includes("item-5") && !ids(hits).includes("item-6"));
      // A deleted id can be written again.
      await store.upsert(A, [itemsA[5] as VectorItem]);
      assert.equal(await store.count(A), N - 1);
      assert.equal((await store.search(A, (itemsA[5] as VectorItem).vector, 1))[0]?.id, "item-5");
    });

    it("isolates tenants: same ids, no cross-tenant reads, deleteTenant removes only that tenant", async () => {
      const randB = mulberry32(777);
      // Tenant B uses the same ids; its item-7 sits exactly where A's item-7 is.
      const itemsB = Array.from({ length: 10 }, (_, i) =>
        item(randB, { tenant: B, i, vector: i === 7 ? (itemsA[7] as VectorItem).vector : undefined }),
      );
      await store.upsert(B, itemsB);
      assert.equal(await store.count(B), 10);
      const countA = await store.count(A);

      const q = (itemsA[7] as VectorItem).vector;
      const hitsB = await store.search(B, q, 100);
      assert.equal(hitsB.length, 10);
      assert.ok(hitsB.every((h) => h.payload.tenant === B));
      const hitsA = await store.search(A, q, 100);
      assert.ok(hitsA.every((h) => h.payload.tenant === A));
      assert.equal(hitsA.length, countA);

      const gotB = await store.get(B, ["item-8", "item-20"]);
      assert.deepEqual(ids(gotB), ["item-8"]);
      assert.equal(gotB[0]?.payload.tenant, B);
      assert.ok(cos(gotB[0]?.vector as Float32Array, itemsB[8]?.vector as Float32Array) > 0.9999);

      // Deleting in B leaves A's item of the same id.
      await store.delete(B, ["item-1"]);
      assert.equal((await store.get(A, ["item-1"])).length, 1);

      await store.deleteTenant(B);
      assert.equal(await store.count(B), 0);
      assert.deepEqual(await store.search(B, q, 10), []);
      assert.deepEqual(await store.get(B, ["item-8"]), []);
      assert.equal(await store.count(A), countA);
      assert.equal((await store.search(A, q, 1))[0]?.id, "item-7");

      // A tenant with no data at all.
      assert.deepEqual(await store.search("nobody", q, 5), []);
    });

    it("deletes raw turns alone (deleteRawTurns): of a conversation, then of the tenant, no other tenant's", async () => {
      const C = "tenant-c";
      const D = "tenant-d";
      const randC = mulberry32(4242);
      // Items 4, 9, 14, 19 are turns: 4 and 14 in c0, 9 and 19 in c1.
      await store.upsert(
        C,
        Array.from({ length: 20 }, (_, i) => item(randC, { tenant: C, i })),
      );
      await store.upsert(
        D,
        Array.from({ length: 10 }, (_, i) => item(randC, { tenant: D, i })),
      );
      const countA = await store.count(A);
      const q = randomUnit(mulberry32(17));

      assert.equal(await store.deleteRawTurns(C, "c0"), 2);
      assert.equal(await store.count(C), 18);
      assert.deepEqual(await store.get(C, ["item-4", "item-14"]), []);
      assert.deepEqual(ids(await store.get(C, ["item-9", "item-19", "item-0", "item-1"])), [
        "item-9",
        "item-19",
        "item-0",
        "item-1",
      ]);

      assert.equal(await store.deleteRawTurns(C), 2);
      assert.deepEqual(await store.search(C, q, 20, { kind: "turn" }), []);
      const left = await store.search(C, q, 20);
      assert.equal(left.length, 16, "every record stays");
      assert.ok(left.every((h) => h.payload.kind === "record"));
      assert.equal(await store.deleteRawTurns(C), 0, "nothing left to delete");

      assert.equal(await store.count(D), 10, "another tenant's turns stay");
      assert.equal((await store.search(D, q, 10, { kind: "turn" })).length, 2);
      assert.equal(await store.count(A), countA);
      await store.deleteTenant(C);
      await store.deleteTenant(D);
    });

    it("keeps a second-opinion vector beside an item, read by id, gone with the item on every delete", async (t) => {
      const secondOf = store.getSecondVectors?.bind(store);
      if (!secondOf) {
        t.skip("the store keeps no second-opinion vectors");
        return;
      }
      const E = "tenant-e";
      const F = "tenant-f";
      const randE = mulberry32(5151);
      // Another dimension than the first vectors: the second model need not match the first.
      const SECOND_DIM = DIM + 8;
      // Items 4 and 14 are turns of c0, 9 and 19 turns of c1; 0-19 records and turns in c0/c1.
      const withSecond = (tenant: string, i: number): VectorItem => ({
        ...item(randE, { tenant, i }),
        second: randomUnit(randE, SECOND_DIM),
      });
      const itemsE = Array.from({ length: 20 }, (_, i) => withSecond(E, i));
      await store.upsert(E, itemsE);
      // Same ids in another tenant, with other second vectors.
      const itemsF = Array.from({ length: 5 }, (_, i) => withSecond(F, i));
      await store.upsert(F, itemsF);

      const got = await secondOf(E, ["item-3", "missing", "item-3", "item-4"]);
      assert.deepEqual([...got.keys()].sort(), ["item-3", "item-4"]);
      assert.ok(cos(got.get("item-3") as Float32Array, itemsE[3]?.second as Float32Array) > 0.9999);
      assert.equal((got.get("item-4") as Float32Array).length, SECOND_DIM);
      const [viaGet] = await store.get(E, ["item-3"]);
      assert.ok(cos(viaGet?.second as Float32Array, itemsE[3]?.second as Float32Array) > 0.9999);
      // Tenant isolation: F's item-3 is F's own, an unknown tenant has none.
      assert.ok(
        cos((await secondOf(F, ["item-3"])).get("item-3") as Float32Array, itemsF[3]?.second as Float32Array) > 0.9999,
      );
      assert.equal((await secondOf("nobody", ["item-3"])).size, 0);
      // The first vector and the search are untouched by the second.
      assert.equal((await store.search(E, (itemsE[2] as VectorItem).vector, 1))[0]?.id, "item-2");

      // An upsert without one replaces the item whole: no stale second vector stays.
      const { second: _dropped, ...plain } = itemsE[1] as VectorItem;
      await store.upsert(E, [plain]);
      assert.equal((await secondOf(E, ["item-1"])).size, 0);
      assert.equal((await store.get(E, ["item-1"]))[0]?.second, undefined);

      // Every delete takes the second vector with its item.
      await store.delete(E, ["item-2"]);
      await store.deleteRawTurns(E, "c0");
      assert.deepEqual([...(await secondOf(E, ["item-2", "item-4", "item-14", "item-9"])).keys()], ["item-9"]);
      await store.deleteConversation?.(E, "c1");
      assert.equal((await secondOf(E, ["item-9", "item-3", "item-5"])).size, 0);
      await store.deleteTenant(E);
      assert.equal(
        (
          await secondOf(
            E,
            itemsE.map((x) => x.id),
          )
        ).size,
        0,
      );
      assert.equal(
        (
          await secondOf(
            F,
            itemsF.map((x) => x.id),
          )
        ).size,
        5,
        "another tenant's stay",
      );
      await store.deleteTenant(F);
    });

    it("lists the items without a second-opinion vector a page at a time and sets theirs in place", async (t) => {
      const without = store.idsWithoutSecond?.bind(store);
      const setSecond = store.setSecondVectors?.bind(store);
      if (!without || !setSecond) {
        t.skip("the store keeps no second-opinion vectors");
        return;
      }
      const G = "tenant-g";
      const H = "tenant-g/eu";
      const rand = mulberry32(6262);
      const SECOND_DIM = DIM + 8;
      // Even items of G carry a second vector, odd ones do not; H has the same ids, none with one.
      const itemsG = Array.from({ length: 12 }, (_, i) => {
        const it = item(rand, { tenant: G, i });
        return i % 2 === 0 ? { ...it, second: randomUnit(rand, SECOND_DIM) } : it;
      });
      await store.upsert(G, itemsG);
      await store.upsert(
        H,
        Array.from({ length: 3 }, (_, i) => item(rand, { tenant: H, i })),
      );
      const odd = itemsG.filter((_, i) => i % 2 === 1).map((x) => x.id);
      // Pages along the store's id order, each after the last id of the one before.
      const walked: string[] = [];
      let after: string | undefined;
      for (let page = 0; page < 10; page++) {
        const ids = await without(G, after, 4);
        assert.ok(ids.length <= 4);
        walked.push(...ids);
        if (ids.length < 4) break;
        after = ids[ids.length - 1];
      }
      assert.deepEqual([...walked].sort(), [...odd].sort(), "the odd items, each once");
      assert.equal(new Set(walked).size, walked.length);

      // Set in place: the first vector, the payload and the search stay; a deleted id is not written back.
      const seconds = new Map(odd.map((id) => [id, randomUnit(rand, SECOND_DIM)] as const));
      await store.delete(G, ["item-11"]);
      assert.equal(await setSecond(G, seconds), odd.length - 1, "every odd item but the deleted one");
      assert.equal((await store.get(G, ["item-11"])).length, 0, "the deleted item stays deleted");
      assert.equal(await store.count(G), 11);
      const [three] = await store.get(G, ["item-3"]);
      assert.ok(cos(three?.second as Float32Array, seconds.get("item-3") as Float32Array) > 0.9999);
      assert.ok(cos(three?.vector as Float32Array, itemsG[3]?.vector as Float32Array) > 0.9999);
      assert.deepEqual(three?.payload, itemsG[3]?.payload);
      assert.equal((await store.search(G, (itemsG[3] as VectorItem).vector, 1))[0]?.id, "item-3");
      assert.deepEqual(await without(G, undefined, 100), []);
      // Tenant isolation: H's items of the same ids were not set, and a setter of H touches only H.
      assert.equal((await without(H, undefined, 100)).length, 3);
      assert.equal(await setSecond(H, new Map([["item-5", randomUnit(rand, SECOND_DIM)]])), 0, "H has no item-5");
      assert.equal((await store.get(G, ["item-5"]))[0]?.second?.length, SECOND_DIM);

      // The tenants by prefix, a name with a separator included, the deleted ones not.
      if (store.tenantsNamed) {
        assert.deepEqual(await store.tenantsNamed("tenant-g"), [G, H]);
        await store.deleteTenant(H);
        assert.deepEqual(await store.tenantsNamed("tenant-g"), [G]);
        assert.ok((await store.tenantsNamed("")).includes(G));
      }
      await store.deleteTenant(G);
      await store.deleteTenant(H);
      assert.deepEqual(await without(G, undefined, 100), []);
    });

    it("refuses an item whose payload names another tenant", async () => {
      const wrong = item(mulberry32(3), { tenant: B, i: 1 });
      await assert.rejects(store.upsert(A, [wrong]));
      assert.equal((await store.get(A, ["item-1"]))[0]?.payload.tenant, A);
    });

    it("keeps everything across a reopen", async (t) => {
      if (!fx.reopen) {
        t.skip("the fixture has no reopen");
        return;
      }
      await store.flush();
      const before = await store.count(A);
      const q = randomUnit(mulberry32(31));
      const expected = await store.search(A, q, 5, { conversation: "c0" });
      store = await fx.reopen();
      assert.equal(await store.count(A), before);
      assert.deepEqual(ids(await store.search(A, q, 5, { conversation: "c0" })), ids(expected));
      assert.deepEqual(ids(await store.get(A, ["item-0", "item-9"])), ["item-0", "item-9"]);
      // Still writable after the reopen.
      const extra = item(mulberry32(8), { tenant: A, i: 100 });
      await store.upsert(A, [extra]);
      assert.equal((await store.search(A, extra.vector, 1))[0]?.id, "item-100");
    });

    it("rejects a vector of another dimension with a clear error", async () => {
      await assert.rejects(
        store.upsert(A, [item(mulberry32(9), { tenant: A, i: 200, vector: new Float32Array(DIM + 3).fill(0.1) })]),
        /dimension/,
      );
      await assert.rejects(store.search(A, new Float32Array(DIM - 1).fill(0.1), 3), /dimension/);
    });
  });
};
