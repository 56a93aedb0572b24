// A tenant's erasure names every record it deleted, including one another process wrote while it
// ran: the gateway tombstones those ids on the compacted update queue (and sends them on the erase
// controls), so a record deleted unnamed would leave its candidate set live there. CI caught this
// through the distributed erasure test: the query service listed the tenant's ids, the indexer
// indexed an in-flight segment, then the delete removed that record too, unnamed.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { StoreMaintenance } from "../../services/composition/store-maintenance.ts";
import type { GraphStore } from "../../services/core/ports.ts";
import { keyOf } from "../../services/core/types.ts";
import { eraseControl } from "../../services/indexer/erase-in-stores.ts";
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
