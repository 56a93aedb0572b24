// The consolidator service (services/consolidator/main.ts) against real Kafka, schema registry and
// Neo4j. One embedded-engine ingest (the consolidation scenarios of test/e2e/consolidation.test.ts)
// writes every store write to SQLite and, the same call, to Neo4j (as store-parity.test.ts does), so
// both hold the same records and update candidates. The candidates go to the update-queue topic as
// the indexer produces them (key: record id). Then:
//  (b) a service whose window excludes now pauses its partitions: nothing is consumed or applied;
//  (a) a service whose window includes now is SIGKILLed inside its third decision's transaction,
//      then restarted: the final Neo4j graph equals an uninterrupted run (runConsolidation on the
//      SQLite copy, the embedded runtime's path); (c) that restart is the trigger that applies them;
//  and a second consumer group re-reading the whole topic changes nothing.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import type { Admin, Kafka } from "kafkajs";
import { runConsolidation } from "../../../services/consolidator/consolidator.ts";
import type { ConsolidationReport } from "../../../services/consolidator/types.ts";
import { fetchGroupOffsets, groupLag } from "../../../services/consolidator/upstream.ts";
import { HnswVectorStore } from "../../../services/core/adapters/hnsw/vector-store.ts";
import { ensurePipelineTopics, kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import {
  RegistrySerdes,
  SCHEMA_FILES,
  type UpdateCandidatesEvent,
  UpdateCandidatesEventSchema,
} from "../../../services/core/adapters/kafka/serde.ts";
import { openDriver } from "../../../services/core/adapters/neo4j/driver.ts";
import { Neo4jGraphStore } from "../../../services/core/adapters/neo4j/graph-store.ts";
import { Neo4jVectorStore } from "../../../services/core/adapters/neo4j/vector-store.ts";
import { loadOnnxEmbedder } from "../../../services/core/adapters/onnx/embedder.ts";
import { SqliteGraphStore } from "../../../services/core/adapters/sqlite/graph-store.ts";
import { SqliteStateStore } from "../../../services/core/adapters/sqlite/state-store.ts";
import { openSqlite } from "../../../services/core/adapters/sqlite-db.ts";
import { CachingEmbedder } from "../../../services/core/caching-embedder.ts";
import { type Config, loadConfig } from "../../../services/core/config.ts";
import { loadLocomo } from "../../../services/core/datasets/locomo.ts";
import type { GraphStore, VectorStore } from "../../../services/core/ports.ts";
import type { TurnInput } from "../../../services/core/requests.ts";
import type { UpdateCandidate } from "../../../services/core/types.ts";
import { DurableLog } from "../../../services/embedded/durable-log.ts";
import { EmbeddedEngine } from "../../../services/embedded/engine.ts";
import { EMBEDDER_DIR, engineSettingsFrom } from "../../../services/embedded/open.ts";
import { ExtractiveEncoder } from "../../../services/encoder/encode-segment.ts";
import { StatisticalCompressor } from "../../../services/sensory/statistical-compressor.ts";
import { LIFE, TRAVEL } from "../../helpers/consolidation-scenario.ts";
import { neo4jConnection } from "../../helpers/neo4j-env.ts";
import { runPrefix, testConfig, until } from "../pipeline/helpers.ts";
import { cleanUp, LOCOMO, MODEL_DIR, type Proc, ROOT, sharedEnv, skip, spawnLogged, waitStarted } from "./helpers.ts";

const modelMissing = !existsSync(join(MODEL_DIR, EMBEDDER_DIR, "model.onnx"));

const WRITES = new Set(["writeBatch", "putUpdateCandidates", "transact", "putDeadLetter", "deleteTenant", "upsert"]);

/** `primary` with every write also applied, after it, to `mirror` (as store-parity.test.ts). */
const mirrored = <T extends object>(primary: T, mirror: T): T =>
  new Proxy(primary, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      const own = (value as (...a: unknown[]) => unknown).bind(target);
      if (!WRITES.has(String(prop))) return own;
      return async (...args: unknown[]) => {
        const out = await own(...args);
        await (Reflect.get(mirror, prop, mirror) as (...a: unknown[]) => Promise<unknown>).apply(mirror, args);
        return out;
      };
    },
  });

