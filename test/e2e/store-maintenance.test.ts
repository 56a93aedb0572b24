// StoreMaintenance (services/composition/store-maintenance.ts), what the query service serves as
// memory.v1.Maintenance, over the embedded stores (SQLite + HNSW, the query service's
// MEMORY_STORE=embedded): the same consolidation report, versions, histories and erasure counts
// as the embedded engine for the consolidation scenario. (Over Neo4j:
// test/integration/distributed/maintenance.test.ts.)
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { StoreMaintenance } from "../../services/composition/store-maintenance.ts";
import { type OpenedSqliteStores, openSqliteStores } from "../../services/composition/stores.ts";
import { type Config, loadConfig } from "../../services/core/config.ts";
import type { MemoryRecord } from "../../services/core/types.ts";
import { type OpenedEngine, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { LIFE, TRAVEL } from "../helpers/consolidation-scenario.ts";

const MODEL = "models/all-MiniLM-L6-v2/model.onnx";
const TENANT = "alice";

const configOf = (dataDir: string): Config =>
  loadConfig({ dataDir, consolidation: { window: "", idleMinutes: 0, similarityThreshold: 0.8, concurrency: 2 } });

const versions = (records: readonly MemoryRecord[]) =>
  [...records]
    .sort((a, b) => (a.id < b.id ? -1 : 1))
    .map((r) => ({ id: r.id, text: r.text, valid: r.valid, mergedSources: r.mergedSources ?? [] }));

describe("StoreMaintenance over the embedded stores equals the embedded engine", {
  skip: existsSync(MODEL) ? false : "model missing: run node scripts/setup.mjs",
}, () => {
  const dirs: string[] = [];
  let reference: OpenedEngine;
  let stores: OpenedSqliteStores;
  let maintenance: StoreMaintenance;

  const ingested = async (): Promise<OpenedEngine> => {
    const dir = mkdtempSync(join(tmpdir(), "memory-store-maint-"));
    dirs.push(dir);
    const o = await openEmbeddedEngine(configOf(dir));
    for (const [conversation, turns] of [
      ["life", LIFE],
      ["travel", TRAVEL],
    ] as const) {
      await o.engine.ingest(TENANT, conversation, turns);
      await o.engine.flush(TENANT, conversation);
      await o.engine.drain();
    }
    return o;
  };

  before(async () => {
    reference = await ingested();
    // A second copy, closed, then opened by its stores alone as the query service opens them.
    const copy = await ingested();
    await copy.close();
    stores = openSqliteStores(configOf(dirs[1] as string));
    maintenance = new StoreMaintenance({ graph: stores.graph, vectors: stores.vectors, concurrency: 2 });
  });
  after(async () => {
    await stores?.close();
    await reference?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const all = async (list: (typeof stores)["graph"] | OpenedEngine["engine"]) =>
    (await list.listRecords(TENANT, { limit: 1000, includeSuperseded: true })).records;

  it("consolidates to the same report, versions and histories", async () => {
    const { ms: _a, ...expected } = await reference.engine.consolidate(TENANT);
    const { ms: _b, ...got } = await maintenance.consolidate(TENANT);
    assert.deepEqual(got, expected);
    assert.ok(got.superseded >= 3 && got.merged >= 2);
    const records = await all(stores.graph);
    assert.deepEqual(versions(records), versions(await all(reference.engine)));
    for (const r of records)
      assert.deepEqual(
        JSON.parse(JSON.stringify(await maintenance.history(TENANT, r.id))),
        JSON.parse(JSON.stringify(await reference.engine.history(TENANT, r.id))),
      );
    assert.equal(await maintenance.history("bob", (records[0] as MemoryRecord).id), undefined);
    assert.equal((await maintenance.consolidate(TENANT)).examined, 0, "a second run finds nothing to do");
  });

  it("erases a conversation, then the tenant, with the engine's store counts", async () => {
    const pick = ({
      records,
      turns,
      vectors,
      restored,
    }: {
      records: number;
      turns?: number;
      vectors: number;
      restored: number;
    }) => ({ records, turns, vectors, restored });
    const conv = await maintenance.erase(TENANT, "travel");
    assert.deepEqual(pick(conv), pick(await reference.engine.erase(TENANT, "travel")));
    assert.ok(conv.records > 0 && conv.vectors > 0);
    assert.deepEqual(versions(await all(stores.graph)), versions(await all(reference.engine)));
    assert.equal(await stores.graph.countRecords(TENANT, "travel"), 0);
    const tenant = await maintenance.erase(TENANT);
    assert.deepEqual(pick(tenant), pick(await reference.engine.erase(TENANT)));
    assert.equal(await stores.graph.countRecords(TENANT), 0);
    assert.equal(await stores.vectors.count(TENANT), 0);
  });
});
