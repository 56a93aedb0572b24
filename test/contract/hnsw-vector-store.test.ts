import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import hnswlib from "hnswlib-node";
import {
  HnswVectorStore,
  type HnswVectorStoreOptions,
  hnswFileOf,
} from "../../services/core/adapters/hnsw/vector-store.ts";
import { openSqlite, type SqliteDatabase } from "../../services/core/adapters/sqlite-db.ts";
import type { VectorItem } from "../../services/core/ports.ts";
import { DIM, mulberry32, randomUnit, runVectorStoreContract } from "./vector-store.contract.ts";

const tempDir = (): string => mkdtempSync(join(tmpdir(), "hnsw-store-"));

const hnswFixture =
  (options: HnswVectorStoreOptions = {}) =>
  async () => {
    const dir = tempDir();
    let db: SqliteDatabase = openSqlite(dir);
    let store = new HnswVectorStore(db, dir, options);
    return {
      store,
      reopen: async () => {
        await store.close();
        db.close();
        db = openSqlite(dir);
        store = new HnswVectorStore(db, dir, options);
        return store;
      },
      cleanup: async () => {
        await store.close();
        db.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  };

runVectorStoreContract("HnswVectorStore", hnswFixture());
// One tenant index in memory at a time, each larger than the vector cap: every switch of tenant
// evicts the other (written to its file when changed) and loads this one back.
runVectorStoreContract(
  "HnswVectorStore, one resident tenant and a 1-vector cap",
  hnswFixture({ maxResidentVectors: 1, maxResidentTenants: 1 }),
);

const items = (tenant: string, n: number, seed: number, offset = 0): VectorItem[] => {
  const rand = mulberry32(seed);
  return Array.from({ length: n }, (_, i) => ({
    id: `v${i + offset}`,
    vector: randomUnit(rand),
    payload: { tenant, conversation: "c", kind: "record" as const, time: i },
  }));
};

/** Opens a store on a fresh handle (as a restarted process would). */
const open = (dir: string): { db: SqliteDatabase; store: HnswVectorStore; close: () => Promise<void> } => {
  const db = openSqlite(dir);
  const store = new HnswVectorStore(db, dir);
  return {
    db,
    store,
    close: async () => {
      await store.close();
      db.close();
    },
  };
};

describe("HnswVectorStore crash recovery and index files", () => {
  it("writes one index file per tenant on flush and reads it back without a rebuild", async () => {
    const dir = tempDir();
    try {
      const a = open(dir);
      await a.store.upsert("t1", items("t1", 20, 1));
      await a.store.upsert("t2", items("t2", 5, 2));
      await a.close();
      assert.equal(readdirSync(join(dir, "vectors")).filter((f) => f.endsWith(".hnsw")).length, 2);
      const b = open(dir);
      const q = (items("t1", 20, 1)[3] as VectorItem).vector;
      assert.equal((await b.store.search("t1", q, 1))[0]?.id, "v3");
      assert.equal(b.store.rebuilds, 0);
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("rebuilds from SQLite after a crash before any flush (no index file)", async () => {
    const dir = tempDir();
    try {
      const a = open(dir);
      await a.store.upsert("t1", items("t1", 30, 3));
      // Crash: the process dies without flush/close. Only the SQLite rows survive.
      a.db.close();
      const b = open(dir);
      assert.equal(await b.store.count("t1"), 30);
      const q = (items("t1", 30, 3)[11] as VectorItem).vector;
      assert.equal((await b.store.search("t1", q, 1))[0]?.id, "v11");
      assert.equal(b.store.rebuilds, 1);
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("rebuilds when the index file is older than the table (writes after the last flush)", async () => {
    const dir = tempDir();
    try {
      const a = open(dir);
      await a.store.upsert("t1", items("t1", 10, 4));
      await a.store.flush();
      // After the flush: one replaced vector, one deletion, one new item; then a crash.
      const moved = randomUnit(mulberry32(400));
      await a.store.upsert("t1", [
        { id: "v0", vector: moved, payload: { tenant: "t1", conversation: "c", kind: "record" } },
      ]);
      await a.store.delete("t1", ["v1"]);
      await a.store.upsert("t1", items("t1", 1, 401, 10));
      a.db.close();

      const b = open(dir);
      assert.equal(await b.store.count("t1"), 10);
      const hits = await b.store.search("t1", moved, 10);
      assert.equal(hits[0]?.id, "v0");
      assert.ok((hits[0]?.score ?? 0) > 0.999);
      assert.ok(!hits.some((h) => h.id === "v1"));
      assert.ok(hits.some((h) => h.id === "v10"));
      assert.equal(b.store.rebuilds, 1);
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("rebuilds when the file's elements differ from the table, and when the file is unreadable", async () => {
    const dir = tempDir();
    try {
      const a = open(dir);
      await a.store.upsert("t1", items("t1", 5, 5));
      await a.store.flush();
      const file = readdirSync(join(dir, "vectors")).find((f) => f.endsWith(".hnsw")) as string;
      copyFileSync(join(dir, "vectors", file), join(dir, "old.hnsw"));
      await a.store.upsert("t1", items("t1", 5, 6, 5));
      await a.close();
      // An old file put back although the version says it is current: 5 labels missing.
      copyFileSync(join(dir, "old.hnsw"), join(dir, "vectors", file));
      const b = open(dir);
      const q = (items("t1", 5, 6, 5)[2] as VectorItem).vector;
      assert.equal((await b.store.search("t1", q, 1))[0]?.id, "v7");
      assert.equal(b.store.rebuilds, 1);
      await b.close();

      writeFileSync(join(dir, "vectors", file), "not an index");
      const c = open(dir);
      assert.equal((await c.store.search("t1", q, 1))[0]?.id, "v7");
      assert.equal(c.store.rebuilds, 1);
      await c.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("grows past its initial capacity and answers filtered searches through the graph", async () => {
    const dir = tempDir();
    const db = openSqlite(dir);
    const store = new HnswVectorStore(db, dir, { initialCapacity: 8, bruteForceLimit: 10 });
    try {
      const all = items("t1", 300, 7);
      for (let i = 0; i < all.length; i += 50) await store.upsert("t1", all.slice(i, i + 50));
      assert.equal(await store.count("t1"), 300);
      const target = all[250] as VectorItem;
      assert.equal((await store.search("t1", target.vector, 1))[0]?.id, "v250");
      // 150 admissible items > bruteForceLimit: the HNSW filter callback path.
      const hits = await store.search("t1", target.vector, 5, { timeFrom: 150 });
      assert.equal(hits[0]?.id, "v250");
      assert.ok(hits.every((h) => (h.payload.time ?? -1) >= 150));
    } finally {
      await store.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("takes the dimension from the first write and removes a tenant's file on deleteTenant", async () => {
    const dir = tempDir();
    const { store, close } = open(dir);
    try {
      assert.equal(store.dimension, undefined);
      await store.upsert("t1", items("t1", 3, 8));
      assert.equal(store.dimension, DIM);
      await store.flush();
      const files = readdirSync(join(dir, "vectors"));
      assert.equal(files.length, 1);
      await store.deleteTenant("t1");
      assert.ok(!existsSync(join(dir, "vectors", files[0] as string)));
      // With no vectors left anywhere, a new dimension is accepted.
      await store.upsert("t1", [
        { id: "x", vector: new Float32Array([1, 0, 0]), payload: { tenant: "t1", conversation: "c", kind: "turn" } },
      ]);
      assert.equal(store.dimension, 3);
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** What the index file holds for each label (hnswlib keeps cosine points normalised), as raw bytes. */
const pointsInFile = (file: string, labels: readonly number[]): Buffer[] => {
  const index = new hnswlib.HierarchicalNSW("cosine", DIM);
  index.readIndexSync(file, true);
  return labels.map((label) => Buffer.from(new Float32Array(index.getPoint(label)).buffer));
};

const labelsOf = (db: SqliteDatabase, tenant: string, ids: readonly string[]): number[] =>
  ids.map(
    (id) =>
      (
        db.prepare("SELECT label FROM vectors WHERE tenant = ? AND id = ?").get(tenant, id) as {
          label: number;
        }
      ).label,
  );

describe("HnswVectorStore: deleted points leave the index file", () => {
  it("keeps deleted points below the threshold until purgeDeleted() zeroes them in memory and in the file", async () => {
    const dir = tempDir();
    const { db, store, close } = open(dir);
    try {
      await store.upsert("t1", items("t1", 100, 21));
      await store.flush();
      const file = hnswFileOf(join(dir, "vectors"), "t1");
      const gone = ["v3", "v50", "v97"];
      const kept = ["v0", "v51"];
      const goneBytes = pointsInFile(file, labelsOf(db, "t1", gone));
      const keptBytes = pointsInFile(file, labelsOf(db, "t1", kept));
      await store.delete("t1", gone);
      await store.flush();
      assert.equal(store.compactions.count, 0, "3% deleted is below the default threshold");
      // hnswlib's markDelete: the vectors are still in the file (why erasure purges).
      for (const b of goneBytes) assert.ok(readFileSync(file).includes(b));
      await store.purgeDeleted("t1");
      assert.deepEqual([store.compactions.count, store.scrubs.count], [0, 1], "zeroed in place, not rebuilt");
      const bytes = readFileSync(file);
      for (const b of goneBytes) assert.ok(!bytes.includes(b), "a deleted point is gone from the file");
      for (const b of keptBytes) assert.ok(bytes.includes(b), "a live point is still in the file");
      // The zeroed points still link the graph: every live point is still found as its own nearest.
      for (const item of items("t1", 100, 21).filter((i) => !gone.includes(i.id))) {
        const [hit] = await store.search("t1", item.vector, 1);
        assert.equal(hit?.id, item.id);
      }
      assert.equal(await store.count("t1"), 97);
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("rebuilds an index once deleted points pass compactDeletedRatio, and a restart reads the compacted file", async () => {
    const dir = tempDir();
    const db = openSqlite(dir);
    const store = new HnswVectorStore(db, dir, { compactDeletedRatio: 0.25 });
    try {
      await store.upsert("t1", items("t1", 40, 22));
      await store.delete("t1", ["v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8"]);
      assert.equal(store.compactions.count, 0, "9 of 40 is below 0.25");
      await store.delete("t1", ["v9"]);
      assert.equal(store.compactions.count, 1, "10 of 40 reaches 0.25");
      await store.close();
      const again = open(dir);
      try {
        assert.equal(again.store.rebuilds, 0);
        const hits = await again.store.search("t1", items("t1", 40, 22)[20]?.vector as Float32Array, 40);
        assert.equal(hits.length, 30);
        assert.equal(hits[0]?.id, "v20");
        assert.equal(again.store.rebuilds, 0, "the compacted file was current");
      } finally {
        await again.close();
      }
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("removes the file when purgeDeleted() finds no live point, and rejects a bad ratio", async () => {
    const dir = tempDir();
    const { store, close } = open(dir);
    try {
      await store.upsert("t1", items("t1", 3, 23));
      await store.flush();
      const file = hnswFileOf(join(dir, "vectors"), "t1");
      assert.ok(existsSync(file));
      await store.deleteConversation("t1", "c");
      await store.purgeDeleted("t1");
      assert.ok(!existsSync(file));
      assert.throws(() => new HnswVectorStore(store.db, dir, { compactDeletedRatio: 0 }), /compactDeletedRatio/);
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
