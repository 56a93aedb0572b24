/**
 * The stores a process reads and writes, from the configuration (the composition root's store
 * half; services/composition/parts.ts has the models).
 * - store.kind "embedded" (MEMORY_STORE): SQLite graph + HNSW vectors in the data folder; one
 *   writer process.
 * - store.kind "neo4j": the graph and the vectors in Neo4j (NEO4J_URI / NEO4J_USER /
 *   NEO4J_PASSWORD / NEO4J_DATABASE), one driver for both, shared by any number of processes.
 * - store.vectors "qdrant" (MEMORY_VECTOR_STORE, with QDRANT_URL): the vectors in Qdrant instead,
 *   with either kind.
 */
import type { Driver } from "neo4j-driver";
import { HnswVectorStore } from "../core/adapters/hnsw/vector-store.ts";
import { openDriver } from "../core/adapters/neo4j/driver.ts";
import { Neo4jGraphStore } from "../core/adapters/neo4j/graph-store.ts";
import { Neo4jVectorStore } from "../core/adapters/neo4j/vector-store.ts";
import { QdrantVectorStore } from "../core/adapters/qdrant/vector-store.ts";
import { SqliteGraphStore } from "../core/adapters/sqlite/graph-store.ts";
import { startWalCheckpointer } from "../core/adapters/sqlite-checkpoints.ts";
import { openSqlite, type SqliteDatabase } from "../core/adapters/sqlite-db.ts";
import { type Config, cursorSecretOf, vectorStoreKind } from "../core/config.ts";
import type { GraphStore, VectorStore } from "../core/ports.ts";
import { jsonLogger } from "../platform/log.ts";
import { tracedPortIfOn } from "./traced-port.ts";

export type StoreKind = Config["store"]["kind"];

export interface OpenedStores {
  kind: StoreKind;
  /** Where the data lives, for logs. */
  label: string;
  graph: GraphStore;
  vectors: VectorStore;
  close(): Promise<void>;
}

/** The embedded stores, with the SQLite database they share (the embedded runtime puts its log and state there too). */
export interface OpenedSqliteStores extends OpenedStores {
  db: SqliteDatabase;
}

/** The Qdrant vector store of the configuration (the client connects on first use). */
export const qdrantVectorStore = (config: Pick<Config, "qdrant">): QdrantVectorStore => {
  const { url, apiKey, collection } = config.qdrant;
  // The config rules refuse store.vectors qdrant without a URL; this guards direct callers.
  if (url === undefined) throw new Error("QDRANT_URL is required for MEMORY_VECTOR_STORE=qdrant");
  return new QdrantVectorStore({ url, collection, ...(apiKey ? { apiKey } : {}) });
};

const qdrantLabel = (config: Config): string =>
  vectorStoreKind(config) === "qdrant" ? `, vectors qdrant ${config.qdrant.url}` : "";

/** SQLite graph store; HNSW vectors in the data folder unless the configuration puts them in Qdrant. */
export const openSqliteStores = (config: Config): OpenedSqliteStores => {
  const db = openSqlite(config.dataDir, {
    pageCacheMiB: config.cache.sqlitePageCacheMiB,
    mmapMiB: config.cache.sqliteMmapMiB,
  });
  // Checkpoints off the event loop (sqlite-checkpoints.ts); a worker that fails leaves them to the
  // commits, as without one, and the first failure is logged.
  let reported = false;
  const checkpoints =
    config.cache.sqliteCheckpointMs > 0
      ? startWalCheckpointer(db, {
          intervalMs: config.cache.sqliteCheckpointMs,
          onError: (error) => {
            if (!reported) jsonLogger("stores")("warn", "SQLite checkpoint worker failed", { error });
            reported = true;
          },
        })
      : undefined;
  const graph = new SqliteGraphStore(db, {
    cursorSecret: cursorSecretOf(config),
    readMemoEntries: config.cache.sqliteReadMemoEntries,
  });
  const vectors: VectorStore =
    vectorStoreKind(config) === "qdrant"
      ? qdrantVectorStore(config)
      : new HnswVectorStore(db, config.dataDir, {
          compactDeletedRatio: config.vectors.compactDeletedRatio,
          splitKindsAt: config.vectors.splitKindsAt,
          maxResidentVectors: config.cache.hnswResidentVectors,
          maxResidentTenants: config.cache.hnswResidentTenants,
        });
  return {
    kind: "embedded",
    label: `embedded ${config.dataDir}${qdrantLabel(config)}`,
    db,
    // A span per store call when tracing is on (docs/tracing.md).
    graph: tracedPortIfOn(graph, "graph"),
    vectors: tracedPortIfOn(vectors, "vectors"),
    close: async () => {
      await vectors.close();
      await graph.close();
      await checkpoints?.close();
      db.close();
    },
  };
};

const openNeo4jStores = async (config: Config): Promise<OpenedStores> => {
  const { uri, user, password, database } = config.neo4j;
  // One driver (one connection pool) for both stores.
  const { driver }: { driver: Driver } = openDriver({ uri, user, password });
  const shared = { driver, ...(database ? { database } : {}) };
  try {
    const graph = await Neo4jGraphStore.open({
      ...shared,
      cursorSecret: cursorSecretOf(config),
      readMemoEntries: config.cache.neo4jReadMemoEntries,
    });
    let vectors: VectorStore;
    if (vectorStoreKind(config) === "qdrant") vectors = qdrantVectorStore(config);
    else {
      const neo4jVectors = new Neo4jVectorStore(shared);
      await neo4jVectors.ensureSchema();
      vectors = neo4jVectors;
    }
    return {
      kind: "neo4j",
      label: `neo4j ${uri}${qdrantLabel(config)}`,
      graph: tracedPortIfOn(graph, "graph"),
      vectors: tracedPortIfOn(vectors, "vectors"),
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
};

/** The configured stores (store.kind, or `kind` where a caller chooses). */
export const openStores = async (config: Config, kind: StoreKind = config.store.kind): Promise<OpenedStores> =>
  kind === "neo4j" ? openNeo4jStores(config) : openSqliteStores(config);
