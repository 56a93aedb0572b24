// The GraphStore contract against a real Neo4j (5.26+). Skips unless NEO4J_URI is set
// (npm run infra:up; eval "$(bash infra/env.sh)"). Tenant names are unique per run, so runs can
// share the server; the suite deletes its tenants at the end.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { Neo4jGraphStore } from "../../services/core/adapters/neo4j/graph-store.ts";
import { neo4jConnection, neo4jSkip } from "../helpers/neo4j-env.ts";
import { batchesFor, runGraphStoreContract } from "./graph-store.contract.ts";

runGraphStoreContract(
  "Neo4jGraphStore",
  async () => {
    const store = await Neo4jGraphStore.open(neo4jConnection());
    return {
      store,
      counts: (tenant) => store.countsByKind(tenant),
      cleanup: () => store.close(),
    };
  },
  {
    skip: neo4jSkip,
    tenantPrefix: `contract-${randomUUID().slice(0, 8)}-`,
  },
);

// What only Neo4j needs: nodes written before the shared lexical terms get them when a store opens.
test("Neo4jGraphStore backfills lexical terms of older records and turns", {
  skip: neo4jSkip,
}, async () => {
  const tenant = `backfill-${randomUUID().slice(0, 8)}`;
  const connect = () => Neo4jGraphStore.open(neo4jConnection());
  const a = await connect();
  try {
    for (const b of batchesFor(tenant)) await a.writeBatch(b);
    const expected = {
      lex: await a.searchRecordsLexical(tenant, "Caroline painting Paris", 5),
      turns: await a.searchTurnsLexical(tenant, "tea coffee sunrise", 5),
    };
    assert.ok(expected.lex.length > 0 && expected.turns.length > 0);
    await a.driver.executeQuery("MATCH (n {tenant: $tenant}) WHERE n:Record OR n:Turn REMOVE n.lex, n.lexLen", {
      tenant,
    });
    assert.deepEqual(await a.searchRecordsLexical(tenant, "Caroline painting Paris", 5), []);
    const b = await connect();
    try {
      assert.deepEqual(await b.searchRecordsLexical(tenant, "Caroline painting Paris", 5), expected.lex);
      assert.deepEqual(await b.searchTurnsLexical(tenant, "tea coffee sunrise", 5), expected.turns);
    } finally {
      await b.deleteTenant(tenant);
      await b.close();
    }
  } finally {
    await a.close();
  }
});
