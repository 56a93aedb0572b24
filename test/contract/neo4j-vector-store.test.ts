// The VectorStore contract against a real Neo4j (5.26+) vector index, twice: with the default
// strategy (the contract's small sets are searched exactly) and with the exact path off (every
// search goes through the shared vector index with over-fetching). Skips unless NEO4J_URI is set
// (npm run infra:up; eval "$(bash infra/env.sh)"). Each run uses its own label and index, dropped at
// the end, because the contract's tenant names are fixed.
import { randomUUID } from "node:crypto";
import { Neo4jVectorStore, type Neo4jVectorStoreOptions } from "../../services/core/adapters/neo4j/vector-store.ts";
import { runVectorStoreContract } from "./vector-store.contract.ts";

const uri = process.env.NEO4J_URI;
const skip = uri ? false : "NEO4J_URI not set: start with npm run infra:up";

const fixture = (exactThreshold?: number) => async () => {
  const run = randomUUID().replaceAll("-", "").slice(0, 12);
  const options: Neo4jVectorStoreOptions = {
    uri,
    user: process.env.NEO4J_USER ?? "neo4j",
    password: process.env.NEO4J_PASSWORD ?? "",
    label: `ContractVector_${run}`,
    ...(exactThreshold !== undefined ? { exactThreshold } : {}),
  };
  let store = new Neo4jVectorStore(options);
  return {
    store,
    reopen: async () => {
      await store.close();
      store = new Neo4jVectorStore(options);
      return store;
    },
    cleanup: async () => {
      await store.drop().catch(() => undefined);
      await store.close();
    },
  };
};

runVectorStoreContract("Neo4jVectorStore (exact under the threshold)", fixture(), { skip });
runVectorStoreContract("Neo4jVectorStore (vector index, over-fetching)", fixture(0), { skip });
