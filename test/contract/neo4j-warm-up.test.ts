// The indexer's store warm-up on a real Neo4j (services/indexer/warm-up.ts): a warm-up killed before
// its erase leaves its scratch tenant in both stores, and the next start erases it, found through the
// stores' tenantsNamed, even when an interrupted erase left it without its Tenant node. Skips unless
// NEO4J_URI is set (npm run infra:up; eval "$(bash infra/env.sh)"). The vectors have a label of their
// own per run, dropped at the end.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { Neo4jGraphStore } from "../../services/core/adapters/neo4j/graph-store.ts";
import { Neo4jVectorStore } from "../../services/core/adapters/neo4j/vector-store.ts";
import { indexRawTurns } from "../../services/indexer/raw-turns.ts";
import { WARM_UP_LEFTOVER_AGE_MS, WARM_UP_PREFIX, warmUpStores, warmUpTenant } from "../../services/indexer/warm-up.ts";
import { neo4jConnection, neo4jSkip as skip } from "../helpers/neo4j-env.ts";
import { segmentTurnOf } from "../helpers/stage-fixtures.ts";

const nodesOf = (counts: Record<string, number>): number => Object.values(counts).reduce((sum, n) => sum + n, 0);

test("Neo4j: the warm-up erases a killed warm-up's scratch tenant first; a running one stays", { skip }, async () => {
  const graph = await Neo4jGraphStore.open(neo4jConnection());
  const vectors = new Neo4jVectorStore({
    driver: graph.driver,
    label: `WarmUpVector_${randomUUID().replaceAll("-", "").slice(0, 12)}`,
  });
  const embedder = new HashingEmbedder();
  const killed = warmUpTenant(Date.now() - WARM_UP_LEFTOVER_AGE_MS - 60_000);
  const running = warmUpTenant();
  try {
    // A SIGKILL before the erase: everything written, nothing erased.
    const dying = Object.assign(Object.create(graph) as Neo4jGraphStore, {
      deleteTenant: () => Promise.reject(new Error("killed")),
    });
    await assert.rejects(warmUpStores({ graph: dying, vectors, embedder }, killed), /killed/);
    // And an erase interrupted after its first label: the Tenant node is gone, the rest is not.
    await graph.driver.executeQuery("MATCH (t:Tenant {tenant: $tenant}) DETACH DELETE t", { tenant: killed });
    assert.ok(nodesOf(await graph.countsByKind(killed)) > 0);
    assert.ok((await vectors.count(killed)) > 0);
    assert.ok((await graph.tenantsNamed(WARM_UP_PREFIX)).includes(killed));
    assert.ok((await vectors.tenantsNamed(WARM_UP_PREFIX)).includes(killed));
    // Another instance's warm-up, still running.
    await indexRawTurns({ graph, vectors, embedder }, [
      { ...segmentTurnOf("w1", "Still warming up."), tenant: running, conversation: "warm-up" },
    ]);

    const { leftovers } = await warmUpStores({ graph, vectors, embedder });
    assert.ok(leftovers.includes(killed));
    assert.ok(!leftovers.includes(running));
    assert.equal(nodesOf(await graph.countsByKind(killed)), 0);
    assert.equal(await vectors.count(killed), 0);
    assert.ok(!(await graph.tenantsNamed(WARM_UP_PREFIX)).includes(killed));
    assert.equal((await graph.getTurns(running, [{ conversation: "warm-up", turnId: "w1" }])).length, 1);
    assert.equal(await vectors.count(running), 1);
  } finally {
    for (const tenant of [killed, running]) await graph.deleteTenant(tenant);
    await vectors.drop().catch(() => undefined);
    await vectors.close();
    await graph.close();
  }
});
