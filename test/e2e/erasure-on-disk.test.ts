/**
 * Erasure leaves nothing on disk: after erase() returns (engine still open) and after close, no file
 * under the data folder holds the erased conversation's (or tenant's) text, lexical terms, ids or
 * embedding bytes, while the other conversation's (or tenant's) are still there. The raw bytes of
 * every file are searched: memory.db, its -wal and -shm files, the HNSW index files. The second
 * opinion is on (the real bge-small-en-v1.5 model): its vectors, stored beside the first model's,
 * must go too.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import Database from "better-sqlite3";
import hnswlib from "hnswlib-node";
import { hnswFileOf } from "../../services/core/adapters/hnsw/vector-store.ts";
import { loadOnnxEmbedder, type OnnxEmbedder } from "../../services/core/adapters/onnx/embedder.ts";
import { SQLITE_FILE } from "../../services/core/adapters/sqlite-db.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { TurnInput } from "../../services/core/requests.ts";
import { type OpenedEngine, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { seededRandom } from "../helpers/seeded.ts";

const MODEL_DIR = "models/all-MiniLM-L6-v2";
const SECOND_DIR = "models/bge-small-en-v1.5";
const SEED = 20261201;

/** Made-up words: letters then digits, so the lexical term is the word itself (no stemming). */
const markerMaker = (rnd: () => number) => (prefix: string) => {
  const letters = Array.from({ length: 6 }, () => String.fromCharCode(97 + Math.floor(rnd() * 26))).join("");
  const digits = Array.from({ length: 6 }, () => String(Math.floor(rnd() * 10))).join("");
  return `${prefix}${letters}${digits}`;
};

/**
 * What to search the bytes for: the last 10 characters, in UTF-8 and UTF-16LE. FTS5 stores a term
 * prefix-compressed against the previous term of its leaf, so only a tail is sure to appear whole.
 */
const needles = (marker: string): Buffer[] => {
  const tail = marker.slice(-10);
  return [Buffer.from(tail, "utf8"), Buffer.from(tail, "utf16le")];
};

const turns = (marker: string, prefix: string): TurnInput[] =>
  [
    `I booked the ${marker} hotel in Kyoto for the whole of March.`,
    `The ${marker} hotel has a garden with a koi pond.`,
    `My friend said ${marker} is the best place near the station.`,
    `We will visit the temple next to ${marker} on the second day.`,
  ].map((text, i) => ({
    turnId: `${prefix}-${i}`,
    speaker: "Ana",
    text,
    timestamp: `2024-02-0${i + 1}T10:00:00.000Z`,
    sessionId: "s1",
    role: "user" as const,
  }));

/** Every file under the folder, as raw bytes, by path. */
const filesUnder = (dir: string): Map<string, Buffer> => {
  const out = new Map<string, Buffer>();
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.set(join(e.parentPath, e.name), readFileSync(join(e.parentPath, e.name)));
  }
  return out;
};

const holding = (files: Map<string, Buffer>, needle: Buffer): string[] =>
  [...files].filter(([, bytes]) => bytes.includes(needle)).map(([path]) => path);

/** A vector's bytes in 64-byte pieces: a piece is found even if SQLite split the blob over pages. */
const pieces = (bytes: Buffer): Buffer[] =>
  Array.from({ length: Math.floor(bytes.length / 64) }, (_, i) => bytes.subarray(i * 64, i * 64 + 64));

interface StoredVector {
  tenant: string;
  id: string;
  conversation: string;
  /** As given to the store (the row of the vectors table). */
  raw: Buffer;
  /** As hnswlib keeps it in the index file (normalised for the cosine space). */
  indexed: Buffer;
  /** The second-opinion model's vector (the row's `second` column). */
  second: Buffer | null;
}

