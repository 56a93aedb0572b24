/**
 * The indexer's embedded stores in a fresh temporary folder (SQLite graph + HNSW vectors over one
 * database, a hashing embedder), closed and removed after `fn`: the Kafka stage handler tests that
 * need stores but no broker all start this way; the query tests seed them with the graph-store
 * contract's segments.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { HnswVectorStore } from "../../services/core/adapters/hnsw/index.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/index.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { batchesFor } from "../contract/graph-store.contract.ts";

export interface LocalStores {
  graph: SqliteGraphStore;
  vectors: HnswVectorStore;
  embedder: HashingEmbedder;
}

/** Local stores for a suite's before(), with the close-and-remove its after() calls. */
export const openLocalStores = (prefix: string): LocalStores & { dispose: () => Promise<void> } => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const db = openSqlite(dir);
  const graph = new SqliteGraphStore(db);
  const vectors = new HnswVectorStore(db, dir);
  const dispose = async () => {
    await vectors.close();
    await graph.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { graph, vectors, embedder: new HashingEmbedder(), dispose };
};

export const withLocalStores = async (prefix: string, fn: (s: LocalStores) => Promise<void>): Promise<void> => {
  const { dispose, ...stores } = openLocalStores(prefix);
  try {
    await fn(stores);
  } finally {
    await dispose();
  }
};

/** The graph-store contract's segments of `tenant`, written through the indexer (no update candidates). */
export const indexContractBatches = async (s: LocalStores, tenant: string): Promise<void> => {
  for (const b of batchesFor(tenant)) await indexSegment({ ...s, candidates: false }, b.segment, b.records);
};