/** Everything consolidation may change, comparable across stores. */
const dump = async (graph: GraphStore, tenant: string) => {
  const records = (await graph.listRecords(tenant, { limit: 1000, includeSuperseded: true })).records;
  const relations = await graph.relationsOf(
    tenant,
    records.map((r) => r.id),
  );
  return {
    records: records
      .map((r) => ({ id: r.id, text: r.text, valid: r.valid, mergedSources: r.mergedSources ?? [] }))
      .sort((a, b) => (a.id < b.id ? -1 : 1)),
    relations: relations
      .map((r) => ({ from: r.from, to: r.to, relation: r.relation, at: r.at }))
      .sort((a, b) => `${a.from}${a.to}${a.relation}`.localeCompare(`${b.from}${b.to}${b.relation}`)),
    pending: await graph.countPendingCandidates(tenant),
  };
};

/** "HH:MM-HH:MM" (UTC) from `fromMin` to `toMin` minutes after now (wrapping past midnight). */
const windowFromNow = (fromMin: number, toMin: number): string => {
  const now = new Date();
  const base = now.getUTCHours() * 60 + now.getUTCMinutes();
  const hhmm = (m: number): string => {
    const x = (((base + m) % 1440) + 1440) % 1440;
    return `${String(Math.floor(x / 60)).padStart(2, "0")}:${String(x % 60).padStart(2, "0")}`;
  };
  return `${hhmm(fromMin)}-${hhmm(toMin)}`;
};

const metricValue = (text: string, name: string): number =>
  text
    .split("\n")
    .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);

interface Ingest {
  tenant: string;
  conversation: string;
  turns: TurnInput[];
}

/** Kafka topics, one mirrored ingest (SQLite + Neo4j) and its update-queue entries on the topic. */
interface Prepared {
  config: Config;
  kafka: Kafka;
  admin: Admin;
  topic: string;
  sqliteGraph: SqliteGraphStore;
  neoGraph: Neo4jGraphStore;
  /** The update-queue entries produced, by tenant. */
  events: Map<string, UpdateCandidatesEvent[]>;
  close(tenants: readonly string[]): Promise<void>;
}

const prepare = async (prefix: string, ingests: readonly Ingest[]): Promise<Prepared> => {
  const config = testConfig(prefix, { MEMORY_STORE: "neo4j" });
  const kafka = kafkaClient(config, "c13svc-test");
  const admin = kafka.admin();
  await admin.connect();
  const topic = (await ensurePipelineTopics(kafka, config)).updateQueue;
  const dir = mkdtempSync(join(tmpdir(), "c13svc-"));
  const engineConfig = loadConfig(
    { dataDir: dir, modelDir: MODEL_DIR, consolidation: { window: "", idleMinutes: 0 } },
    {},
  );
  const embedder = await loadOnnxEmbedder(join(MODEL_DIR, EMBEDDER_DIR));
  const db = openSqlite(dir);
  const sqliteGraph = new SqliteGraphStore(db);
  const hnsw = new HnswVectorStore(db, dir);
  const { driver } = openDriver(neo4jConnection());
  const neoGraph = await Neo4jGraphStore.open({ driver });
  const neoVectors = new Neo4jVectorStore({ driver });
  await neoVectors.ensureSchema();
  const engine = new EmbeddedEngine(
    {
      log: new DurableLog(db),
      graph: mirrored<GraphStore>(sqliteGraph, neoGraph),
      vectors: mirrored<VectorStore>(hnsw, neoVectors),
      state: new SqliteStateStore(db),
      embedder: new CachingEmbedder(embedder),
      compressor: new StatisticalCompressor(),
      encoder: new ExtractiveEncoder(),
    },
    engineSettingsFrom(engineConfig),
  );
  await engine.start();
  for (const { tenant, conversation, turns } of ingests) {
    for (let i = 0; i < turns.length; i += 20) await engine.ingest(tenant, conversation, turns.slice(i, i + 20));
    await engine.flush(tenant, conversation);
  }
  await engine.drain();
  await engine.close();

  // The update-queue entries, as the indexer produces them: one per record, key = record id.
  const events = new Map<string, UpdateCandidatesEvent[]>();
  for (const tenant of new Set(ingests.map((x) => x.tenant))) {
    const pending: UpdateCandidate[] = await neoGraph.pendingUpdateCandidates(tenant, 100_000);
    const byRecord = new Map<string, UpdateCandidate[]>();
    for (const c of pending) byRecord.set(c.recordId, [...(byRecord.get(c.recordId) ?? []), c]);
    events.set(
      tenant,
      [...byRecord].map(([recordId, candidates]) => ({ recordId, tenant, candidates })),
    );
  }
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const codec = await serdes.codec(topic, SCHEMA_FILES.updateQueue, UpdateCandidatesEventSchema);
  const producer = kafka.producer({ idempotent: true });
  await producer.connect();
  await producer.send({
    topic,
    messages: await Promise.all(
      [...events.values()].flat().map(async (e) => ({ key: e.recordId, value: await codec.encode(e) })),
    ),
  });
  await producer.disconnect();
  await serdes.close();
  return {
    config,
    kafka,
    admin,
    topic,
    sqliteGraph,
    neoGraph,
    events,
    close: async (tenants) => {
      await admin.disconnect().catch(() => undefined);
      db.close();
      await driver.close();
      await embedder.close();
      await cleanUp(kafka, prefix, tenants);
      rmSync(dir, { recursive: true, force: true });
    },
  };
};