/** Every vector of the data folder, read from the closed store's files. */
const storedVectors = (dataDir: string): StoredVector[] => {
  const db = new Database(join(dataDir, SQLITE_FILE), { readonly: true });
  try {
    const rows = db
      .prepare("SELECT tenant, id, conversation, label, vector, second FROM vectors ORDER BY tenant, id")
      .all() as {
      tenant: string;
      id: string;
      conversation: string;
      label: number;
      vector: Buffer;
      second: Buffer | null;
    }[];
    const indexes = new Map<string, InstanceType<typeof hnswlib.HierarchicalNSW>>();
    return rows.map((r) => {
      let index = indexes.get(r.tenant);
      if (!index) {
        index = new hnswlib.HierarchicalNSW("cosine", r.vector.length / 4);
        index.readIndexSync(hnswFileOf(join(dataDir, "vectors"), r.tenant), true);
        indexes.set(r.tenant, index);
      }
      const indexed = Buffer.from(new Float32Array(index.getPoint(r.label)).buffer);
      const second = r.second ? Buffer.from(r.second) : null;
      return { tenant: r.tenant, id: r.id, conversation: r.conversation, raw: Buffer.from(r.vector), indexed, second };
    });
  } finally {
    db.close();
  }
};

interface Scope {
  markers: string[];
  vectors: StoredVector[];
}

const assertGone = (files: Map<string, Buffer>, erased: Scope, when: string): void => {
  for (const marker of erased.markers) {
    for (const n of needles(marker)) {
      assert.deepEqual(holding(files, n), [], `${when}: "${marker}" (${n.length} bytes) is still on disk`);
    }
  }
  for (const v of erased.vectors) {
    for (const bytes of [v.raw, v.indexed, ...(v.second ? [v.second] : [])]) {
      const found = pieces(bytes).flatMap((p) => holding(files, p));
      assert.deepEqual([...new Set(found)], [], `${when}: bytes of the vector of ${v.id} are still on disk`);
    }
  }
};

const assertKept = (files: Map<string, Buffer>, kept: Scope, when: string): void => {
  for (const marker of kept.markers) {
    const [utf8] = needles(marker);
    assert.ok(holding(files, utf8 as Buffer).length > 0, `${when}: kept "${marker}" is on disk`);
  }
  for (const v of kept.vectors) {
    assert.ok(holding(files, v.raw).length > 0, `${when}: kept vector ${v.id} is in memory.db`);
    assert.ok(
      v.second && holding(files, v.second).length > 0,
      `${when}: kept second vector of ${v.id} is in memory.db`,
    );
    assert.ok(
      holding(files, v.indexed).some((p) => p.endsWith(".hnsw")),
      `${when}: kept vector ${v.id} is in its index file`,
    );
  }
};

