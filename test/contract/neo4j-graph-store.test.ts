// The GraphStore contract against a real Neo4j (5.26+). Skips unless NEO4J_URI is set
// (npm run infra:up; eval "$(bash infra/env.sh)"). Tenant names are unique per run, so runs can
// share the server; the suite deletes its tenants at the end.
import { randomUUID } from "node:crypto";
import { Neo4jGraphStore } from "../../services/core/adapters/neo4j/graph-store.ts";
import { runGraphStoreContract } from "./graph-store.contract.ts";

const uri = process.env.NEO4J_URI;

runGraphStoreContract(
  "Neo4jGraphStore",
  async () => {
    const store = await Neo4jGraphStore.open({
      uri,
      user: process.env.NEO4J_USER ?? "neo4j",
      password: process.env.NEO4J_PASSWORD ?? "",
    });
    return {
      store,
      counts: (tenant) => store.countsByKind(tenant),
      cleanup: () => store.close(),
    };
  },
  {
    skip: uri ? false : "NEO4J_URI not set: start with npm run infra:up",
    tenantPrefix: `contract-${randomUUID().slice(0, 8)}-`,
  },
);
