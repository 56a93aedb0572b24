// A tenant's erasure names every record it deleted, including one another process wrote while it
// ran: the gateway tombstones those ids on the compacted update queue (and sends them on the erase
// controls), so a record deleted unnamed would leave its candidate set live there. CI caught this
// through the distributed erasure test: the query service listed the tenant's ids, the indexer
// indexed an in-flight segment, then the delete removed that record too, unnamed.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { StoreMaintenance } from "../../services/composition/store-maintenance.ts";
import { eraseTenantKeys, partitionOfKey } from "../../services/core/adapters/kafka/topics.ts";
import type { GraphStore } from "../../services/core/ports.ts";
import { keyOf } from "../../services/core/types.ts";
import { eraseControl } from "../../services/indexer/erase-in-stores.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { batchesFor } from "../contract/graph-store.contract.ts";
import { indexContractBatches, type LocalStores, withLocalStores } from "../helpers/local-stores.ts";

const TENANT = "acme/eu";

/** The graph store, with a segment of the tenant written just before its deleteTenant runs. */
const writerInBetween = (s: LocalStores): { graph: GraphStore; written: () => string[] } => {
  const late = batchesFor(TENANT, true).at(-1);
  assert.ok(late);
  const written = late.records.map((r) => r.id);
  const graph = new Proxy(s.graph, {
    get(target, prop, receiver) {
      if (prop !== "deleteTenant") {
        const value: unknown = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      }
      return async (tenant: string) => {
        await target.writeBatch(late);
        return target.deleteTenant(tenant);
      };
    },
  });
  return { graph, written: () => written };
};

const stored = async (s: LocalStores): Promise<string[]> =>
  (await s.graph.listRecords(TENANT, { includeSuperseded: true, limit: 1000 })).records.map((r) => r.id);

describe("a tenant's erasure names every record it deleted", () => {
  it("the query service's erasure (StoreMaintenance) reports a record written during it", () =>
    withLocalStores("tenant-erasure-names-", async (s) => {
      await indexContractBatches(s, TENANT);
      const before = await stored(s);
      const { graph, written } = writerInBetween(s);
      const report = await new StoreMaintenance({ graph, vectors: s.vectors }).erase(TENANT);
      assert.deepEqual(await stored(s), []);
      const named = new Set(report.erasedRecordIds);
      for (const id of [...before, ...written()]) assert.ok(named.has(id), `record ${id} deleted unnamed`);
    }));

  it("the indexer's erase-tenant control tombstones a record written during it", () =>
    withLocalStores("tenant-erasure-names-", async (s) => {
      await indexContractBatches(s, TENANT);
      const before = await stored(s);
      const { graph, written } = writerInBetween(s);
      const outputs = await eraseControl({ graph, vectors: s.vectors }, keyOf(TENANT, "c1"), {
        kind: "control",
        control: "erase-tenant",
      });
      assert.deepEqual(await stored(s), []);
      const tombstoned = new Set(outputs.map((o) => o.key));
      for (const id of [...before, ...written()]) assert.ok(tombstoned.has(id), `record ${id} not tombstoned`);
      assert.ok(outputs.every((o) => "control" in o && o.control === "erase"));
    }));
});

describe("an erase-tenant control erases its partition's share of the tenant", () => {
  // With 2 partitions the default partitioner sends acme/eu's c2 to partition 0, c1 and c3 to 1.
  const PARTITIONS = 2;
  const controlKeys = eraseTenantKeys(TENANT, PARTITIONS);
  const control = { kind: "control" as const, control: "erase-tenant" as const };
  const batch = (conversation: string) => {
    const b = batchesFor(TENANT, true).find((x) => x.conversation === conversation);
    assert.ok(b);
    return b;
  };
  const tombstones = (outputs: readonly { key: string }[]): string[] => outputs.map((o) => o.key).sort();
  const idsOf = (conversation: string): string[] => batch(conversation).records.map((r) => r.id);

  it("routes the dev conversations as this test assumes", () => {
    assert.deepEqual(
      ["c1", "c2", "c3"].map((c) => partitionOfKey(keyOf(TENANT, c), PARTITIONS)),
      [1, 0, 1],
    );
  });

  it("each control erases and tombstones its own conversations; the last one leaves nothing of the tenant", () =>
    withLocalStores("tenant-erasure-share-", async (s) => {
      for (const b of batchesFor(TENANT, true)) await indexSegment({ ...s, candidates: false }, b.segment, b.records);
      const first = await eraseControl(s, controlKeys[0] as string, control);
      assert.deepEqual(tombstones(first), [...idsOf("c2")].sort());
      assert.deepEqual(await s.graph.tenantConversations(TENANT), ["c1", "c3"], "partition 1's share is still there");
      const second = await eraseControl(s, controlKeys[1] as string, control);
      assert.deepEqual(tombstones(second), [...idsOf("c1"), ...idsOf("c3")].sort());
      assert.deepEqual(await stored(s), []);
      assert.deepEqual(await s.graph.tenantConversations(TENANT), []);
      assert.deepEqual(await s.graph.knownEntities(TENANT), []);
      assert.equal(await s.vectors.count(TENANT), 0);
      assert.deepEqual(await s.graph.listConversations(TENANT, 10), []);
      assert.deepEqual(await s.graph.knownTopics(TENANT), []);
    }));

  it("a record another instance writes for another partition meanwhile is neither deleted nor tombstoned, until its own control", () =>
    withLocalStores("tenant-erasure-share-", async (s) => {
      await indexSegment({ ...s, candidates: false }, batch("c2").segment, batch("c2").records);
      // Partition 1's conversation c1 is indexed while partition 0's control runs, after its
      // conversations are erased and before what is left of the tenant goes.
      const graph = new Proxy(s.graph, {
        get(target, prop, receiver) {
          const value: unknown = Reflect.get(target, prop, receiver);
          if (prop !== "deleteTenantIfEmpty") return typeof value === "function" ? value.bind(target) : value;
          return async (tenant: string) => {
            await target.writeBatch(batch("c1"));
            return target.deleteTenantIfEmpty(tenant);
          };
        },
      });
      const first = await eraseControl({ graph, vectors: s.vectors }, controlKeys[0] as string, control);
      assert.deepEqual(tombstones(first), [...idsOf("c2")].sort());
      assert.deepEqual((await stored(s)).sort(), [...idsOf("c1")].sort(), "c1's records stay for their own control");
      // Partition 1's control comes after c1's candidate sets (its partition's order).
      const second = await eraseControl(s, controlKeys[1] as string, control);
      assert.deepEqual(tombstones(second), [...idsOf("c1")].sort());
      assert.deepEqual(await stored(s), []);
      assert.deepEqual(await s.graph.listConversations(TENANT, 10), []);
      assert.deepEqual(await s.graph.knownTopics(TENANT), []);
    }));
});
