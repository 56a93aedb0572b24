/**
 * Nothing in a long-lived process grows with the number of tenants (issue 18): the shared embedding
 * cache, the segmenter's attention memo, the embedded runtime's per-conversation state and the
 * embedded store's read memos are bounded by entries, and the bounds come from the validated
 * configuration.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, describe, it } from "node:test";
import { openSqliteStores } from "../../services/composition/stores.ts";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import {
  DEFAULT_MAX_RESIDENT_TENANTS,
  DEFAULT_MAX_RESIDENT_VECTORS,
  HnswVectorStore,
} from "../../services/core/adapters/hnsw/vector-store.ts";
import {
  DEFAULT_READ_MEMO_ENTRIES as NEO4J_READ_MEMO_ENTRIES,
  Neo4jGraphStore,
} from "../../services/core/adapters/neo4j/graph-store.ts";
import { DEFAULT_READ_MEMO_ENTRIES, SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { UnchangedDataMemo } from "../../services/core/adapters/sqlite/unchanged-data-memo.ts";
import { CachingEmbedder, DEFAULT_EMBEDDING_CACHE_ENTRIES } from "../../services/core/caching-embedder.ts";
import { CONFIG_DEFAULTS, loadConfig } from "../../services/core/config.ts";
import { LruCache } from "../../services/core/lru-cache.ts";
import { engineSettingsFrom, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { AttentionScorer } from "../../services/segmenter/attention-scorer.ts";
import { Closer } from "../helpers/closer.ts";
import { scriptedAttention } from "../helpers/scripted-attention.ts";

const env = (vars: Record<string, string> = {}): NodeJS.ProcessEnv => ({ MEMORY_CONFIG: "", ...vars });

describe("cache settings", () => {
  it("default to the documented sizes and are read from their variables", () => {
    assert.deepEqual(CONFIG_DEFAULTS.cache, {
      embeddingEntries: 4096,
      conversationStates: 10_000,
      attentionPairs: 4096,
      sqlitePageCacheMiB: 64,
      sqliteMmapMiB: 2047,
      sqliteCheckpointMs: 250,
      sqliteReadMemoEntries: 1024,
      neo4jReadMemoEntries: 1024,
      hnswResidentVectors: 1_000_000,
      hnswResidentTenants: 1_000,
    });
    assert.equal(DEFAULT_EMBEDDING_CACHE_ENTRIES, CONFIG_DEFAULTS.cache.embeddingEntries);
    assert.equal(DEFAULT_READ_MEMO_ENTRIES, CONFIG_DEFAULTS.cache.sqliteReadMemoEntries);
    assert.equal(NEO4J_READ_MEMO_ENTRIES, CONFIG_DEFAULTS.cache.neo4jReadMemoEntries);
    assert.equal(DEFAULT_MAX_RESIDENT_VECTORS, CONFIG_DEFAULTS.cache.hnswResidentVectors);
    assert.equal(DEFAULT_MAX_RESIDENT_TENANTS, CONFIG_DEFAULTS.cache.hnswResidentTenants);
    const c = loadConfig(
      {},
      env({
        MEMORY_EMBEDDING_CACHE_ENTRIES: "1000",
        MEMORY_CONVERSATION_CACHE_ENTRIES: "500",
        MEMORY_ATTENTION_CACHE_ENTRIES: "300",
        MEMORY_SQLITE_CACHE_MIB: "16",
        MEMORY_SQLITE_MMAP_MIB: "0",
        MEMORY_SQLITE_CHECKPOINT_MS: "0",
        MEMORY_SQLITE_READ_MEMO_ENTRIES: "32",
        MEMORY_NEO4J_READ_MEMO_ENTRIES: "48",
        MEMORY_HNSW_RESIDENT_VECTORS: "50000",
        MEMORY_HNSW_RESIDENT_TENANTS: "20",
      }),
    );
    assert.deepEqual(c.cache, {
      embeddingEntries: 1000,
      conversationStates: 500,
      attentionPairs: 300,
      sqlitePageCacheMiB: 16,
      sqliteMmapMiB: 0,
      sqliteCheckpointMs: 0,
      sqliteReadMemoEntries: 32,
      neo4jReadMemoEntries: 48,
      hnswResidentVectors: 50_000,
      hnswResidentTenants: 20,
    });
    const settings = engineSettingsFrom(c);
    assert.equal(settings.conversationStates, 500);
    assert.equal(settings.attentionPairs, 300);
  });

  it("refuse a size below the minimum, naming the field and the variable", () => {
    assert.throws(
      () => loadConfig({}, env({ MEMORY_EMBEDDING_CACHE_ENTRIES: "10" })),
      /cache\.embeddingEntries.*MEMORY_EMBEDDING_CACHE_ENTRIES/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_CONVERSATION_CACHE_ENTRIES: "many" })),
      /cache\.conversationStates.*MEMORY_CONVERSATION_CACHE_ENTRIES/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_SQLITE_MMAP_MIB: "4096" })),
      /cache\.sqliteMmapMiB.*MEMORY_SQLITE_MMAP_MIB/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_SQLITE_CHECKPOINT_MS: "-1" })),
      /cache\.sqliteCheckpointMs.*MEMORY_SQLITE_CHECKPOINT_MS/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_SQLITE_CACHE_MIB: "1" })),
      /cache\.sqlitePageCacheMiB.*MEMORY_SQLITE_CACHE_MIB/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_SQLITE_READ_MEMO_ENTRIES: "0" })),
      /cache\.sqliteReadMemoEntries.*MEMORY_SQLITE_READ_MEMO_ENTRIES/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_SQLITE_READ_MEMO_ENTRIES: "2.5" })),
      /cache\.sqliteReadMemoEntries.*MEMORY_SQLITE_READ_MEMO_ENTRIES/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_NEO4J_READ_MEMO_ENTRIES: "0" })),
      /cache\.neo4jReadMemoEntries.*MEMORY_NEO4J_READ_MEMO_ENTRIES/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_HNSW_RESIDENT_VECTORS: "0" })),
      /cache\.hnswResidentVectors.*MEMORY_HNSW_RESIDENT_VECTORS/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_HNSW_RESIDENT_TENANTS: "1.5" })),
      /cache\.hnswResidentTenants.*MEMORY_HNSW_RESIDENT_TENANTS/,
    );
  });
});

describe("the embedded store's read memos (UnchangedDataMemo)", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("keep at most their capacity, the oldest dropped first", () => {
    const reads: string[] = [];
    const memo = new UnchangedDataMemo<string>(() => "unchanged", 2);
    for (const key of ["a", "b", "a", "c", "b", "a"])
      memo.get(key, () => {
        reads.push(key);
        return key.toUpperCase();
      });
    // a and b read and kept, a found; c drops a (the oldest kept), b found; a read again.
    assert.deepEqual(reads, ["a", "b", "c", "a"]);
    assert.throws(() => new UnchangedDataMemo(() => "", 0), RangeError);
  });

  it("are as large as the configuration says in the stores a process opens", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memory-read-memo-"));
    dirs.push(dir);
    const stores = openSqliteStores(
      loadConfig(
        { dataDir: dir },
        env({
          MEMORY_SQLITE_READ_MEMO_ENTRIES: "7",
          MEMORY_HNSW_RESIDENT_VECTORS: "900",
          MEMORY_HNSW_RESIDENT_TENANTS: "9",
        }),
      ),
    );
    try {
      assert.ok(stores.graph instanceof SqliteGraphStore);
      assert.equal(stores.graph.readMemoEntries, 7);
      assert.ok(stores.vectors instanceof HnswVectorStore);
      assert.deepEqual(stores.vectors.residencyCaps, { vectors: 900, tenants: 9 });
    } finally {
      await stores.close();
    }
    const plain = SqliteGraphStore.open(dir);
    assert.equal(plain.readMemoEntries, DEFAULT_READ_MEMO_ENTRIES, "without the option, the default");
    await plain.close();
  });

  it("the Neo4j store's memos are as large as its option says (the driver connects on first use)", async () => {
    const sized = new Neo4jGraphStore({
      uri: "bolt://127.0.0.1:1",
      user: "neo4j",
      password: "unused",
      readMemoEntries: 5,
    });
    const plain = new Neo4jGraphStore({ uri: "bolt://127.0.0.1:1", user: "neo4j", password: "unused" });
    try {
      assert.equal(sized.readMemoEntries, 5);
      assert.equal(plain.readMemoEntries, NEO4J_READ_MEMO_ENTRIES);
    } finally {
      await sized.close();
      await plain.close();
    }
  });
});

describe("CachingEmbedder", () => {
  it("keeps at most its capacity, least recently used dropped first, and counts hits", async () => {
    const inner = new HashingEmbedder(32);
    const cache = new CachingEmbedder(inner, 3);
    await cache.embed(["a", "b", "c"]);
    await cache.embed(["a"]); // a is now the most recent
    await cache.embed(["d"]); // drops b
    assert.equal(cache.size, 3);
    assert.equal(cache.hits, 1);
    const before = inner.stats().texts;
    await cache.embed(["a", "c", "d"]);
    assert.equal(inner.stats().texts, before, "a, c and d are still cached");
    await cache.embed(["b"]);
    assert.equal(inner.stats().texts, before + 1, "b was dropped and is embedded again");
  });

  it("returns every vector of a call larger than its capacity, in order, duplicates included", async () => {
    const inner = new HashingEmbedder(32);
    const cache = new CachingEmbedder(inner, 2);
    const texts = ["one", "two", "three", "two", "four"];
    const got = await cache.embed(texts);
    assert.deepEqual(got, await inner.embed(texts));
    assert.equal(cache.size, 2);
  });

  it("keys a long text by its digest: same text, same vector; a one-character change, another", async () => {
    const inner = new HashingEmbedder(32);
    const cache = new CachingEmbedder(inner, 8);
    const long = `${"word ".repeat(2000)}end`;
    const [a] = await cache.embed([long]);
    const [b] = await cache.embed([long]);
    assert.equal(a, b);
    assert.equal(cache.hits, 1);
    await cache.embed([`${long}s`]);
    assert.equal(cache.hits, 1, "a different long text is not a hit");
  });
});

describe("AttentionScorer memo", () => {
  it("stays within its entries", async () => {
    const model = scriptedAttention(() => 0.5);
    const scorer = new AttentionScorer(model, 5);
    await scorer.prepare(Array.from({ length: 12 }, (_, i) => ({ previous: `p${i}`, current: `c${i}` })));
    assert.equal(scorer.size, 5);
    assert.equal(await scorer.share("p11", "c11"), 0.5, "a recent pair is read from the memo");
    assert.equal(model.calls.length, 1);
  });
});

describe("LruCache with onEvict (the embedded runtime's per-conversation states)", () => {
  it("drops the least recently used beyond its capacity and says which", () => {
    const dropped: string[] = [];
    const states = new LruCache<string, number>(2, (k) => dropped.push(k));
    states.set("a", 1);
    states.set("b", 2);
    states.get("a");
    states.set("c", 3);
    assert.deepEqual(dropped, ["b"]);
    assert.deepEqual(states.keys(), ["a", "c"]);
  });
});

describe("embedded runtime: per-conversation state is bounded", () => {
  const dirs: string[] = [];
  const engines = new Closer();
  afterEach(() => engines.closeAll());
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("keeps at most conversationStates open conversations in memory; one pushed out has its segment closed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memory-bounded-"));
    dirs.push(dir);
    const config = loadConfig({ dataDir: dir });
    const o = await engines.track(
      openEmbeddedEngine(config, {
        embedder: new HashingEmbedder(),
        settings: {
          conversationStates: 3,
          segmenter: { ...engineSettingsFrom(config).segmenter, bufferTokens: 0 },
        },
      }),
    );
    // Ten tenants, one conversation each, one turn each: every one opens a segment and leaves it open.
    const tenants = Array.from({ length: 10 }, (_, i) => `tenant${i}`);
    for (const [i, tenant] of tenants.entries()) {
      await o.engine.ingest(tenant, "c", [
        {
          turnId: "t1",
          speaker: "Ana",
          text: `Ana adopted a greyhound called Pepper number ${i} in Lisbon last week.`,
          timestamp: "2024-05-06T10:00:00.000Z",
          sessionId: "s1",
          role: "user",
        },
      ]);
      await o.engine.drain();
    }
    assert.ok(o.engine.statesInMemory.segmenter <= 3, JSON.stringify(o.engine.statesInMemory));
    assert.ok(o.engine.statesInMemory.encoder <= 3, JSON.stringify(o.engine.statesInMemory));
    // The seven least recently active were pushed out: their segments were closed and encoded; the
    // three most recent are still open (no flush was asked for).
    const withRecords = [];
    for (const t of tenants) if ((await o.engine.listRecords(t, { limit: 5 })).records.length > 0) withRecords.push(t);
    assert.deepEqual(withRecords, tenants.slice(0, 7));
    // The pushed-out conversations carry on from their stored state.
    await o.engine.ingest("tenant0", "c", [
      {
        turnId: "t2",
        speaker: "Ben",
        text: "Ben said Pepper loves the beach in Porto.",
        timestamp: "2024-05-06T10:05:00.000Z",
        sessionId: "s1",
        role: "user",
      },
    ]);
    await o.engine.flush("tenant0", "c");
    await o.engine.drain();
    const texts = (await o.engine.listRecords("tenant0", { limit: 10 })).records.map((r) => r.text).join("\n");
    assert.match(texts, /Porto/);
    assert.ok(o.engine.statesInMemory.segmenter <= 3);
    await o.close();
  });
});
