/**
 * The indexer service's stores, by MEMORY_STORE: "embedded" (default: SQLite graph + HNSW vectors in
 * the data folder; one indexer instance) or "neo4j" (Neo4jGraphStore / Neo4jVectorStore from
 * services/core/adapters/neo4j/, over NEO4J_URI / NEO4J_USER / NEO4J_PASSWORD). The Neo4j adapters
 * are loaded on demand, so the embedded path never needs the driver.
 */
import { HnswVectorStore } from "../core/adapters/hnsw/vector-store.ts";
import { openSqlite } from "../core/adapters/sqlite/db.ts";
import { SqliteGraphStore } from "../core/adapters/sqlite/graph-store.ts";
import type { Config } from "../core/config.ts";
import type { GraphStore, VectorStore } from "../core/ports.ts";

export interface IndexerStores {
  kind: "embedded" | "neo4j";
  graph: GraphStore;
  vectors: VectorStore;
  close(): Promise<void>;
}

interface Neo4jOptions {
  uri: string;
  user: string;
  password: string;
  database?: string;
}
interface OpenableStore<T> {
  open(options: Neo4jOptions & { dimension?: number }): Promise<T>;
}

const load = async <T>(file: string, exportName: string): Promise<OpenableStore<T>> => {
  const url = new URL(`../core/adapters/neo4j/${file}`, import.meta.url).href;
  const mod = (await import(url).catch((err: unknown) => {
    throw new Error(`MEMORY_STORE=neo4j: cannot load ${file} (${err instanceof Error ? err.message : String(err)})`);
  })) as Record<string, unknown>;
  const cls = mod[exportName] as Partial<OpenableStore<T>> | undefined;
  if (!cls || typeof cls.open !== "function")
    throw new Error(`MEMORY_STORE=neo4j: ${file} has no ${exportName}.open()`);
  return cls as OpenableStore<T>;
};

export const openIndexerStores = async (
  config: Config,
  kind: string = process.env.MEMORY_STORE ?? "embedded",
  dimension?: number,
): Promise<IndexerStores> => {
  if (kind === "neo4j") {
    const options: Neo4jOptions = {
      uri: process.env.NEO4J_URI ?? "bolt://127.0.0.1:7687",
      user: process.env.NEO4J_USER ?? "neo4j",
      password: process.env.NEO4J_PASSWORD ?? "",
      ...(process.env.NEO4J_DATABASE ? { database: process.env.NEO4J_DATABASE } : {}),
    };
    const graph = await (await load<GraphStore>("graph-store.ts", "Neo4jGraphStore")).open(options);
    const vectors = await (await load<VectorStore>("vector-store.ts", "Neo4jVectorStore"))
      .open({ ...options, ...(dimension ? { dimension } : {}) })
      .catch(async (err: unknown) => {
        await graph.close();
        throw err;
      });
    return {
      kind: "neo4j",
      graph,
      vectors,
      close: async () => {
        await vectors.close();
        await graph.close();
      },
    };
  }
  if (kind !== "embedded") throw new Error(`MEMORY_STORE must be neo4j or embedded, got "${kind}"`);
  const db = openSqlite(config.dataDir);
  const graph = new SqliteGraphStore(db);
  const vectors = new HnswVectorStore(db, config.dataDir);
  return {
    kind: "embedded",
    graph,
    vectors,
    close: async () => {
      await vectors.close();
      await graph.close();
      db.close();
    },
  };
};
