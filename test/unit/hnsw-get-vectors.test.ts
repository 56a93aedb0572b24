/**
 * getVectors serves a resident tenant's vectors from its in-memory block: the same bytes as the
 * `vectors` table holds, after replacements and deletes, for a tenant in memory and one that is
 * not (read from SQLite), and each call's vectors are the caller's own copies.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { HnswVectorStore } from "../../services/core/adapters/hnsw/vector-store.ts";
import type { VectorItem } from "../../services/core/ports.ts";
import { seededRandom } from "../helpers/seeded.ts";

const DIM = 24;
const A = "tenant-a";
const B = "tenant-b";

// Not unit length: the block keeps the vectors as written, not normalised.
const vectorOf = (rand: () => number): Float32Array => Float32Array.from({ length: DIM }, () => (rand() * 2 - 1) * 3);

const itemsOf = (tenant: string, from: number, n: number, rand: () => number): VectorItem[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `v${from + i}`,
    vector: vectorOf(rand),
    payload: { tenant, conversation: `c${(from + i) % 3}`, kind: (from + i) % 2 === 0 ? "record" : "turn" },
  }));

/** The tenant's vectors as the table holds them (bytes), by id. */
const tableOf = (store: HnswVectorStore, tenant: string): Map<string, Buffer> =>
  new Map(
    store.db
      .prepare<[string], { id: string; vector: Buffer }>("SELECT id, vector FROM vectors WHERE tenant = ?")
      .all(tenant)
      .map((r) => [r.id, r.vector]),
  );

const bytes = (v: Float32Array): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);

const dirs: string[] = [];
const stores: HnswVectorStore[] = [];
after(async () => {
  for (const s of stores) await s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const open = (dir: string, maxResidentTenants?: number): HnswVectorStore => {
  const store = HnswVectorStore.open(dir, maxResidentTenants === undefined ? {} : { maxResidentTenants });
  stores.push(store);
  return store;
};

/** getVectors of every id asked against the table: same ids, same bytes. */
const assertAsTable = async (store: HnswVectorStore, tenant: string, asked: readonly string[]): Promise<void> => {
  const table = tableOf(store, tenant);
  const got = await store.getVectors(tenant, asked);
  const expected = [...new Set(asked)].filter((id) => table.has(id));
  assert.deepEqual([...got.keys()].sort(), expected.sort());
  for (const id of expected) assert.ok(bytes(got.get(id) as Float32Array).equals(table.get(id) as Buffer), id);
};

describe("HnswVectorStore.getVectors", () => {
  it("returns the table's bytes from a resident index and from SQLite, through replacements and deletes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hnsw-get-vectors-"));
    dirs.push(dir);
    const rand = seededRandom(1818);
    const store = open(dir);
    await store.upsert(A, itemsOf(A, 0, 300, rand));
    await store.upsert(B, itemsOf(B, 0, 50, rand));
    // Replace a third of A's vectors (same ids, new vectors and payloads), delete some, add more.
    await store.upsert(A, itemsOf(A, 0, 100, rand));
    await store.delete(A, ["v3", "v7", "v150", "v299"]);
    await store.upsert(A, itemsOf(A, 300, 40, rand));
    const asked = ["v7", "missing", "v0", "v0", "v150", ...Array.from({ length: 340 }, (_, i) => `v${(i * 7) % 340}`)];
    assert.deepEqual(store.resident.tenants, 2);
    await assertAsTable(store, A, asked);
    await assertAsTable(store, B, ["v1", "v49", "v50"]);
    assert.equal((await store.getVectors("nobody", ["v1"])).size, 0);
    assert.equal((await store.getVectors(A, [])).size, 0);

    // Each call's vectors are the caller's: changing one changes neither the store nor a later read.
    const first = (await store.getVectors(A, ["v0"])).get("v0") as Float32Array;
    const kept = Float32Array.from(first);
    first.fill(0);
    assert.deepEqual((await store.getVectors(A, ["v0"])).get("v0"), kept);
    const [hit] = await store.search(A, kept, 1);
    assert.equal(hit?.id, "v0");

    // An id the resident block lacks (written by another handle on the same database) is read
    // from SQLite, as before.
    const other = open(dir);
    const [late] = itemsOf(A, 1000, 1, rand);
    await other.upsert(A, [late as VectorItem]);
    await assertAsTable(store, A, ["v1000", "v0"]);
    await other.close();

    // A new process: nothing resident until a search loads a tenant; the answers are the same.
    await store.close();
    const reopened = open(dir, 1);
    assert.equal(reopened.resident.tenants, 0);
    await assertAsTable(reopened, A, asked);
    await reopened.search(A, kept, 1);
    assert.equal(reopened.resident.tenants, 1);
    await assertAsTable(reopened, A, asked);
    // B's load evicts A (one resident tenant at most): A is read from SQLite again.
    await reopened.search(B, kept, 1);
    await assertAsTable(reopened, A, asked);
    await assertAsTable(reopened, B, ["v1", "v49", "v50"]);
  });
});
