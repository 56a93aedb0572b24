// The GraphStore contract against a real Neo4j (5.26+). Skips unless NEO4J_URI is set
// (npm run infra:up; eval "$(bash infra/env.sh)"). Tenant names are unique per run, so runs can
// share the server; the suite deletes its tenants at the end.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { Neo4jGraphStore } from "../../services/core/adapters/neo4j/graph-store.ts";
import { neo4jConnection, neo4jSkip } from "../helpers/neo4j-env.ts";
import { batchesFor, makeTurn, runGraphStoreContract } from "./graph-store.contract.ts";

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

// The names and counts every query reads first are kept until the tenant's write stamp changes
// (tenant-stamp-memo.ts). The writers are other processes than the query service: a write through
// another store instance (its own driver) must reach this one's next read.
test("Neo4jGraphStore keeps known names, counts and lexical scopes until another instance writes the tenant", {
  skip: neo4jSkip,
}, async () => {
  const tenant = `stamp-${randomUUID().slice(0, 8)}`;
  const connect = () => Neo4jGraphStore.open(neo4jConnection());
  const [reader, writer] = [await connect(), await connect()];
  /** What the planner reads, through `store`. */
  const planned = async (store: Neo4jGraphStore) => ({
    entities: await store.knownEntities(tenant),
    topics: await store.knownTopics(tenant),
    records: await store.countRecords(tenant),
    c1: [
      await store.knownEntities(tenant, "c1"),
      await store.knownTopics(tenant, "c1"),
      await store.countRecords(tenant, "c1"),
    ],
    c2: [
      await store.knownEntities(tenant, "c2"),
      await store.knownTopics(tenant, "c2"),
      await store.countRecords(tenant, "c2"),
    ],
    byKey: [
      await store.countRecordsByKey(tenant, "topic", "drinks", 10),
      await store.countRecordsByKey(tenant, "entity", "Paris", 10),
      await store.countRecordsByKey(tenant, "entity", "Melanie", 10, "c2"),
    ],
  });
  /** Reads through a store with nothing kept. */
  const withFresh = async <T>(read: (store: Neo4jGraphStore) => Promise<T>): Promise<T> => {
    const store = await connect();
    try {
      return await read(store);
    } finally {
      await store.close();
    }
  };
  const fresh = () => withFresh(planned);
  /** What the planner's reads give for a tenant with no records. */
  const nothingPlanned = { entities: [], topics: [], records: 0, c1: [[], [], 0], c2: [[], [], 0], byKey: [0, 0, 0] };
  try {
    const [b1, b2] = batchesFor(tenant);
    assert.ok(b1 && b2);
    assert.deepEqual(await planned(reader), nothingPlanned);
    await writer.writeBatch(b1);
    const first = await planned(reader);
    assert.deepEqual(first, await fresh());
    assert.equal(first.records, 3);
    assert.ok(first.topics.includes("drinks"));
    assert.deepEqual(first.byKey, [1, 1, 0]);

    // A change no writer stamps (only here, by hand) is not seen: the reads are kept.
    await writer.driver.executeQuery("MATCH (:Topic {tenant: $tenant, key: 'drinks'})-[x:TAGS]->() DELETE x", {
      tenant,
    });
    assert.deepEqual(await planned(reader), first);
    assert.ok(!(await fresh()).topics.includes("drinks"));

    // A batch written by the other instance: read afresh.
    await writer.writeBatch(b2);
    const second = await planned(reader);
    assert.deepEqual(second, await fresh());
    assert.equal(second.records, 4);
    assert.ok(!second.topics.includes("drinks"));
    assert.deepEqual(second.byKey, [0, 2, 1]);

    // Records deleted in a consolidation / erasure transaction of the other instance.
    const [r4] = b2.records;
    assert.ok(r4);
    await writer.transact(tenant, {}, () => ({ writes: { deleteRecords: [r4.id] }, result: undefined }));
    const third = await planned(reader);
    assert.deepEqual(third, await fresh());
    assert.equal(third.records, 3);
    assert.deepEqual(third.c2, [[], [], 0]);

    // The lexical routes' scope counts (item count and length: the BM25 scores). An unstamped
    // change by hand is not seen; raw turns written and a record superseded by the other instance are.
    const lexical = (store: Neo4jGraphStore) =>
      Promise.all([
        store.searchRecordsLexical(tenant, "Caroline Paris tea", 5),
        store.searchTurnsLexical(tenant, "tea coffee sunrise Paris", 5),
      ]);
    const kept = await lexical(reader);
    await writer.driver.executeQuery(
      "MATCH (n {tenant: $tenant}) WHERE n:Record OR n:Turn SET n.lexLen = n.lexLen + 40",
      {
        tenant,
      },
    );
    assert.deepEqual(await lexical(reader), kept);
    assert.notDeepEqual(await withFresh(lexical), kept);
    await writer.writeTurns(tenant, "c1", [makeTurn("t7", "Lunch with Melanie ran long.", "2023-06-02T10:00:00.000Z")]);
    const [, turnsAfter] = await lexical(reader);
    assert.deepEqual(turnsAfter, (await withFresh(lexical))[1]);
    assert.notDeepEqual(turnsAfter, kept[1]);
    const [r1, , r3] = b1.records;
    assert.ok(r1 && r3);
    const superseded = { ...r1, valid: { ...r1.valid, to: "2023-06-20T00:00:00.000Z", supersededBy: r3.id } };
    await writer.transact(tenant, {}, () => ({ writes: { records: [superseded] }, result: undefined }));
    assert.deepEqual(await lexical(reader), await withFresh(lexical));

    // The tenant erased, then written again: nothing from before is served.
    await writer.deleteTenant(tenant);
    assert.deepEqual(await planned(reader), nothingPlanned);
    await writer.writeBatch(b2);
    const again = await planned(reader);
    assert.deepEqual(again, await fresh());
    assert.equal(again.records, 1);
  } finally {
    await writer.deleteTenant(tenant);
    await reader.close();
    await writer.close();
  }
});
