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
  hnswKindFileOf,
} from "../../services/core/adapters/hnsw/vector-store.ts";
import { openSqlite, type SqliteDatabase } from "../../services/core/adapters/sqlite-db.ts";
import type { VectorItem } from "../../services/core/ports.ts";
import { DIM, mulberry32, randomUnit, runVectorStoreContract } from "./vector-store.contract.ts";

const tempDir = (): string => mkdtempSync(join(tmpdir(), "hnsw-store-"));

const hnswFixture =
  (options: HnswVectorStoreOptions = {}, { crashed = false } = {}) =>
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
        // As after a crash before a flush: every index file behind its tenant's writes.
        if (crashed) db.prepare("UPDATE vector_tenants SET flushed_version = -1").run();
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

// Every tenant split by kind from its first write, and every filtered search through the HNSW
// graphs (no exact path): the same contract over one graph per kind.
runVectorStoreContract("HnswVectorStore, a graph per kind", hnswFixture({ splitKindsAt: 1, bruteForceLimit: 1 }));
runVectorStoreContract(
  "HnswVectorStore, a graph per kind, one resident tenant and a 1-vector cap",
  hnswFixture({ splitKindsAt: 1, bruteForceLimit: 1, maxResidentVectors: 1, maxResidentTenants: 1 }),
);
// Every tenant that grows past 3 points split in the background: the contract's calls land before,
// during and after a split, whichever graphs answer them.
runVectorStoreContract(
  "HnswVectorStore, splits in the background",
  hnswFixture({ splitKindsAt: 3, rebuildInBackgroundAt: 1, bruteForceLimit: 1 }),
);

// Every delete past 1% of a tenant compacts it in the background, and every purge works there, one
// point per turn of the event loop: the contract's calls land during them.
runVectorStoreContract(
  "HnswVectorStore, compactions and purges in the background",
  hnswFixture({ rebuildInBackgroundAt: 1, rebuildSliceMs: 0, compactDeletedRatio: 0.01 }),
);