describe("erasure leaves nothing on disk (embedded engine, real embedder, second opinion on)", {
  skip:
    existsSync(join(MODEL_DIR, "model.onnx")) && existsSync(join(SECOND_DIR, "manifest.json"))
      ? false
      : "model missing: run node scripts/setup.mjs",
}, () => {
  let embedder: OnnxEmbedder;
  let secondEmbedder: OnnxEmbedder;
  const dirs: string[] = [];
  const rnd = seededRandom(SEED);
  const marker = markerMaker(rnd);

  before(async () => {
    embedder = await loadOnnxEmbedder(MODEL_DIR);
    secondEmbedder = await loadOnnxEmbedder(SECOND_DIR, { variant: "int8" });
  });
  after(async () => {
    await embedder?.close?.();
    await secondEmbedder?.close?.();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const open = (dataDir: string): Promise<OpenedEngine> =>
    openEmbeddedEngine(
      loadConfig({
        dataDir,
        consolidation: { window: "", idleMinutes: 0, similarityThreshold: 0.8, concurrency: 1 },
        // No compaction by threshold: the erasure alone must rewrite the index file.
        vectors: { compactDeletedRatio: 1 },
      }),
      { embedder, secondEmbedder },
    );

  /** Ingests, processes and closes (so every store has written its files), then reads the vectors back. */
  const write = async (dataDir: string, input: [string, string, TurnInput[]][]): Promise<StoredVector[]> => {
    const o = await open(dataDir);
    try {
      for (const [tenant, conversation, ts] of input) {
        await o.engine.ingest(tenant, conversation, ts);
        await o.engine.flush(tenant, conversation);
      }
      await o.engine.drain();
    } finally {
      await o.close();
    }
    return storedVectors(dataDir);
  };

  it("erasing a conversation removes its text, terms, ids and vectors from every file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memory-erasure-disk-"));
    dirs.push(dir);
    const tenant = `tenant-${SEED}`;
    const gone = { conversation: marker("convq"), word: marker("erz") };
    const kept = { conversation: marker("convk"), word: marker("kpz") };
    const vectors = await write(dir, [
      [tenant, gone.conversation, turns(gone.word, "a")],
      [tenant, kept.conversation, turns(kept.word, "b")],
    ]);
    const erased: Scope = {
      markers: [gone.word, gone.conversation],
      vectors: vectors.filter((v) => v.conversation === gone.conversation),
    };
    const other: Scope = {
      markers: [kept.word, kept.conversation],
      vectors: vectors.filter((v) => v.conversation === kept.conversation),
    };
    assert.ok(
      erased.vectors.some((v) => v.id.includes("::")),
      "raw turn vectors of the conversation",
    );
    assert.ok(
      erased.vectors.some((v) => !v.id.includes("::")),
      "record vectors of the conversation",
    );
    assert.ok(
      vectors.every((v) => v.second?.length === 384 * 4),
      "every record and raw turn has its second-opinion vector",
    );
    // The search finds what is there: before the erasure both conversations are on disk.
    assertKept(filesUnder(dir), erased, "before");
    assertKept(filesUnder(dir), other, "before");

    const o = await open(dir);
    try {
      const report = await o.engine.erase(tenant, gone.conversation);
      assert.equal(report.vectors, erased.vectors.length);
      const files = filesUnder(dir);
      assertGone(files, erased, "after erase (open)");
      assertKept(files, other, "after erase (open)");
      const wal = [...files].find(([p]) => p.endsWith("-wal"));
      assert.equal(wal?.[1].length ?? 0, 0, "the write-ahead log is truncated");
      const q = await o.engine.query(tenant, { question: `Where is the ${kept.word} hotel?` });
      assert.ok(q.items.length > 0 && q.items.every((i) => i.conversation === kept.conversation));
    } finally {
      await o.close();
    }
    const files = filesUnder(dir);
    assertGone(files, erased, "after close");
    assertKept(files, other, "after close");
  });

  it("erasing a tenant removes its text, terms and vectors from every file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memory-erasure-disk-"));
    dirs.push(dir);
    const gone = { tenant: marker("tenq"), word: marker("erx") };
    const kept = { tenant: marker("tenk"), word: marker("kpx") };
    const vectors = await write(dir, [
      [gone.tenant, "c1", turns(gone.word, "a")],
      [kept.tenant, "c1", turns(kept.word, "b")],
    ]);
    const erased: Scope = {
      markers: [gone.word, gone.tenant],
      vectors: vectors.filter((v) => v.tenant === gone.tenant),
    };
    const other: Scope = {
      markers: [kept.word, kept.tenant],
      vectors: vectors.filter((v) => v.tenant === kept.tenant),
    };
    assert.ok(erased.vectors.length > 0 && other.vectors.length > 0);
    assertKept(filesUnder(dir), erased, "before");

    const o = await open(dir);
    try {
      await o.engine.erase(gone.tenant);
      const files = filesUnder(dir);
      assertGone(files, erased, "after erase (open)");
      assertKept(files, other, "after erase (open)");
      assert.ok(!existsSync(hnswFileOf(join(dir, "vectors"), gone.tenant)), "the tenant's index file is removed");
    } finally {
      await o.close();
    }
    const files = filesUnder(dir);
    assertGone(files, erased, "after close");
    assertKept(files, other, "after close");
  });
});
