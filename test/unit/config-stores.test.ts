// The composition root opens the stores the configuration selects; MEMORY_VECTOR_STORE=qdrant puts
// the vectors in the Qdrant adapter. No Qdrant server runs here: the adapter's client connects on
// first use, so building it needs none (test/contract/qdrant-vector-store.test.ts runs it against
// a server when QDRANT_URL is set).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { openStores, qdrantVectorStore } from "../../services/composition/stores.ts";
import { HnswVectorStore } from "../../services/core/adapters/hnsw/vector-store.ts";
import { QdrantVectorStore } from "../../services/core/adapters/qdrant/vector-store.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { loadConfig } from "../../services/core/config.ts";

const config = (dataDir: string, vars: Record<string, string> = {}) =>
  loadConfig({ dataDir }, { MEMORY_CONFIG: "", ...vars });

describe("composition: stores from the configuration", () => {
  it("opens the embedded stores by default: SQLite graph, HNSW vectors", async () => {
    const dir = mkdtempSync(join(tmpdir(), "config-stores-"));
    try {
      const stores = await openStores(config(dir));
      try {
        assert.equal(stores.kind, "embedded");
        assert.ok(stores.graph instanceof SqliteGraphStore);
        assert.ok(stores.vectors instanceof HnswVectorStore);
      } finally {
        await stores.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("MEMORY_VECTOR_STORE=qdrant with QDRANT_URL builds the Qdrant adapter", async () => {
    const dir = mkdtempSync(join(tmpdir(), "config-stores-"));
    try {
      const c = config(dir, {
        MEMORY_VECTOR_STORE: "qdrant",
        QDRANT_URL: "http://127.0.0.1:6333",
        MEMORY_QDRANT_COLLECTION: "memory_test",
      });
      const stores = await openStores(c);
      try {
        assert.equal(stores.kind, "embedded");
        assert.ok(stores.graph instanceof SqliteGraphStore);
        assert.ok(stores.vectors instanceof QdrantVectorStore);
        assert.equal(stores.vectors.collection, "memory_test");
        assert.match(stores.label, /vectors qdrant http:\/\/127\.0\.0\.1:6333/);
      } finally {
        await stores.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a Qdrant store without an address", () => {
    const c = loadConfig({}, { MEMORY_CONFIG: "" });
    assert.throws(() => qdrantVectorStore(c), /QDRANT_URL is required/);
  });
});
