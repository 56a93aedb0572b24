/**
 * The indexer's embedded stores in a fresh temporary folder (SQLite graph + HNSW vectors over one
 * database, a hashing embedder), closed and removed after `fn`: the Kafka stage handler tests that
 * need stores but no broker all start this way.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { HnswVectorStore } from "../../services/core/adapters/hnsw/index.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/index.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";

export interface LocalStores {
  graph: SqliteGraphStore;
  vectors: HnswVectorStore;
  embedder: HashingEmbedder;
}

export const withLocalStores = async (prefix: string, fn: (s: LocalStores) => Promise<void>): Promise<void> => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const db = openSqlite(dir);
  const graph = new SqliteGraphStore(db);
  const vectors = new HnswVectorStore(db, dir);
  try {
    await fn({ graph, vectors, embedder: new HashingEmbedder() });
  } finally {
    await vectors.close();
    await graph.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
};
