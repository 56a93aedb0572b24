// Store parity (real Neo4j): one embedded-engine ingest of LoCoMo conv-30 whose every store write
// goes to SQLite + HNSW and, the same call, to the Neo4j graph and vector stores. Every conv-30
// question is then asked of both store pairs: each retrieval route must return the same ids in
// the same order (lexical scores bit-equal: one BM25, services/core/lexical.ts), and the packed
// context must be the same text. This isolates the stores from the Kafka pipeline, which
// parity.test.ts checks end to end.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { HnswVectorStore } from "../../../services/core/adapters/hnsw/vector-store.ts";
import { openDriver } from "../../../services/core/adapters/neo4j/driver.ts";
import { Neo4jGraphStore } from "../../../services/core/adapters/neo4j/graph-store.ts";
import { Neo4jVectorStore } from "../../../services/core/adapters/neo4j/vector-store.ts";
import { loadOnnxEmbedder } from "../../../services/core/adapters/onnx/embedder.ts";
import { SqliteGraphStore } from "../../../services/core/adapters/sqlite/graph-store.ts";
import { SqliteStateStore } from "../../../services/core/adapters/sqlite/state-store.ts";
import { openSqlite } from "../../../services/core/adapters/sqlite-db.ts";
import { CachingEmbedder } from "../../../services/core/caching-embedder.ts";
import { loadConfig } from "../../../services/core/config.ts";
import { loadLocomo } from "../../../services/core/datasets/locomo.ts";
import type { GraphStore, ScoredId, VectorStore } from "../../../services/core/ports.ts";
import { DurableLog } from "../../../services/embedded/durable-log.ts";
import { EmbeddedEngine } from "../../../services/embedded/engine.ts";
import { EMBEDDER_DIR, engineSettingsFrom } from "../../../services/embedded/open.ts";
import { ExtractiveEncoder } from "../../../services/encoder/encode-segment.ts";
import { DeterministicPlanner } from "../../../services/query/planner.ts";
import { DEFAULT_QUERY_SETTINGS, runQuery } from "../../../services/query/query.ts";
import { StatisticalCompressor } from "../../../services/sensory/statistical-compressor.ts";
import { neo4jConnection, neo4jSkip } from "../../helpers/neo4j-env.ts";
import { LOCOMO, MODEL_DIR } from "./helpers.ts";

const skip =
  neo4jSkip ||
  (!existsSync(join(MODEL_DIR, EMBEDDER_DIR, "model.onnx"))
    ? "embedder model missing: npm run setup"
    : !existsSync(LOCOMO)
      ? `${LOCOMO} not found`
      : false);

const WRITES = new Set([
  "writeBatch",
  "putUpdateCandidates",
  // The consolidation and erasure rules run over transact: the mirror runs the same rule on its own data.
  "transact",
  "putDeadLetter",
  "deleteTenant",
  "upsert",
  "delete",
]);

/** `primary` with every write also applied, after it, to `mirror`; reads go to `primary` only. */
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

test("SQLite + HNSW and Neo4j rank every route and pack every context identically (conv-30)", { skip }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "store-parity-"));
  const tenant = `store-parity-${randomUUID().slice(0, 8)}`;
  const config = loadConfig({ dataDir: dir, modelDir: MODEL_DIR }, {});
  const embedder = await loadOnnxEmbedder(join(MODEL_DIR, EMBEDDER_DIR));
  const db = openSqlite(dir);
  const sqliteGraph = new SqliteGraphStore(db);
  const hnsw = new HnswVectorStore(db, dir);
  const { driver } = openDriver(neo4jConnection());
  const neoGraph = await Neo4jGraphStore.open({ driver });
  const neoVectors = new Neo4jVectorStore({ driver });
  await neoVectors.ensureSchema();
  const conv = loadLocomo(LOCOMO).find((c) => c.id === "conv-30");
  assert.ok(conv, "conv-30 in the dev data");
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
    engineSettingsFrom(config),
  );
  try {
    await engine.start();
    for (let i = 0; i < conv.turns.length; i += 20) await engine.ingest(tenant, conv.id, conv.turns.slice(i, i + 20));
    await engine.flush(tenant, conv.id);
    await engine.drain();
    const records = await sqliteGraph.countRecords(tenant);
    assert.ok(records > 100, `conv-30 gave ${records} records`);
    assert.equal(await neoGraph.countRecords(tenant), records);

    const sqlite = { graph: sqliteGraph, vectors: hnsw };
    const neo = { graph: neoGraph, vectors: neoVectors };
    const embed = new CachingEmbedder(embedder);
    const planner = new DeterministicPlanner();
    const settings = { ...DEFAULT_QUERY_SETTINGS, now: () => new Date("2024-01-01T00:00:00.000Z") };
    const depth = settings.routeDepth;
    const differing: string[] = [];
    let routeLists = 0;
    for (const q of conv.questions) {
      const req = { question: q.question, conversation: conv.id, budget: 1000 };
      const a = await runQuery({ ...sqlite, embedder: embed, planner }, tenant, req, settings);
      const b = await runQuery({ ...neo, embedder: embed, planner }, tenant, req, settings);
      if (a.context !== b.context) differing.push(`context of "${q.question}"`);
      const [qv] = await embed.embed([q.question]);
      const text = [q.question, ...a.plan.rewrites].join(" ");
      const scope = { conversation: conv.id };
      const routes: [string, (s: { graph: GraphStore; vectors: VectorStore }) => Promise<ScoredId[]>, boolean][] = [
        ["dense", (s) => s.vectors.search(tenant, qv as Float32Array, depth, { ...scope, kind: "record" }), false],
        ["raw-dense", (s) => s.vectors.search(tenant, qv as Float32Array, depth, { ...scope, kind: "turn" }), false],
        ["lexical", (s) => s.graph.searchRecordsLexical(tenant, text, depth, conv.id), true],
        ["raw-lexical", (s) => s.graph.searchTurnsLexical(tenant, text, depth, conv.id), true],
        ["entity", (s) => s.graph.recordsByEntities(tenant, a.plan.entities, 5 * depth, conv.id), true],
        ["topic", (s) => s.graph.recordsByTopics(tenant, a.plan.topics, 5 * depth, conv.id), true],
      ];
      // The dense search among the records naming a person (a list question's person list, query.ts).
      for (const person of a.plan.entities.slice(0, 1))
        routes.push([
          `dense naming ${person}`,
          (s) => s.vectors.search(tenant, qv as Float32Array, depth, { ...scope, kind: "record", entities: [person] }),
          false,
        ]);
      for (const [route, run, sameScores] of routes) {
        const [x, y] = [await run(sqlite), await run(neo)];
        routeLists++;
        const same = sameScores
          ? JSON.stringify(x.map((h) => [h.id, h.score])) === JSON.stringify(y.map((h) => [h.id, h.score]))
          : x.map((h) => h.id).join() === y.map((h) => h.id).join();
        if (!same) differing.push(`${route} of "${q.question}"`);
      }
    }
    t.diagnostic(`${conv.questions.length} questions, ${routeLists} route lists, ${records} records`);
    assert.deepEqual(differing, []);
  } finally {
    await engine.close();
    await neoGraph.deleteTenant(tenant);
    await neoVectors.deleteTenant(tenant);
    await neoVectors.close();
    await neoGraph.close();
    await driver.close();
    await hnsw.close();
    await sqliteGraph.close();
    db.close();
    await embedder.close?.();
    rmSync(dir, { recursive: true, force: true });
  }
});
