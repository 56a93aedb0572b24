/**
 * The stores a service reads and writes, by MEMORY_STORE: "embedded" (SQLite graph + HNSW vectors
 * in the data folder; one writer process) or "neo4j" (the graph and the vectors in Neo4j, over
 * NEO4J_URI / NEO4J_USER / NEO4J_PASSWORD, shared by any number of processes).
 */
import { type Config, cursorSecretOf } from "../config.ts";
import type { GraphStore, VectorStore } from "../ports.ts";
import { HnswVectorStore } from "./hnsw/vector-store.ts";
import { openDriver } from "./neo4j/driver.ts";
import { Neo4jGraphStore } from "./neo4j/graph-store.ts";
import { Neo4jVectorStore } from "./neo4j/vector-store.ts";
import { SqliteGraphStore } from "./sqlite/graph-store.ts";
import { openSqlite } from "./sqlite-db.ts";

export type StoreKind = "embedded" | "neo4j";

export interface OpenedStores {
  kind: StoreKind;
  /** Where the data lives, for logs. */
  label: string;
  graph: GraphStore;
  vectors: VectorStore;
  close(): Promise<void>;
}

export const storeKindFromEnv = (env: NodeJS.ProcessEnv = process.env): StoreKind => {
  const kind = env.MEMORY_STORE ?? "embedded";
  if (kind !== "embedded" && kind !== "neo4j") throw new Error(`MEMORY_STORE must be neo4j or embedded, got "${kind}"`);
  return kind;
};

export const openStores = async (config: Config, kind: StoreKind = storeKindFromEnv()): Promise<OpenedStores> => {
  if (kind === "neo4j") {
    const uri = process.env.NEO4J_URI ?? "bolt://127.0.0.1:7687";
    // One driver (one connection pool) for both stores.
    const { driver } = openDriver({
      uri,
      user: process.env.NEO4J_USER ?? "neo4j",
      password: process.env.NEO4J_PASSWORD ?? "",
    });
    const database = process.env.NEO4J_DATABASE;
    const shared = { driver, ...(database ? { database } : {}) };
    try {
      const graph = await Neo4jGraphStore.open({ ...shared, cursorSecret: cursorSecretOf(config) });
      const vectors = new Neo4jVectorStore(shared);
      await vectors.ensureSchema();
      return {
        kind,
        label: `neo4j ${uri}`,
        graph,
        vectors,
        close: async () => {
          await vectors.close();
          await graph.close();
          await driver.close();
        },
      };
    } catch (err) {
      await driver.close();
      throw err;
    }
  }
  const db = openSqlite(config.dataDir);
  const graph = new SqliteGraphStore(db, { cursorSecret: cursorSecretOf(config) });
  const vectors = new HnswVectorStore(db, config.dataDir, { compactDeletedRatio: config.vectors.compactDeletedRatio });
  return {
    kind,
    label: `embedded ${config.dataDir}`,
    graph,
    vectors,
    close: async () => {
      await vectors.close();
      await graph.close();
      db.close();
    },
  };
};
