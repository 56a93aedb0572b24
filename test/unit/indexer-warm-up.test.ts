/**
 * The indexer's store warm-up (warm-up.ts) on real SQLite + HNSW stores: it runs the raw-turn,
 * segment and candidate writes of a scratch tenant and erases that tenant, leaving nothing of it
 * and nothing changed of another tenant's data.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { turnRowId } from "../../services/core/ids.ts";
import { indexRawTurns } from "../../services/indexer/raw-turns.ts";
import {
  WARM_UP_LEFTOVER_AGE_MS,
  warmUpLeftovers,
  warmUpStores,
  warmUpTenant,
} from "../../services/indexer/warm-up.ts";
import { withLocalStores } from "../helpers/local-stores.ts";
import { segmentTurnOf } from "../helpers/stage-fixtures.ts";

describe("indexer store warm-up", () => {
  it("writes and erases a scratch tenant; another tenant's turns stay", async () => {
    await withLocalStores("warm-up-", async (s) => {
      await indexRawTurns(s, [{ ...segmentTurnOf("t1", "I moved to Paris."), tenant: "acme", conversation: "c1" }]);
      const tenant = warmUpTenant();
      assert.notEqual(warmUpTenant(), tenant, "a scratch tenant of its own each time");
      // Seen while it runs: the warm-up really writes (a records count of the scratch tenant > 0).
      let seen = 0;
      const graph = new Proxy(s.graph, {
        get(target, prop) {
          const value = Reflect.get(target, prop, target);
          if (prop === "deleteTenant")
            return async (t: string) => {
              seen = await target.countRecords(t);
              return target.deleteTenant(t);
            };
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
      const { ms, leftovers } = await warmUpStores({ ...s, graph }, tenant);
      assert.ok(ms >= 0);
      assert.deepEqual(leftovers, [], "the local stores cannot list tenants: nothing to erase first");
      assert.equal(seen, 2, "the scratch segment's two records were written");
      assert.equal(await s.graph.countRecords(tenant), 0);
      assert.equal(await s.graph.countSegments(tenant), 0);
      assert.deepEqual(await s.graph.getTurns(tenant, [{ conversation: "warm-up", turnId: "w1" }]), []);
      assert.deepEqual(await s.vectors.get(tenant, [turnRowId("warm-up", "w1"), turnRowId("warm-up", "w2")]), []);
      assert.equal((await s.graph.getTurns("acme", [{ conversation: "c1", turnId: "t1" }])).length, 1);
    });
  });

  it("tells leftovers from warm-ups still running by the start time in the name", () => {
    const now = Date.parse("2026-12-03T12:00:00Z");
    const old = warmUpTenant(now - WARM_UP_LEFTOVER_AGE_MS - 1);
    const running = warmUpTenant(now - 5_000);
    const legacy = "__warm-up-3f2c1a9e-8d4b-4c1e-9a7f-0b1c2d3e4f50";
    assert.match(running, /^__warm-up-\d+-[0-9a-f-]{36}$/);
    assert.deepEqual(warmUpLeftovers([old, running, legacy, "acme", "x__warm-up-1-a"], now), [old, legacy]);
    assert.deepEqual(warmUpLeftovers([warmUpTenant(now - WARM_UP_LEFTOVER_AGE_MS)], now), [], "at the age: kept");
  });

  it("erases a killed warm-up's scratch tenant first, in both stores; a running one and real tenants stay", async () => {
    await withLocalStores("warm-up-left-", async (s) => {
      await indexRawTurns(s, [{ ...segmentTurnOf("t1", "I moved to Paris."), tenant: "acme", conversation: "c1" }]);
      const killed = warmUpTenant(Date.now() - WARM_UP_LEFTOVER_AGE_MS - 60_000);
      // A SIGKILL before the erase: the warm-up wrote everything and erased nothing.
      const dying = new Proxy(s.graph, {
        get(target, prop) {
          if (prop === "deleteTenant") return async () => Promise.reject(new Error("killed"));
          const value = Reflect.get(target, prop, target);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
      await assert.rejects(warmUpStores({ ...s, graph: dying }, killed), /killed/);
      assert.equal(await s.graph.countRecords(killed), 2, "the leftover is there");
      const running = warmUpTenant();
      await indexRawTurns(s, [
        { ...segmentTurnOf("w1", "Still warming up."), tenant: running, conversation: "warm-up" },
      ]);
      // The local stores cannot list their tenants: a small fake of that listing alone (the
      // Neo4j stores' own is tested in test/contract/neo4j-warm-up.test.ts).
      const named = (prefix: string) =>
        Promise.resolve([killed, running, "acme"].filter((t) => t.startsWith(prefix)).sort());
      const graph = Object.assign(Object.create(s.graph) as typeof s.graph, { tenantsNamed: named });
      const vectors = Object.assign(Object.create(s.vectors) as typeof s.vectors, { tenantsNamed: named });
      const { leftovers } = await warmUpStores({ graph, vectors, embedder: s.embedder });
      assert.deepEqual(leftovers, [killed]);
      assert.equal(await s.graph.countRecords(killed), 0);
      assert.equal(await s.graph.countSegments(killed), 0);
      assert.equal(await s.vectors.count(killed), 0);
      assert.equal((await s.graph.getTurns(running, [{ conversation: "warm-up", turnId: "w1" }])).length, 1);
      assert.equal(await s.vectors.count(running), 1);
      assert.equal((await s.graph.getTurns("acme", [{ conversation: "c1", turnId: "t1" }])).length, 1);
    });
  });
});