/** Consolidator processes of one run prefix, and what the tests read of them. */
const services = (prefix: string, get: () => Prepared) => {
  const procs: Proc[] = [];
  return {
    procs,
    spawn: (name: string, extra: Record<string, string>): Proc => {
      const env = {
        ...sharedEnv(prefix, {}),
        MEMORY_CONSOLIDATION_IDLE_MINUTES: "0",
        MEMORY_CONSOLIDATION_CHECK_INTERVAL_MS: "200",
        ...extra,
      };
      const p = spawnLogged(name, ["--import", "tsx", join(ROOT, "services/consolidator/main.ts")], ROOT, env);
      procs.push(p);
      return p;
    },
    stop: async (p: Proc): Promise<void> => {
      if (!p.exited) p.child.kill("SIGTERM");
      await until(`${p.name} exited`, () => p.exited, 60_000);
    },
    killAll: async (): Promise<void> => {
      for (const p of procs) if (!p.exited) p.child.kill("SIGKILL");
      await until("every consolidator exited", () => procs.every((p) => p.exited), 30_000);
    },
    scrape: async (p: Proc): Promise<string> => (await fetch(new URL("/metrics", String(p.started?.metrics)))).text(),
    lagOf: async (group: string): Promise<number> =>
      (await groupLag(get().admin, `${prefix}${group}`, get().topic, 0)).reduce((a, p) => a + p.lag, 0),
    committedAny: async (group: string): Promise<boolean> => {
      const [c] = await fetchGroupOffsets(get().admin, `${prefix}${group}`, get().topic);
      return (c?.partitions ?? []).some((p) => Number(p.offset) >= 0);
    },
    /** Polls the group's lag on the update queue until it is 0. */
    drained: async (group: string, ms: number): Promise<void> => {
      const end = Date.now() + ms;
      for (;;) {
        const lag = (await groupLag(get().admin, `${prefix}${group}`, get().topic, 0)).reduce((a, p) => a + p.lag, 0);
        if (lag === 0) return;
        assert.ok(Date.now() < end, `group ${group}: lag still ${lag} after ${ms} ms`);
        await new Promise((r) => setTimeout(r, 300));
      }
    },
  };
};

const logged = (p: Proc, msg: string): Record<string, unknown>[] =>
  p.log.flatMap((l) => {
    try {
      const e = JSON.parse(l) as Record<string, unknown>;
      return e.msg === msg ? [e] : [];
    } catch {
      return [];
    }
  });

const counts = (r: Pick<ConsolidationReport, "merged" | "superseded" | "linked" | "unchanged" | "dropped">) => ({
  merged: r.merged,
  superseded: r.superseded,
  linked: r.linked,
  unchanged: r.unchanged,
  dropped: r.dropped,
});

