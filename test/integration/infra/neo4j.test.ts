// Smoke test for the local Neo4j (infra/neo4j.sh) through neo4j-driver over Bolt:
// MERGE/MATCH, a full-text index and a vector index (Neo4j 5.11+ syntax), both queried.
// Skips unless NEO4J_URI is set (npm run infra:up; eval "$(bash infra/env.sh)").
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import neo4j from "neo4j-driver";
import { neo4jConnection, neo4jSkip as skip } from "../../helpers/neo4j-env.ts";

test("neo4j: MERGE/MATCH, full-text index, vector index", { skip, timeout: 120_000 }, async () => {
  const run = randomUUID().replaceAll("-", "").slice(0, 12);
  const label = `InfraSmoke_${run}`;
  const ftIndex = `infra_smoke_ft_${run}`;
  const vecIndex = `infra_smoke_vec_${run}`;
  const { uri, user, password } = neo4jConnection();
  const driver = neo4j.driver(uri, neo4j.auth.basic(user, password));
  try {
    await driver.verifyConnectivity();

    // MERGE is idempotent: running the same upsert twice leaves one node per id.
    const docs = [
      { id: "a", text: "the quick brown fox jumps over the lazy dog", embedding: [1, 0, 0, 0] },
      { id: "b", text: "a slow green turtle sleeps in the sun", embedding: [0, 1, 0, 0] },
      { id: "c", text: "brown bears fish for salmon in the river", embedding: [0.9, 0.1, 0, 0] },
    ];
    const upsert = `UNWIND $docs AS d
       MERGE (n:${label} {id: d.id})
       SET n.text = d.text, n.embedding = d.embedding`;
    await driver.executeQuery(upsert, { docs });
    await driver.executeQuery(upsert, { docs });
    await driver.executeQuery(`MATCH (a:${label} {id: 'a'}), (c:${label} {id: 'c'}) MERGE (a)-[:SIMILAR_TO]->(c)`);
    const count = await driver.executeQuery(`MATCH (n:${label}) RETURN count(n) AS n`);
    assert.equal(count.records[0]?.get("n").toNumber(), 3);
    const rel = await driver.executeQuery(`MATCH (:${label} {id: 'a'})-[:SIMILAR_TO]->(m:${label}) RETURN m.id AS id`);
    assert.deepEqual(
      rel.records.map((r) => r.get("id")),
      ["c"],
    );

    // Indexes: create, then wait until ONLINE (bounded by the server-side timeout in seconds).
    await driver.executeQuery(`CREATE FULLTEXT INDEX ${ftIndex} IF NOT EXISTS FOR (n:${label}) ON EACH [n.text]`);
    await driver.executeQuery(
      `CREATE VECTOR INDEX ${vecIndex} IF NOT EXISTS FOR (n:${label}) ON (n.embedding)
       OPTIONS { indexConfig: { \`vector.dimensions\`: 4, \`vector.similarity_function\`: 'cosine' } }`,
    );
    await driver.executeQuery("CALL db.awaitIndexes(60)");
    const states = await driver.executeQuery(
      "SHOW INDEXES YIELD name, type, state WHERE name IN $names RETURN name, type, state ORDER BY name",
      { names: [ftIndex, vecIndex] },
    );
    assert.deepEqual(
      states.records.map((r) => [r.get("type"), r.get("state")]),
      [
        ["FULLTEXT", "ONLINE"],
        ["VECTOR", "ONLINE"],
      ],
    );

    const ft = await driver.executeQuery(
      "CALL db.index.fulltext.queryNodes($index, $q) YIELD node, score RETURN node.id AS id, score ORDER BY score DESC",
      { index: ftIndex, q: "brown" },
    );
    assert.deepEqual(ft.records.map((r) => r.get("id")).sort(), ["a", "c"]);

    const vec = await driver.executeQuery(
      "CALL db.index.vector.queryNodes($index, 2, $v) YIELD node, score RETURN node.id AS id, score",
      { index: vecIndex, v: [1, 0.05, 0, 0] },
    );
    assert.deepEqual(
      vec.records.map((r) => r.get("id")),
      ["a", "c"],
    );
    const top = vec.records[0]?.get("score") as number;
    assert.ok(top > 0.99, `cosine score of the nearest vector should be ~1, got ${top}`);
  } finally {
    await driver.executeQuery(`DROP INDEX ${ftIndex} IF EXISTS`).catch(() => undefined);
    await driver.executeQuery(`DROP INDEX ${vecIndex} IF EXISTS`).catch(() => undefined);
    await driver.executeQuery(`MATCH (n:${label}) DETACH DELETE n`).catch(() => undefined);
    await driver.close();
  }
});
