/**
 * Bounded residency of the HNSW store's tenant indexes (issue 18): with caps smaller than the data,
 * the least recently used indexes are written to their files and dropped, and answers stay those
 * of a store that keeps everything in memory.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { HnswVectorStore, type HnswVectorStoreOptions } from "../../services/core/adapters/hnsw/vector-store.ts";
import type { VectorFilter, VectorItem } from "../../services/core/ports.ts";
import { seededRandom } from "../helpers/seeded.ts";

const DIM = 16;

const unit = (rand: () => number): Float32Array => {
  const v = Float32Array.from({ length: DIM }, () => rand() * 2 - 1);
  const n = Math.hypot(...v) || 1;
  return v.map((x) => x / n);
};

const itemsOf = (tenant: string, from: number, n: number, rand: () => number): VectorItem[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `${tenant}-v${from + i}`,
    vector: unit(rand),
    payload: {
      tenant,
      conversation: `c${(from + i) % 3}`,
      kind: (from + i) % 2 === 0 ? ("record" as const) : ("turn" as const),
      time: from + i,
    },
  }));

const dirs: string[] = [];
const stores: HnswVectorStore[] = [];
after(async () => {
  for (const s of stores) await s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const freshDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), "hnsw-residency-"));
  dirs.push(dir);
  return dir;
};

const openStore = (dir: string, options: Omit<HnswVectorStoreOptions, "ownsDb"> = {}): HnswVectorStore => {
  const s = HnswVectorStore.open(dir, options);
  stores.push(s);
  return s;
};

const FILTERS: (VectorFilter | undefined)[] = [undefined, { conversation: "c1" }, { kind: "turn" }];

describe("HnswVectorStore residency caps", () => {
  it("answer searches, filtered searches and getVectors across tenants as an uncapped store does", async () => {
    const full = openStore(freshDir());
    const capped = openStore(freshDir(), { maxResidentVectors: 70 });
    const tenants = Array.from({ length: 6 }, (_, i) => `t${i}`);
    const rand = seededRandom(7);
    // Two rounds of writes per tenant, interleaved: every tenant is evicted while changed.
    for (const round of [0, 1])
      for (const tenant of tenants) {
        const batch = itemsOf(tenant, round * 20, 20, rand);
        await full.upsert(tenant, batch);
        await capped.upsert(tenant, batch);
      }
    assert.ok(capped.resident.vectors <= 70, JSON.stringify(capped.resident));
    const qr = seededRandom(8);
    for (let i = 0; i < 30; i++) {
      const tenant = tenants[Math.floor(qr() * tenants.length)] as string;
      const q = unit(qr);
      const filter = FILTERS[i % FILTERS.length];
      assert.deepEqual(await capped.search(tenant, q, 8, filter), await full.search(tenant, q, 8, filter));
      const ids = [`${tenant}-v3`, `${tenant}-v31`, "missing"];
      assert.deepEqual(await capped.getVectors(tenant, ids), await full.getVectors(tenant, ids));
      assert.ok(capped.resident.vectors <= 70);
    }
    assert.ok(capped.residency.evictions > 0 && capped.residency.evictionWrites > 0, JSON.stringify(capped.residency));
    assert.equal(capped.rebuilds, 0, "evicted indexes come back from their files");
    assert.equal(full.residency.evictions, 0, "the default caps keep every index of a small store");
  });

  it("loses nothing of a changed index it evicts: deletes and replacements come back", async () => {
    const dir = freshDir();
    const s = openStore(dir, { maxResidentTenants: 1 });
    const rand = seededRandom(11);
    await s.upsert("a", itemsOf("a", 0, 30, rand));
    await s.delete("a", ["a-v0", "a-v1"]);
    const moved = unit(rand);
    await s.upsert("a", [{ id: "a-v2", vector: moved, payload: { tenant: "a", conversation: "c9", kind: "record" } }]);
    await s.upsert("b", itemsOf("b", 0, 5, rand)); // evicts a, changed since its last write
    assert.deepEqual(s.resident, { tenants: 1, vectors: 5 });
    assert.equal(s.residency.evictionWrites, 1);
    const hits = await s.search("a", moved, 100);
    assert.equal(s.rebuilds, 0, "a was read back from the file its eviction wrote");
    assert.equal(hits.length, 28);
    assert.deepEqual(hits[0]?.id, "a-v2");
    assert.equal(hits[0]?.payload.conversation, "c9");
    assert.ok(!hits.some((h) => h.id === "a-v0" || h.id === "a-v1"));
    assert.deepEqual(
      (await s.search("a", moved, 5, { conversation: "c9" })).map((h) => h.id),
      ["a-v2"],
    );
  });

  it("leaves index files a new process reads without a rebuild (only the one never evicted is rebuilt)", async () => {
    const dir = freshDir();
    const first = openStore(dir, { maxResidentTenants: 1 });
    const rand = seededRandom(12);
    for (const tenant of ["a", "b", "c"]) await first.upsert(tenant, itemsOf(tenant, 0, 25, rand));
    // No flush, no close (as after a kill): a and b were written when evicted, c never was.
    const second = openStore(dir);
    const q = unit(seededRandom(13));
    for (const tenant of ["a", "b"]) assert.equal((await second.search(tenant, q, 5)).length, 5);
    assert.equal(second.rebuilds, 0);
    assert.equal((await second.search("c", q, 5)).length, 5);
    assert.equal(second.rebuilds, 1, "c's changes were only in memory: rebuilt from SQLite");
    assert.equal(second.residency.loads, 3);
  });

  it("keeps a tenant larger than the vector cap in memory alone, and evicts it for the next one", async () => {
    const s = openStore(freshDir(), { maxResidentVectors: 10 });
    const rand = seededRandom(14);
    const big = itemsOf("big", 0, 120, rand);
    await s.upsert("big", big.slice(0, 60));
    await s.upsert("big", big.slice(60));
    assert.deepEqual(s.resident, { tenants: 1, vectors: 120 });
    const target = big[77] as VectorItem;
    assert.equal((await s.search("big", target.vector, 1))[0]?.id, target.id);
    await s.upsert("small", itemsOf("small", 0, 4, rand));
    assert.deepEqual(s.resident, { tenants: 1, vectors: 4 });
    assert.equal((await s.search("big", target.vector, 1))[0]?.id, target.id);
    assert.deepEqual(s.resident, { tenants: 1, vectors: 120 });
    assert.equal(s.rebuilds, 0);
  });

  it("refuses a cap below 1", () => {
    const dir = freshDir();
    assert.throws(() => openStore(dir, { maxResidentVectors: 0 }), /maxResidentVectors/);
    assert.throws(() => openStore(dir, { maxResidentTenants: 2.5 }), /maxResidentTenants/);
  });

  it("serves interleaved searches, writes and deletes over many tenants with a tiny cap as an uncapped store", async () => {
    const full = openStore(freshDir());
    const capped = openStore(freshDir(), { maxResidentVectors: 40, maxResidentTenants: 2 });
    const tenants = Array.from({ length: 12 }, (_, i) => `t${i}`);
    const next = new Map(tenants.map((t) => [t, 0]));
    const rand = seededRandom(15);
    type Op = (s: HnswVectorStore) => Promise<unknown>;
    const ops: Op[] = [];
    // A seeded script of 240 operations; both stores run it, the capped one 12 at a time without
    // waiting between them, so that calls on different tenants are in flight together.
    for (let i = 0; i < 240; i++) {
      const tenant = tenants[Math.floor(rand() * tenants.length)] as string;
      const r = rand();
      if (r < 0.35) {
        const from = next.get(tenant) as number;
        const n = 1 + Math.floor(rand() * 8);
        next.set(tenant, from + n);
        const batch = itemsOf(tenant, from, n, rand);
        ops.push((s) => s.upsert(tenant, batch));
      } else if (r < 0.45) {
        const victim = `${tenant}-v${Math.floor(rand() * ((next.get(tenant) as number) + 1))}`;
        ops.push((s) => s.delete(tenant, [victim]));
      } else {
        const q = unit(rand);
        const filter = FILTERS[i % FILTERS.length];
        ops.push((s) => s.search(tenant, q, 5, filter));
      }
    }
    const expected: unknown[] = [];
    for (const op of ops) expected.push(await op(full));
    const got: unknown[] = [];
    for (let i = 0; i < ops.length; i += 12) {
      got.push(...(await Promise.all(ops.slice(i, i + 12).map((op) => op(capped)))));
      assert.ok(capped.resident.tenants <= 2, JSON.stringify(capped.resident));
    }
    assert.deepEqual(got, expected);
    for (const tenant of tenants) assert.equal(await capped.count(tenant), await full.count(tenant));
    assert.ok(capped.residency.evictions > 20, JSON.stringify(capped.residency));
    assert.equal(capped.rebuilds, 0, "every evicted index came back from its file");
  });
});