describe("consolidator service (real Kafka, registry, Neo4j)", {
  skip: skip || (modelMissing && "model missing"),
}, () => {
  const prefix = runPrefix("c13svc");
  const tenant = `c13svc-${randomUUID().slice(0, 8)}`;
  let prep: Prepared;
  let events: UpdateCandidatesEvent[] = [];
  let reference: Awaited<ReturnType<typeof dump>>;
  let referenceReport: ConsolidationReport;
  let sqliteGraph: SqliteGraphStore;
  let neoGraph: Neo4jGraphStore;
  const svc = services(prefix, () => prep);
  const { spawn: spawnConsolidator, stop: stopProc, scrape, lagOf, committedAny } = svc;

  afterEach(() => svc.killAll());

  before(async () => {
    prep = await prepare(prefix, [
      { tenant, conversation: "life", turns: LIFE },
      { tenant, conversation: "travel", turns: TRAVEL },
    ]);
    ({ sqliteGraph, neoGraph } = prep);
    events = prep.events.get(tenant) ?? [];
    // The uninterrupted reference: the embedded runtime's consolidation over the SQLite copy.
    referenceReport = await runConsolidation({ graph: sqliteGraph }, { tenant, concurrency: 4 });
    reference = await dump(sqliteGraph, tenant);
  });

  after(async () => {
    await svc.killAll().catch(() => undefined);
    await prep?.close([tenant]);
  });

  it("the ingest queued candidates in both stores and on the topic; nothing is consolidated yet", async () => {
    assert.ok(events.length >= 4, `only ${events.length} records with candidates`);
    assert.ok(referenceReport.merged + referenceReport.superseded + referenceReport.linked >= 3, "scenarios decide");
    const before = await dump(neoGraph, tenant);
    assert.ok(before.pending > 0);
    assert.ok(before.records.every((r) => r.valid.to === undefined));
    assert.deepEqual(before.relations, []);
    assert.equal(await lagOf("memory-consolidator"), events.length);
  });

  it("(b) off-peak: with a window that excludes now the partitions stay paused and nothing is applied", async () => {
    const before = await dump(neoGraph, tenant);
    const p = spawnConsolidator("consolidator-offpeak", { MEMORY_CONSOLIDATION_WINDOW: windowFromNow(120, 180) });
    await waitStarted([p], 120_000);
    assert.equal(p.started?.consuming, false);
    // Twenty evaluations of the triggers (200 ms apart) with the partitions paused.
    const end = Date.now() + 120_000;
    let metrics = "";
    for (;;) {
      metrics = await scrape(p);
      if (metricValue(metrics, "memory_consolidation_gate_checks_total") >= 20) break;
      assert.ok(Date.now() < end, "the gate was not checked 20 times in 120 s");
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(metricValue(metrics, "memory_consolidation_window_open"), 0);
    assert.equal(metricValue(metrics, "memory_consolidation_runs_total"), 0);
    // The gauge leaves out one offset per partition for the indexer's transaction markers; this
    // test's producer writes none, so it reads at most the number of entries.
    assert.ok(metricValue(metrics, "memory_consumer_lag") > 0, "its lag gauge shows the waiting work");
    assert.equal(await committedAny("memory-consolidator"), false, "nothing consumed");
    assert.deepEqual(await dump(neoGraph, tenant), before, "nothing applied");
    assert.deepEqual(logged(p, "consolidated"), []);
    await stopProc(p);
  });

  it("(a)+(c) a window that includes now applies them; SIGKILLed mid-run and restarted, it ends as an uninterrupted run", async () => {
    const window = windowFromNow(-60, 60);
    const queued = await dump(neoGraph, tenant);
    const crashed = spawnConsolidator("consolidator-crash", {
      MEMORY_CONSOLIDATION_WINDOW: window,
      MEMORY_CONSOLIDATOR_CRASH_AT_DECISION: "2",
    });
    await until("the consolidator to SIGKILL itself", () => crashed.exited, 180_000);
    assert.equal(crashed.child.signalCode, "SIGKILL", crashed.log.slice(-10).join("\n"));
    const mid = await dump(neoGraph, tenant);
    const total = (await dump(sqliteGraph, tenant)).records.length;
    assert.ok(mid.pending > 0, "the crash left candidates pending");
    // Every committed decision settles its candidates, whether it changed a record or found them unrelated.
    assert.ok(mid.pending < queued.pending, "decisions before the crash committed");
    assert.equal(mid.records.length, total);
    assert.equal(await committedAny("memory-consolidator"), false, "no offset committed before the decisions");

    const restarted = spawnConsolidator("consolidator-restart", { MEMORY_CONSOLIDATION_WINDOW: window });
    await waitStarted([restarted], 120_000);
    await until(
      "the restarted consolidator to commit the whole queue",
      () => logged(restarted, "consolidated").length > 0,
      180_000,
    );
    const end = Date.now() + 180_000;
    while ((await lagOf("memory-consolidator")) > 0) {
      assert.ok(Date.now() < end, `lag still ${await lagOf("memory-consolidator")}`);
      await new Promise((r) => setTimeout(r, 300));
    }
    const final = await dump(neoGraph, tenant);
    assert.deepEqual(final, reference);
    const metrics = await scrape(restarted);
    assert.ok(metricValue(metrics, "memory_consolidation_runs_total") >= 1);
    assert.ok(metricValue(metrics, "memory_consolidation_last_run_timestamp_seconds") > 0);
    const runs = logged(restarted, "consolidated");
    const sum = (k: string) => runs.reduce((a, r) => a + Number(r[k] ?? 0), 0);
    console.log(
      `# reference ${JSON.stringify({ merged: referenceReport.merged, superseded: referenceReport.superseded, linked: referenceReport.linked, unchanged: referenceReport.unchanged })}; ` +
        `after the crash the restart decided ${JSON.stringify({ merged: sum("merged"), superseded: sum("superseded"), linked: sum("linked"), runs: runs.length })}`,
    );
    await stopProc(restarted);
  });

  it("running it again (a second consumer group reading the whole queue) changes nothing", async () => {
    const before = await dump(neoGraph, tenant);
    const p = spawnConsolidator("consolidator-again", {
      MEMORY_CONSOLIDATION_WINDOW: windowFromNow(-60, 60),
      MEMORY_CONSOLIDATOR_GROUP: "memory-consolidator-again",
    });
    await waitStarted([p], 120_000);
    const end = Date.now() + 180_000;
    while ((await lagOf("memory-consolidator-again")) > 0) {
      assert.ok(Date.now() < end, "the second group did not read the queue");
      await new Promise((r) => setTimeout(r, 300));
    }
    const runs = logged(p, "consolidated");
    assert.ok(runs.length >= 1);
    for (const r of runs) assert.equal(r.examined, 0, JSON.stringify(r));
    assert.deepEqual(await dump(neoGraph, tenant), before);
    await stopProc(p);
    const again = await runConsolidation({ graph: neoGraph }, { tenant });
    assert.equal(again.examined, 0);
  });
});

// LoCoMo conversations (one tenant each) through the consolidator service: the same consolidation
// as the embedded runtime's, record for record; the counts are printed for the notes. `npm test`
// runs conv-30 (CI time); LOCOMO_CONVS=conv-26,conv-30 runs both (issue 13's figures).
const LOCOMO_IDS: readonly string[] = (process.env.LOCOMO_CONVS ?? "conv-30").split(",");
describe(`consolidator service on LoCoMo ${LOCOMO_IDS.join(" / ")} equals the embedded runtime`, {
  skip: skip || (modelMissing && "model missing") || (!existsSync(LOCOMO) && `${LOCOMO} not found`),
}, () => {
  const prefix = runPrefix("c13loc");
  const run = randomUUID().slice(0, 8);
  const tenantOf = (id: string) => `c13loc-${id}-${run}`;
  let prep: Prepared;
  const svc = services(prefix, () => prep);

  before(async () => {
    const convs = loadLocomo(LOCOMO).filter((c) => LOCOMO_IDS.includes(c.id));
    assert.equal(convs.length, LOCOMO_IDS.length);
    prep = await prepare(
      prefix,
      convs.map((c) => ({ tenant: tenantOf(c.id), conversation: c.id, turns: c.turns })),
    );
  });

  after(async () => {
    await svc.killAll().catch(() => undefined);
    await prep?.close(LOCOMO_IDS.map(tenantOf));
  });

  it("consolidates every tenant of the queue as runConsolidation does on the SQLite copy", async () => {
    const p = svc.spawn("consolidator-locomo", { MEMORY_CONSOLIDATION_WINDOW: windowFromNow(-60, 60) });
    await waitStarted([p], 120_000);
    const started = Date.now();
    await svc.drained("memory-consolidator", 600_000);
    const serviceMs = Date.now() - started;
    await svc.stop(p);
    for (const id of LOCOMO_IDS) {
      const tenant = tenantOf(id);
      const distributed = await dump(prep.neoGraph, tenant);
      const runs = logged(p, "consolidated").filter((r) => r.tenant === tenant);
      const sum = (k: string) => runs.reduce((a, r) => a + Number(r[k] ?? 0), 0);
      const t0 = performance.now();
      const embedded = await runConsolidation({ graph: prep.sqliteGraph }, { tenant, concurrency: 4 });
      const embeddedMs = performance.now() - t0;
      assert.deepEqual(distributed, await dump(prep.sqliteGraph, tenant), id);
      const service = {
        merged: sum("merged"),
        superseded: sum("superseded"),
        linked: sum("linked"),
        unchanged: sum("unchanged"),
        dropped: sum("dropped"),
      };
      assert.deepEqual(service, counts(embedded), `${id}: the service's counts`);
      console.log(
        `# ${id}: ${distributed.records.length} records, ${prep.events.get(tenant)?.length ?? 0} with candidates; ` +
          `embedded ${JSON.stringify(counts(embedded))} in ${Math.round(embeddedMs)} ms; ` +
          `service ${JSON.stringify(service)} in ${runs.length} run(s); queue drained in ${serviceMs} ms (all tenants)`,
      );
    }
  });
});
