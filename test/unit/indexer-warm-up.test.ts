/**
 * The indexer's store warm-up (warm-up.ts) on real SQLite + HNSW stores: it runs the raw-turn,
 * segment and candidate writes of a scratch tenant and erases that tenant, leaving nothing of it
 * and nothing changed of another tenant's data.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { turnRowId } from "../../services/core/ids.ts";
import { indexRawTurns } from "../../services/indexer/raw-turns.ts";
import { warmUpStores, warmUpTenant } from "../../services/indexer/warm-up.ts";
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
      const ms = await warmUpStores({ ...s, graph }, tenant);
      assert.ok(ms >= 0);
      assert.equal(seen, 2, "the scratch segment's two records were written");
      assert.equal(await s.graph.countRecords(tenant), 0);
      assert.equal(await s.graph.countSegments(tenant), 0);
      assert.deepEqual(await s.graph.getTurns(tenant, [{ conversation: "warm-up", turnId: "w1" }]), []);
      assert.deepEqual(await s.vectors.get(tenant, [turnRowId("warm-up", "w1"), turnRowId("warm-up", "w2")]), []);
      assert.equal((await s.graph.getTurns("acme", [{ conversation: "c1", turnId: "t1" }])).length, 1);
    });
  });
});