// Every reopen as after a crash, every tenant's graphs then built in the background one point per
// turn: the contract's calls after a reopen land while its searches are exact.
runVectorStoreContract(
  "HnswVectorStore, graphs built in the background after a crash",
  hnswFixture({ rebuildInBackgroundAt: 1, rebuildSliceMs: 0 }, { crashed: true }),
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

/** What the index file still holds for a point marked deleted in it, as raw bytes. */
const deletedPointInFile = (file: string, label: number): Buffer => {
  const index = new hnswlib.HierarchicalNSW("cosine", DIM);
  index.readIndexSync(file, true);
  index.unmarkDelete(label);
  return Buffer.from(new Float32Array(index.getPoint(label)).buffer);
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

/** Records and raw turns alternating: v0 a record, v1 a turn, … */
const mixed = (tenant: string, n: number, seed: number): VectorItem[] =>
  items(tenant, n, seed).map((item, i) => ({
    ...item,
    payload: { ...item.payload, kind: i % 2 === 0 ? ("record" as const) : ("turn" as const) },
  }));

const withSplit = (
  dir: string,
  splitKindsAt: number,
  more: Omit<HnswVectorStoreOptions, "splitKindsAt" | "ownsDb"> = {},
) => {
  const db = openSqlite(dir);
  // bruteForceLimit 1: every filtered search walks the graphs (no exact path).
  const store = new HnswVectorStore(db, dir, { splitKindsAt, bruteForceLimit: 1, ...more });
  return {
    db,
    store,
    close: async () => {
      await store.close();
      db.close();
    },
  };
};

describe("HnswVectorStore: one graph per kind for a large tenant", () => {
  it("splits a tenant by the write that brings it to splitKindsAt, writes a file per kind and reads them back", async () => {
    const dir = tempDir();
    const vectors = join(dir, "vectors");
    const data = mixed("t1", 60, 31);
    const nearest = async (store: HnswVectorStore, i: number, kind?: "record" | "turn") =>
      (await store.search("t1", (data[i] as VectorItem).vector, 3, kind ? { kind } : undefined)).map((h) => h.id);
    try {
      const a = withSplit(dir, 40);
      await a.store.upsert("t1", data.slice(0, 30));
      assert.equal(a.store.rebuilds, 0, "30 points: one graph");
      await a.store.upsert("t1", data.slice(30));
      assert.equal(a.store.rebuilds, 1, "60 points: a graph per kind, built once");
      assert.equal((await nearest(a.store, 4, "record"))[0], "v4");
      assert.equal((await nearest(a.store, 7, "turn"))[0], "v7");
      assert.ok(
        (await a.store.search("t1", (data[4] as VectorItem).vector, 30, { kind: "turn" })).every(
          (h) => h.payload.kind === "turn",
        ),
      );
      // A record's own vector, searched among turns, does not find the record.
      assert.ok(!(await nearest(a.store, 4, "turn")).includes("v4"));
      // Unfiltered: both graphs, merged by score.
      assert.equal((await nearest(a.store, 9))[0], "v9");
      assert.equal((await nearest(a.store, 10))[0], "v10");
      await a.close();
      assert.ok(existsSync(hnswKindFileOf(vectors, "t1", "record")));
      assert.ok(existsSync(hnswKindFileOf(vectors, "t1", "turn")));
      assert.ok(!existsSync(hnswFileOf(vectors, "t1")));

      const b = withSplit(dir, 40);
      assert.equal((await nearest(b.store, 13, "turn"))[0], "v13");
      assert.equal(b.store.rebuilds, 0, "the kind files were current");
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reads a store's current one-graph files without a rebuild, splits at the tenant's next write, and goes back to one graph at a rebuild below the threshold", async () => {
    const dir = tempDir();
    const vectors = join(dir, "vectors");
    const data = mixed("t1", 60, 34);
    const first = async (store: HnswVectorStore, i: number, kind: "record" | "turn") =>
      (await store.search("t1", (data[i] as VectorItem).vector, 1, { kind }))[0]?.id;
    try {
      const old = withSplit(dir, 1000);
      await old.store.upsert("t1", data.slice(0, 59));
      await old.close();
      assert.ok(existsSync(hnswFileOf(vectors, "t1")));

      const upgraded = withSplit(dir, 40);
      assert.equal(await first(upgraded.store, 4, "record"), "v4");
      assert.equal(upgraded.store.rebuilds, 0, "no rebuild on a read's path");
      await upgraded.store.upsert("t1", data.slice(59));
      assert.equal(upgraded.store.rebuilds, 1, "split at the write");
      assert.equal(await first(upgraded.store, 59, "turn"), "v59");
      await upgraded.close();
      assert.ok(existsSync(hnswKindFileOf(vectors, "t1", "turn")));
      assert.ok(!existsSync(hnswFileOf(vectors, "t1")), "the one-graph file is replaced");

      // A write, then a crash: the files are stale and the rebuild goes by size (below 1000: one graph).
      const crashed = withSplit(dir, 1000);
      await crashed.store.upsert("t1", [{ ...(data[0] as VectorItem), id: "extra" }]);
      crashed.db.close();
      const rebuilt = withSplit(dir, 1000);
      assert.equal(await first(rebuilt.store, 7, "turn"), "v7");
      assert.equal(rebuilt.store.rebuilds, 1);
      await rebuilt.close();
      assert.ok(existsSync(hnswFileOf(vectors, "t1")));
      assert.ok(!existsSync(hnswKindFileOf(vectors, "t1", "record")));
      assert.ok(!existsSync(hnswKindFileOf(vectors, "t1", "turn")));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("zeroes deleted points in the kind files on purgeDeleted, and removes both files when no point is left", async () => {
    const dir = tempDir();
    const vectors = join(dir, "vectors");
    const { db, store, close } = withSplit(dir, 1);
    try {
      const data = mixed("t1", 100, 32);
      await store.upsert("t1", data);
      await store.flush();
      const gone = ["v3", "v50", "v97"];
      const kept = ["v0", "v51"];
      const fileOf = (id: string) => hnswKindFileOf(vectors, "t1", Number(id.slice(1)) % 2 === 0 ? "record" : "turn");
      const bytesOf = (ids: string[]) =>
        ids.map((id) => pointsInFile(fileOf(id), labelsOf(db, "t1", [id]))[0] as Buffer);
      const goneBytes = bytesOf(gone);
      const keptBytes = bytesOf(kept);
      await store.delete("t1", gone);
      await store.purgeDeleted("t1");
      for (const [i, id] of gone.entries())
        assert.ok(!readFileSync(fileOf(id)).includes(goneBytes[i] as Buffer), `${id} is gone`);
      for (const [i, id] of kept.entries())
        assert.ok(readFileSync(fileOf(id)).includes(keptBytes[i] as Buffer), `${id} is kept`);
      for (const item of data.filter((i) => !gone.includes(i.id))) {
        const [hit] = await store.search("t1", item.vector, 1, { kind: item.payload.kind });
        assert.equal(hit?.id, item.id);
      }
      await store.deleteConversation("t1", "c");
      await store.purgeDeleted("t1");
      assert.deepEqual(
        readdirSync(vectors).filter((f) => f.endsWith(".hnsw")),
        [],
      );
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keeps an id given twice in one write, with two kinds, in the last kind's graph only", async () => {
    const dir = tempDir();
    const { store, close } = withSplit(dir, 1);
    try {
      const data = mixed("t1", 10, 35);
      const dup = data[0] as VectorItem;
      await store.upsert("t1", [...data, { ...dup, payload: { ...dup.payload, kind: "turn" } }]);
      assert.ok(!(await store.search("t1", dup.vector, 10, { kind: "record" })).some((h) => h.id === dup.id));
      assert.equal((await store.search("t1", dup.vector, 1, { kind: "turn" }))[0]?.id, dup.id);
      await store.delete("t1", [dup.id]);
      await store.flush();
      await store.purgeDeleted("t1");
      // v2, v4, v6 and v8: the records left once v0 became a turn.
      assert.equal((await store.search("t1", dup.vector, 20, { kind: "record" })).length, 4);
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("compacts a split tenant into a graph per kind until it is below half the threshold", async () => {
    const dir = tempDir();
    const vectors = join(dir, "vectors");
    const { store, close } = withSplit(dir, 40, { compactDeletedRatio: 0.2 });
    const layout = () => [existsSync(hnswFileOf(vectors, "t1")), existsSync(hnswKindFileOf(vectors, "t1", "record"))];
    try {
      const data = mixed("t1", 60, 36);
      await store.upsert("t1", data);
      /** Deletes data[from, to), which compacts, and checks the layout flushed after it. */
      const erase = async (from: number, to: number, compactions: number, files: boolean[], why: string) => {
        await store.delete(
          "t1",
          data.slice(from, to).map((i) => i.id),
        );
        assert.equal(store.compactions.count, compactions);
        await store.flush();
        assert.deepEqual(layout(), files, why);
      };
      await erase(0, 15, 1, [false, true], "45 points, at least 20: still a graph per kind");
      await erase(15, 30, 2, [false, true], "30 points, below 40 but not below 20: still a graph per kind");
      await erase(30, 42, 3, [true, false], "18 points: one graph");
      const kept = data[50] as VectorItem;
      assert.equal((await store.search("t1", kept.vector, 1, { kind: kept.payload.kind }))[0]?.id, kept.id);
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("removes a leftover file of the other layout on purgeDeleted", async () => {
    const dir = tempDir();
    const vectors = join(dir, "vectors");
    const { store, close } = withSplit(dir, 1);
    try {
      const data = mixed("t1", 20, 37);
      await store.upsert("t1", data);
      await store.flush();
      // As a crash between writing one layout and removing the other would leave it.
      writeFileSync(hnswFileOf(vectors, "t1"), "left over");
      // Nothing changed since the flush: the purge writes no file, and still removes that one.
      await store.purgeDeleted("t1");
      assert.ok(!existsSync(hnswFileOf(vectors, "t1")));
      assert.ok(existsSync(hnswKindFileOf(vectors, "t1", "turn")));
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("searches a point under its new kind after an upsert changes it", async () => {
    const dir = tempDir();
    const { store, close } = withSplit(dir, 1);
    try {
      const data = mixed("t1", 20, 33);
      await store.upsert("t1", data);
      const v2 = data[2] as VectorItem;
      await store.upsert("t1", [{ ...v2, payload: { ...v2.payload, kind: "turn" } }]);
      const asTurn = await store.search("t1", v2.vector, 1, { kind: "turn" });
      assert.equal(asTurn[0]?.id, "v2");
      assert.equal(asTurn[0]?.payload.kind, "turn");
      assert.ok(!(await store.search("t1", v2.vector, 20, { kind: "record" })).some((h) => h.id === "v2"));
      assert.equal(await store.count("t1"), 20);
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("builds a large tenant's split in the background: the one graph answers meanwhile, a write lands in both, and the graphs per kind take over", async () => {
    const dir = tempDir();
    const vectors = join(dir, "vectors");
    const data = mixed("t1", 60, 35);
    const { store, close } = withSplit(dir, 40, { rebuildInBackgroundAt: 1 });
    try {
      await store.upsert("t1", data.slice(0, 30));
      await store.upsert("t1", data.slice(30, 40));
      // The write returned before the split: no setImmediate has run since it started.
      assert.equal(store.rebuilds, 0, "still one graph");
      assert.equal((await store.search("t1", (data[4] as VectorItem).vector, 1, { kind: "record" }))[0]?.id, "v4");
      // Written while the split is under way: a new point of each kind, and a moved one.
      const moved = { ...(data[6] as VectorItem), vector: (data[45] as VectorItem).vector };
      await store.upsert("t1", [...data.slice(40, 44), moved]);
      await store.settled();
      assert.equal(store.rebuilds, 1, "a graph per kind, built once");
      const nearest = async (i: number, kind: "record" | "turn") =>
        (await store.search("t1", (data[i] as VectorItem).vector, 2, { kind })).map((h) => h.id);
      assert.equal((await nearest(4, "record"))[0], "v4");
      assert.equal((await nearest(41, "turn"))[0], "v41");
      assert.equal((await nearest(42, "record"))[0], "v42");
      // v6 now has v45's vector (v45 itself is not written): found there, among records.
      assert.equal((await nearest(45, "record"))[0], "v6");
      assert.ok(
        !(await store.search("t1", (data[4] as VectorItem).vector, 30, { kind: "turn" })).some((h) => h.id === "v4"),
      );
      assert.equal(await store.count("t1"), 44);
      await store.flush();
      assert.ok(existsSync(hnswKindFileOf(vectors, "t1", "record")));
      assert.ok(existsSync(hnswKindFileOf(vectors, "t1", "turn")));
      assert.ok(!existsSync(hnswFileOf(vectors, "t1")));
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("gives a background split the new vector of a point it had already taken, and keeps the tenant split meanwhile resident and counted", async () => {
    const dir = tempDir();
    const data = mixed("t1", 50, 37);
    const other = mixed("t2", 5, 38);
    // One point a turn of the event loop; room for one tenant only.
    const { store, close } = withSplit(dir, 40, { rebuildInBackgroundAt: 1, rebuildSliceMs: 0, maxResidentTenants: 1 });
    const turns = async (n: number) => {
      for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
    };
    try {
      await store.upsert("t1", data.slice(0, 30));
      await store.upsert("t1", data.slice(30, 40));
      await turns(6);
      assert.equal(store.rebuilds, 0, "under way");
      assert.ok(store.resident.vectors > 40, "the split's graphs count for the tenant's memory");
      // v4 (a record) was taken by the split already; it moves to v45's vector (v45 is not written).
      await store.upsert("t1", [{ ...(data[4] as VectorItem), vector: (data[45] as VectorItem).vector }]);
      // Another tenant, past the one-tenant cap: the tenant being split is not evicted.
      await store.upsert("t2", other);
      await store.settled();
      assert.equal(store.rebuilds, 1, "the split was not lost to the other tenant's write");
      assert.equal((await store.search("t1", (data[45] as VectorItem).vector, 1, { kind: "record" }))[0]?.id, "v4");
      assert.ok((await store.search("t1", (data[4] as VectorItem).vector, 1, { kind: "record" }))[0]?.id !== "v4");
      // Once the split is in, the caps hold again: one tenant and its live points.
      await store.upsert("t2", other.slice(0, 1));
      assert.deepEqual(store.resident, { tenants: 1, vectors: 5 });
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("goes on with a background split through a delete (a purge then zeroes the point in its graphs), drops it when a close or a change of kind comes first, and starts it again at the next write", async () => {
    const dir = tempDir();
    const vectors = join(dir, "vectors");
    const data = mixed("t1", 50, 36);
    try {
      // One point a turn of the event loop: after five turns v0-v4 are in the split's graphs.
      const a = withSplit(dir, 40, { rebuildInBackgroundAt: 1, rebuildSliceMs: 0 });
      await a.store.upsert("t1", data.slice(0, 30));
      await a.store.upsert("t1", data.slice(30, 40));
      for (let turn = 0; turn < 5; turn++) await new Promise<void>((resolve) => setImmediate(resolve));
      const [v3Label] = labelsOf(a.db, "t1", ["v3"]);
      await a.store.delete("t1", ["v3"]);
      await a.store.settled();
      assert.equal(a.store.rebuilds, 1, "the split went on");
      assert.deepEqual(a.store.resident, { tenants: 1, vectors: 40 }, "v3 deleted in the split's graphs, still held");
      assert.ok(!(await a.store.search("t1", (data[3] as VectorItem).vector, 39)).some((h) => h.id === "v3"));
      await a.store.flush();
      const turnFile = hnswKindFileOf(vectors, "t1", "turn");
      const v3Bytes = deletedPointInFile(turnFile, v3Label as number);
      assert.ok(readFileSync(turnFile).includes(v3Bytes), "held in the split's graph until the purge");
      await a.store.purgeDeleted("t1");
      assert.equal(a.store.scrubs.count, 1);
      assert.ok(!readFileSync(turnFile).includes(v3Bytes), "zeroed in the split's graph");
      assert.equal((await a.store.search("t1", (data[5] as VectorItem).vector, 1, { kind: "turn" }))[0]?.id, "v5");
      await a.close();

      rmSync(dir, { recursive: true, force: true });
      const b = withSplit(dir, 40, { rebuildInBackgroundAt: 1 });
      await b.store.upsert("t1", data.slice(0, 30));
      await b.store.upsert("t1", data.slice(30, 45));
      // A flush waits for the split under way; a close meanwhile drops it, and the flush resolves.
      const flushing = b.store.flush();
      await b.close();
      await flushing;
      assert.ok(existsSync(hnswFileOf(vectors, "t1")), "closed before the split ended: one graph written");
      const c = withSplit(dir, 40, { rebuildInBackgroundAt: 1 });
      assert.equal((await c.store.search("t1", (data[44] as VectorItem).vector, 1))[0]?.id, "v44");
      assert.equal(c.store.rebuilds, 0, "the one-graph file was current");
      await c.store.upsert("t1", data.slice(45));
      await c.store.settled();
      assert.equal(c.store.rebuilds, 1);
      assert.equal((await c.store.search("t1", (data[47] as VectorItem).vector, 1, { kind: "turn" }))[0]?.id, "v47");
      await c.close();

      // A point changing kind while the split is under way: the split starts over, and the point
      // ends in its new kind's graph only.
      rmSync(dir, { recursive: true, force: true });
      // One point a turn of the event loop: after three turns v0-v2 are in the split's graphs.
      const d = withSplit(dir, 40, { rebuildInBackgroundAt: 1, rebuildSliceMs: 0 });
      await d.store.upsert("t1", data.slice(0, 30));
      await d.store.upsert("t1", data.slice(30, 40));
      for (let turn = 0; turn < 3; turn++) await new Promise<void>((resolve) => setImmediate(resolve));
      assert.equal(d.store.rebuilds, 0, "under way");
      const v2 = data[2] as VectorItem;
      await d.store.upsert("t1", [{ ...v2, payload: { ...v2.payload, kind: "turn" } }]);
      await d.store.settled();
      assert.equal(d.store.rebuilds, 1);
      assert.equal((await d.store.search("t1", v2.vector, 1, { kind: "turn" }))[0]?.id, "v2");
      assert.ok(!(await d.store.search("t1", v2.vector, 40, { kind: "record" })).some((h) => h.id === "v2"));
      await d.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("HnswVectorStore: compactions and purges in the background", () => {
  /** Lets the event loop turn n times (one background step each with rebuildSliceMs 0). */
  const turns = async (n: number) => {
    for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  };
  const ids = (data: readonly VectorItem[], from: number, to: number) => data.slice(from, to).map((i) => i.id);

  it("compacts a large tenant in the background after a delete: its graph answers meanwhile, writes land in both, a delete meanwhile leaves its point out", async () => {
    const dir = tempDir();
    const data = items("t1", 60, 41);
    const { store, close } = withSplit(dir, 1000, {
      rebuildInBackgroundAt: 1,
      rebuildSliceMs: 0,
      compactDeletedRatio: 0.2,
    });
    try {
      await store.upsert("t1", data.slice(0, 50));
      await store.delete("t1", ids(data, 0, 10));
      assert.equal(store.compactions.count, 0, "10 of 50 reaches 0.2, and the delete returned before the compaction");
      const hits = await store.search("t1", (data[5] as VectorItem).vector, 50);
      assert.equal(hits.length, 40, "the old graph answers, without the deleted points");
      await turns(5);
      // Read from SQLite with its page already, not yet inserted: the compaction leaves it out.
      await store.delete("t1", ["v20"]);
      await turns(30);
      assert.equal(store.compactions.count, 0, "still under way");
      // v30 was taken by the compaction already; it moves to v57's vector (v57 is not written).
      // (A new point would take a deleted point's slot, lowering the deleted share.)
      await store.upsert("t1", [{ ...(data[30] as VectorItem), vector: (data[57] as VectorItem).vector }]);
      await store.settled();
      assert.equal(store.compactions.count, 1, "one compaction, swapped in");
      assert.deepEqual(store.resident, { tenants: 1, vectors: 39 }, "the new graph holds the live points alone");
      assert.equal((await store.search("t1", (data[57] as VectorItem).vector, 1))[0]?.id, "v30");
      assert.ok((await store.search("t1", (data[30] as VectorItem).vector, 1))[0]?.id !== "v30");
      const all = (await store.search("t1", (data[20] as VectorItem).vector, 60)).map((h) => h.id);
      assert.equal(all.length, 39);
      assert.ok(!all.includes("v20") && !all.includes("v5"));
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("purges a large tenant in the background, zeroing few deleted points and compacting many, and answers searches meanwhile", async () => {
    const dir = tempDir();
    const data = items("t1", 100, 42);
    const { db, store, close } = withSplit(dir, 1000, { rebuildInBackgroundAt: 1, rebuildSliceMs: 0 });
    const file = hnswFileOf(join(dir, "vectors"), "t1");
    /** Purges while a search is asked: the search is answered before the purge's work is done. */
    const purgeWhileSearching = async () => {
      const before = [store.scrubs.count, store.compactions.count];
      const purging = store.purgeDeleted("t1");
      const hits = await store.search("t1", (data[99] as VectorItem).vector, 1);
      assert.equal(hits[0]?.id, "v99");
      assert.deepEqual([store.scrubs.count, store.compactions.count], before, "answered while the purge ran");
      await purging;
    };
    try {
      await store.upsert("t1", data);
      await store.flush();
      const few = ["v3", "v50", "v97"];
      const fewBytes = pointsInFile(file, labelsOf(db, "t1", few));
      await store.delete("t1", few);
      await purgeWhileSearching();
      assert.deepEqual([store.scrubs.count, store.compactions.count], [1, 0], "3 points: zeroed in place");
      let bytes = readFileSync(file);
      for (const b of fewBytes) assert.ok(!bytes.includes(b), "a zeroed point is gone from the file");

      // 10 more: below the ratio (13 of 100), but zeroing 10 costs more than inserting 87.
      const many = ids(data, 10, 20);
      const manyBytes = pointsInFile(file, labelsOf(db, "t1", many));
      const keptBytes = pointsInFile(file, labelsOf(db, "t1", ["v0", "v60"]));
      await store.delete("t1", many);
      await purgeWhileSearching();
      assert.deepEqual([store.scrubs.count, store.compactions.count], [1, 1], "compacted");
      assert.deepEqual(store.resident, { tenants: 1, vectors: 87 });
      bytes = readFileSync(file);
      for (const b of manyBytes) assert.ok(!bytes.includes(b), "a compacted-out point is gone from the file");
      for (const b of keptBytes) assert.ok(bytes.includes(b), "a live point is still in the file");
      assert.equal((await store.search("t1", (data[60] as VectorItem).vector, 1))[0]?.id, "v60");
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // At a low ratio the deletes made during a compaction start another after it: the purge does
  // not wait for those (they read SQLite, which holds no erased row).
  for (const compactDeletedRatio of [0.2, 0.01])
    it(`finishes a purge while deletes keep coming (ratio ${compactDeletedRatio}: a rebuild under way is not started over by them, nor waited for when started since)`, async () => {
      const dir = tempDir();
      const data = items("t1", 400, 46);
      const { db, store, close } = withSplit(dir, 10_000, {
        rebuildInBackgroundAt: 1,
        rebuildSliceMs: 0,
        compactDeletedRatio,
      });
      const file = hnswFileOf(join(dir, "vectors"), "t1");
      try {
        await store.upsert("t1", data);
        await store.flush();
        const erased = ids(data, 0, 40);
        const erasedBytes = pointsInFile(file, labelsOf(db, "t1", erased));
        await store.delete("t1", erased);
        let done = false;
        const purging = store.purgeDeleted("t1").then(() => {
          done = true;
        });
        // One more delete every 20 turns of the event loop, 100 at most (the compaction takes ~360).
        let trickled = 0;
        for (; trickled < 100 && !done; trickled++) {
          await turns(20);
          await store.delete("t1", [`v${100 + trickled}`]);
        }
        await purging;
        assert.ok(trickled < 60, `the purge resolved after ${trickled} more deletes`);
        const bytes = readFileSync(file);
        for (const b of erasedBytes) assert.ok(!bytes.includes(b), "an erased point is gone from the file");
        assert.equal((await store.search("t1", (data[300] as VectorItem).vector, 1))[0]?.id, "v300");
      } finally {
        await close();
        rmSync(dir, { recursive: true, force: true });
      }
    });

  it("purges in the background while a new point takes an erased point's slot", async () => {
    const dir = tempDir();
    const data = items("t1", 100, 44);
    const { db, store, close } = withSplit(dir, 1000, { rebuildInBackgroundAt: 1, rebuildSliceMs: 0 });
    const file = hnswFileOf(join(dir, "vectors"), "t1");
    try {
      await store.upsert("t1", data.slice(0, 99));
      await store.flush();
      const gone = ["v3", "v50"];
      const goneBytes = pointsInFile(file, labelsOf(db, "t1", gone));
      await store.delete("t1", gone);
      const purging = store.purgeDeleted("t1");
      // Written before the purge's first slice: hnswlib puts it in a deleted point's slot.
      await store.upsert("t1", [data[99] as VectorItem]);
      await purging;
      assert.equal(store.scrubs.count, 1);
      const bytes = readFileSync(file);
      for (const b of goneBytes) assert.ok(!bytes.includes(b));
      assert.equal((await store.search("t1", (data[99] as VectorItem).vector, 1))[0]?.id, "v99");
      assert.equal((await store.search("t1", (data[0] as VectorItem).vector, 100)).length, 98);
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // An endless retry would never settle: the timeout fails it instead of hanging the run.
  it("rejects a purge whose background compaction fails, after one more try on the event loop (no endless retry)", {
    timeout: 20_000,
  }, async () => {
    const dir = tempDir();
    const data = items("t1", 60, 45);
    const { db, store, close } = withSplit(dir, 1000, { rebuildInBackgroundAt: 1 });
    try {
      await store.upsert("t1", data);
      await store.delete("t1", ids(data, 0, 20));
      // A stored vector the compaction cannot insert (as a damaged row would be).
      db.prepare("UPDATE vectors SET vector = ? WHERE tenant = 't1' AND id = 'v40'").run(Buffer.alloc(8));
      await assert.rejects(store.purgeDeleted("t1"), /dimension 2/);
      assert.equal(store.compactions.count, 0);
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("fails a purge that a close interrupts (the erasure can be repeated), and the next purge finishes it", async () => {
    const dir = tempDir();
    const data = items("t1", 60, 43);
    const file = hnswFileOf(join(dir, "vectors"), "t1");
    try {
      const a = withSplit(dir, 1000, { rebuildInBackgroundAt: 1, rebuildSliceMs: 0 });
      await a.store.upsert("t1", data);
      await a.store.flush();
      const goneBytes = pointsInFile(file, labelsOf(a.db, "t1", ids(data, 0, 20)));
      await a.store.delete("t1", ids(data, 0, 20));
      const purging = a.store.purgeDeleted("t1");
      await turns(3);
      await a.close();
      await assert.rejects(purging, /closed/);
      const b = withSplit(dir, 1000, { rebuildInBackgroundAt: 1, rebuildSliceMs: 0 });
      assert.equal((await b.store.search("t1", (data[0] as VectorItem).vector, 60)).length, 40);
      await b.store.purgeDeleted("t1");
      const bytes = readFileSync(file);
      for (const x of goneBytes) assert.ok(!bytes.includes(x));
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("HnswVectorStore: a large tenant's graphs built in the background after a crash", () => {
  /** A store whose every tenant's index file is behind its writes, as after a crash before a flush. */
  const crashed = (dir: string) => {
    const db = openSqlite(dir);
    db.prepare("UPDATE vector_tenants SET flushed_version = -1").run();
    db.close();
  };

  it("answers exactly while the graphs are built, takes writes and deletes meanwhile, and writes the file once they are in", async () => {
    const dir = tempDir();
    const data = mixed("t1", 60, 51);
    const options = { rebuildInBackgroundAt: 1, rebuildSliceMs: 0 };
    try {
      const a = withSplit(dir, 1000, options);
      await a.store.upsert("t1", data.slice(0, 50));
      await a.close();
      crashed(dir);
      const b = withSplit(dir, 1000, options);
      const nearest = async (i: number, filter?: { kind: "record" | "turn" }) =>
        (await b.store.search("t1", (data[i] as VectorItem).vector, 1, filter))[0]?.id;
      assert.equal(await nearest(7), "v7");
      assert.equal(await nearest(9, { kind: "turn" }), "v9");
      assert.equal(b.store.rebuilds, 0, "the first search did not wait for the graphs");
      // v20 goes: the build starts over from SQLite.
      await b.store.delete("t1", ["v20"]);
      for (let i = 0; i < 15; i++) await new Promise<void>((resolve) => setImmediate(resolve));
      // Taken by the build already: v10 moves to v55's vector (v55 is not written); v50-v53 come.
      await b.store.upsert("t1", [
        ...data.slice(50, 54),
        { ...(data[10] as VectorItem), vector: (data[55] as VectorItem).vector },
      ]);
      assert.equal(await nearest(55), "v10");
      assert.equal(await nearest(52), "v52");
      assert.ok(!(await b.store.search("t1", (data[20] as VectorItem).vector, 60)).some((h) => h.id === "v20"));
      await b.store.settled();
      assert.equal(b.store.rebuilds, 1, "built once, in the background");
      assert.equal(await nearest(55), "v10");
      assert.equal(await nearest(53, { kind: "turn" }), "v53");
      assert.equal((await b.store.search("t1", (data[0] as VectorItem).vector, 60)).length, 53);
      await b.close();
      // Once more after a crash, and a point changing kind meanwhile: the build starts over.
      crashed(dir);
      const b2 = withSplit(dir, 1000, options);
      assert.equal((await b2.store.search("t1", (data[4] as VectorItem).vector, 1))[0]?.id, "v4");
      const v4 = data[4] as VectorItem;
      await b2.store.upsert("t1", [{ ...v4, payload: { ...v4.payload, kind: "turn" } }]);
      await b2.store.settled();
      assert.equal(b2.store.rebuilds, 1, "built, after the change of kind");
      assert.equal((await b2.store.search("t1", v4.vector, 1, { kind: "turn" }))[0]?.id, "v4");
      await b2.store.flush();
      await b.close();
      const c = withSplit(dir, 1000, options);
      assert.equal((await c.store.search("t1", (data[55] as VectorItem).vector, 1))[0]?.id, "v10");
      assert.equal(c.store.rebuilds, 0, "the file written after the build is current");
      await c.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("writes no file for a tenant closed before its graphs are built, and a purge waits for them", async () => {
    const dir = tempDir();
    const data = items("t1", 40, 52);
    const options = { rebuildInBackgroundAt: 1, rebuildSliceMs: 0 };
    const file = hnswFileOf(join(dir, "vectors"), "t1");
    try {
      const a = withSplit(dir, 1000, options);
      await a.store.upsert("t1", data);
      await a.store.flush();
      const goneBytes = pointsInFile(file, labelsOf(a.db, "t1", ["v1", "v2"]));
      await a.close();
      crashed(dir);
      const b = withSplit(dir, 1000, options);
      assert.equal((await b.store.search("t1", (data[3] as VectorItem).vector, 1))[0]?.id, "v3");
      await b.close();
      const c = withSplit(dir, 1000, options);
      assert.equal((await c.store.search("t1", (data[3] as VectorItem).vector, 40)).length, 40, "not an empty graph");
      // The stale file still holds v1 and v2; the purge waits for the graphs and rewrites it.
      await c.store.delete("t1", ["v1", "v2"]);
      await c.store.purgeDeleted("t1");
      assert.equal(c.store.rebuilds, 1);
      const bytes = readFileSync(file);
      for (const x of goneBytes) assert.ok(!bytes.includes(x));
      await c.close();
      const d = withSplit(dir, 1000, options);
      assert.equal((await d.store.search("t1", (data[3] as VectorItem).vector, 40)).length, 38);
      assert.equal(d.store.rebuilds, 0, "current after the purge");
      await d.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("HnswVectorStore: graphless tenants and the residency caps", () => {
  // The tenant cap, then the point cap (two tenants of 40 points fit under 100, three do not).
  for (const caps of [
    { maxResidentTenants: 2, maxResidentVectors: 1000 },
    { maxResidentTenants: 10, maxResidentVectors: 100 },
  ])
    it(`keeps a crashed store's tenants within the caps (${JSON.stringify(caps)}): a graphless tenant weighs its points and goes while its build waits its turn`, async () => {
      const dir = tempDir();
      const names = ["a", "b", "c", "d", "e", "f"];
      const options = { rebuildInBackgroundAt: 10, ...caps };
      try {
        const a = withSplit(dir, 1000, options);
        for (const t of names) await a.store.upsert(t, items(t, 40, t.charCodeAt(0)));
        await a.close();
        const db = openSqlite(dir);
        db.prepare("UPDATE vector_tenants SET flushed_version = -1").run();
        db.close();
        const b = withSplit(dir, 1000, options);
        for (const t of names) {
          const probe = items(t, 40, t.charCodeAt(0))[7] as VectorItem;
          assert.equal((await b.store.search(t, probe.vector, 1))[0]?.id, "v7");
          assert.ok(b.store.resident.tenants <= 2, `${JSON.stringify(b.store.resident)} after ${t}`);
          assert.ok(
            b.store.resident.vectors <= caps.maxResidentVectors,
            `${JSON.stringify(b.store.resident)} after ${t}`,
          );
        }
        await b.store.settled();
        for (const t of names) {
          const probe = items(t, 40, t.charCodeAt(0))[9] as VectorItem;
          assert.equal((await b.store.search(t, probe.vector, 1))[0]?.id, "v9");
          assert.ok(b.store.resident.tenants <= 2, JSON.stringify(b.store.resident));
        }
        await b.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
});

describe("HnswVectorStore.flushSome", () => {
  it("writes at most the tenants asked, least recently used first, and a tenant being rebuilt once it is in", async () => {
    const dir = tempDir();
    const { db, store, close } = withSplit(dir, 1000, { rebuildInBackgroundAt: 30 });
    const behind = (): string[] =>
      (
        db.prepare("SELECT tenant FROM vector_tenants WHERE flushed_version <> version ORDER BY tenant").all() as {
          tenant: string;
        }[]
      ).map((r) => r.tenant);
    try {
      for (const t of ["a", "b", "c"]) await store.upsert(t, items(t, 10, t.charCodeAt(0)));
      // b used last: written last.
      await store.search("b", (items("b", 1, 98)[0] as VectorItem).vector, 1);
      assert.equal(await store.flushSome(1), true);
      assert.deepEqual(behind(), ["b", "c"]);
      assert.equal(await store.flushSome(1), true);
      assert.deepEqual(behind(), ["b"]);
      assert.equal(await store.flushSome(5), false);
      assert.deepEqual(behind(), []);
      // A tenant compacted in the background (30 live points of 40): left until its graph is in.
      await store.upsert("d", items("d", 40, 100));
      await store.delete("d", ["v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9"]);
      assert.equal(await store.flushSome(5), true, "d is being compacted");
      assert.deepEqual(behind(), ["d"]);
      await store.settled();
      assert.equal(await store.flushSome(5), false);
      assert.deepEqual(behind(), []);
    } finally {
      await close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
