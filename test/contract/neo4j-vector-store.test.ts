// The VectorStore contract against a real Neo4j (5.26+) vector index, twice: with the default
// strategy (the contract's small sets are searched exactly) and with the exact path off (every
// search goes through the shared vector index with over-fetching). Skips unless NEO4J_URI is set
// (npm run infra:up; eval "$(bash infra/env.sh)"). Each run uses its own label and index, dropped at
// the end, because the contract's tenant names are fixed.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { Neo4jVectorStore, type Neo4jVectorStoreOptions } from "../../services/core/adapters/neo4j/vector-store.ts";
import type { VectorItem } from "../../services/core/ports.ts";
import { neo4jConnection, neo4jSkip as skip } from "../helpers/neo4j-env.ts";
import { mulberry32, randomUnit, runVectorStoreContract } from "./vector-store.contract.ts";

const fixture = (exactThreshold?: number) => async () => {
  const run = randomUUID().replaceAll("-", "").slice(0, 12);
  const options: Neo4jVectorStoreOptions = {
    ...neo4jConnection(),
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

// The exact path counts and scores in one statement: at the threshold's edge (exactly as many
// matches as it allows, one more, none) a search still returns the exact top k, whichever path
// answers, and an empty filtered set returns nothing.
test("Neo4jVectorStore: searches at the exact threshold's edge return the exact top k", { skip }, async () => {
  const fx = await fixture(5)();
  try {
    const rand = mulberry32(1805);
    const tenant = "edge-tenant";
    const items: VectorItem[] = Array.from({ length: 11 }, (_, i) => ({
      id: `v${String(i).padStart(2, "0")}`,
      vector: randomUnit(rand),
      // c5: five items (exact path), c6: six (over the threshold: the vector index).
      payload: { tenant, conversation: i < 5 ? "c5" : "c6", kind: "record" },
    }));
    await fx.store.upsert(tenant, items);
    const q = randomUnit(rand);
    const cosine = (a: Float32Array, b: Float32Array): number => {
      let dot = 0;
      let na = 0;
      let nb = 0;
      for (let i = 0; i < a.length; i++) {
        dot += (a[i] as number) * (b[i] as number);
        na += (a[i] as number) ** 2;
        nb += (b[i] as number) ** 2;
      }
      return dot / Math.sqrt(na * nb);
    };
    for (const [conversation, size] of [
      ["c5", 5],
      ["c6", 6],
    ] as const) {
      const expected = items
        .filter((i) => i.payload.conversation === conversation)
        .map((i) => ({ id: i.id, score: cosine(i.vector, q) }))
        .sort((a, b) => b.score - a.score)
        .slice(0, 3);
      const hits = await fx.store.search(tenant, q, 3, { conversation });
      assert.deepEqual(
        hits.map((h) => h.id),
        expected.map((e) => e.id),
        `${conversation} (${size} matches)`,
      );
      for (const [i, h] of hits.entries()) assert.ok(Math.abs(h.score - (expected[i]?.score ?? 0)) < 1e-5);
    }
    // searchMany at the same edge: one scan serves c5's queries (5 nodes, within the threshold);
    // c6's (6 nodes) and a mixed batch are counted per query, and c6 goes to the vector index.
    const batches = [
      [
        { vector: q, k: 3, filter: { conversation: "c5" } },
        { vector: items[0]?.vector as Float32Array, k: 2, filter: { conversation: "c5" } },
      ],
      [
        { vector: q, k: 3, filter: { conversation: "c6" } },
        { vector: q, k: 4, filter: { conversation: "c6", kind: "record" as const } },
      ],
      [
        { vector: q, k: 3, filter: { conversation: "c5" } },
        { vector: q, k: 3, filter: { conversation: "c6" } },
      ],
    ];
    for (const batch of batches) {
      const expected = await Promise.all(batch.map((b) => fx.store.search(tenant, b.vector, b.k, b.filter)));
      assert.deepEqual(await fx.store.searchMany(tenant, batch), expected);
    }
    assert.deepEqual(await fx.store.search(tenant, q, 3, { conversation: "none" }), []);
    assert.deepEqual(await fx.store.search("other-tenant", q, 3), []);
  } finally {
    await fx.cleanup();
  }
});

// A scan of one kind seeks the (tenant, kind) index (issue 18: the update candidates' scan reads
// the record vectors alone, not the raw turns' beside them). A store written before that index
// existed has none until a process opens it with this code: it answers the same before (the hint
// cannot be used and is ignored) and after ensureSchema has built the index over its nodes.
test("Neo4jVectorStore: a store written before the (tenant, kind) index answers the same with it", {
  skip,
}, async () => {
  const fx = await fixture()();
  try {
    const rand = mulberry32(1818);
    const tenant = "kind-tenant";
    const items: VectorItem[] = Array.from({ length: 40 }, (_, i) => ({
      id: `v${String(i).padStart(2, "0")}`,
      vector: randomUnit(rand),
      payload:
        i % 2 === 0
          ? { tenant, conversation: `c${i % 3}`, kind: "record", entities: [i % 4 === 0 ? "Ada" : "Bo"] }
          : { tenant, conversation: `c${i % 3}`, kind: "turn" },
    }));
    await fx.store.upsert(tenant, items);
    const batch = Array.from({ length: 6 }, (_, i) => ({
      vector: randomUnit(rand),
      k: 4,
      filter: i % 2 === 0 ? { kind: "record" as const } : { kind: "record" as const, entities: ["Ada"] },
    }));
    const answer = async (store: Neo4jVectorStore) => ({
      many: await store.searchMany(tenant, batch),
      one: await Promise.all(batch.map((b) => store.search(tenant, b.vector, b.k, b.filter))),
      turns: await store.search(tenant, batch[0]?.vector as Float32Array, 5, { kind: "turn" }),
    });
    const indexed = await answer(fx.store);
    assert.ok(indexed.many.every((hits) => hits.length > 0 && hits.every((h) => h.payload.kind === "record")));
    assert.deepEqual(indexed.many, indexed.one);
    assert.ok(indexed.turns.length === 5 && indexed.turns.every((h) => h.payload.kind === "turn"));
    const kindIndex = `${fx.store.indexName}_kind`;
    const online = async (store = fx.store): Promise<boolean> =>
      (
        await store.driver.executeQuery("SHOW INDEXES YIELD name, state WHERE name = $name RETURN state", {
          name: kindIndex,
        })
      ).records.some((r) => r.get("state") === "ONLINE");
    assert.ok(await online());
    // The old layout: no (tenant, kind) index.
    await fx.store.driver.executeQuery(`DROP INDEX ${kindIndex}`);
    assert.equal(await online(), false);
    assert.deepEqual(await answer(fx.store), indexed, "without the index");
    const reopened = await fx.reopen();
    assert.deepEqual(await answer(reopened), indexed, "a new process: the index built over the old nodes");
    assert.ok(await online(reopened));
  } finally {
    await fx.cleanup();
  }
});
