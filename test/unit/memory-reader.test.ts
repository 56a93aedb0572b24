// The one read side over the ports (services/query/memory-reader.ts): what the embedded engine and
// the distributed query service both answer with, over the SQLite graph store, HNSW vectors and the
// hashing embedder, filled by the indexer from the graph-store contract's records.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { HnswVectorStore } from "../../services/core/adapters/hnsw/vector-store.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite, type SqliteDatabase } from "../../services/core/adapters/sqlite-db.ts";
import { recordId } from "../../services/core/ids.ts";
import type { PlannerInput, QueryPlanner } from "../../services/core/ports.ts";
import type { QueryPlan, QueryResult } from "../../services/core/query-types.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { StoreQueryService } from "../../services/query/grpc-query-service.ts";
import { StoreMemoryReader, type StoreReaderDeps } from "../../services/query/memory-reader.ts";
import { DEFAULT_QUERY_SETTINGS } from "../../services/query/query.ts";
import { batchesFor } from "../contract/graph-store.contract.ts";

const A = "reader-a";
const B = "reader-b";
const PARIS = "Caroline moved to Paris in May 2023.";
const TRIP = "Melanie plans a trip to Paris from 2023-07-01 to 2023-07-14.";
const NOW = new Date("2023-08-01T00:00:00.000Z");

/** A query result without what depends on the clock (timings). */
const timeless = (r: QueryResult) => ({ ...r, cost: { ...r.cost, ms: 0, routeMs: {} } });

describe("StoreMemoryReader: the read side both runtimes share", () => {
  let dir: string;
  let db: SqliteDatabase;
  let deps: StoreReaderDeps;
  let reader: StoreMemoryReader;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "memory-reader-"));
    db = openSqlite(dir);
    const graph = new SqliteGraphStore(db);
    const vectors = new HnswVectorStore(db, dir);
    const embedder = new HashingEmbedder();
    for (const tenant of [A, B])
      for (const b of batchesFor(tenant))
        await indexSegment({ graph, vectors, embedder, candidates: false }, b.segment, b.records);
    deps = { graph, vectors, embedder, settings: { ...DEFAULT_QUERY_SETTINGS, now: () => NOW } };
    reader = new StoreMemoryReader(deps);
  });

  after(async () => {
    await deps.vectors.close();
    await deps.graph.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers a question from the asking tenant's records only, within the configured budget", async () => {
    const result = await reader.query(A, { question: "Where did Caroline move to?" });
    assert.equal(result.budget, DEFAULT_QUERY_SETTINGS.budget);
    assert.ok(result.contextTokens <= result.budget);
    const records = result.items.filter((i) => i.kind === "record").map((i) => i.id);
    assert.ok(records.includes(recordId(A, PARIS)), result.context);
    const own = new Set((await reader.listRecords(A, { limit: 100 })).records.map((r) => r.id));
    for (const id of records) assert.ok(own.has(id), `${id} is not tenant A's`);
    assert.match(result.context, /Paris/);
  });

  it("explains a query when asked: every route's hits, the fused order, the same result otherwise", async () => {
    const question = "Where did Caroline move to?";
    const plain = await reader.query(A, { question });
    assert.equal(plain.explain, undefined);
    const explained = await reader.query(A, { question, explain: true });
    const { explain, ...rest } = explained;
    assert.deepEqual(timeless(rest), timeless(plain));
    assert.ok(explain);
    const routes = explain.routes.map((r) => r.route);
    for (const route of ["dense", "lexical", "raw-dense", "raw-lexical", "event-frame"] as const)
      assert.ok(routes.includes(route), `${route} in ${routes}`);
    // Every packed item was a fused candidate, with the routes that found it and its fused score.
    const fused = new Map(explain.fused.map((f) => [f.id, f]));
    for (const item of explained.items) {
      const f = fused.get(item.id);
      assert.ok(f, item.id);
      assert.equal(f.score, item.fusedScore);
      assert.deepEqual(
        f.routes,
        item.routes.map((r) => r.route),
      );
      for (const r of item.routes)
        assert.equal(explain.routes.find((x) => x.route === r.route)?.hits[r.rank - 1]?.id, item.id);
    }
    const scores = explain.fused.map((f) => f.score);
    assert.deepEqual(
      scores,
      [...scores].sort((a, b) => b - a),
    );
  });

  it("keeps a query to the conversation it names", async () => {
    const result = await reader.query(A, { question: "Paris", conversation: "c2", budget: 500 });
    assert.equal(result.budget, 500);
    assert.ok(result.items.length > 0, "the trip is in c2");
    for (const item of result.items) assert.equal(item.conversation, "c2");
    assert.ok(result.items.some((i) => i.id === recordId(A, TRIP)));
  });

  it("lists the tenant's records with the filters passed through, and nothing for another tenant", async () => {
    const all = await reader.listRecords(A, { limit: 100 });
    assert.equal(all.records.length, 4);
    assert.ok(all.records.every((r) => r.source.tenant === A));
    const plans = await reader.listRecords(A, { limit: 100, type: "plan" });
    assert.deepEqual(
      plans.records.map((r) => r.text),
      [TRIP],
    );
    const c1 = await reader.listRecords(A, { limit: 100, conversation: "c1" });
    assert.equal(c1.records.length, 3);
    assert.deepEqual((await reader.listRecords("nobody", { limit: 100 })).records, []);
  });

  it("gets a record by id for its tenant only", async () => {
    const mine = await reader.getRecord(A, recordId(A, PARIS));
    assert.equal(mine?.text, PARIS);
    assert.equal(mine?.source.tenant, A);
    assert.equal(await reader.getRecord(B, recordId(A, PARIS)), undefined);
    assert.equal(await reader.getRecord(A, "no-such-record"), undefined);
  });

  it("plans with the planner it is given and books the planner's cost", async () => {
    const asked: PlannerInput[] = [];
    const plan: QueryPlan = {
      questionType: "single-hop",
      entities: ["Melanie"],
      topics: [],
      routes: ["dense", "lexical", "entity"],
      rewrites: ["sunrise painting"],
    };
    const planner: QueryPlanner = {
      id: "fixed",
      waitsOnModel: true,
      plan: async (input) => {
        asked.push(input);
        return { plan, cost: { llmCalls: 1, inputTokens: 20, outputTokens: 5 } };
      },
    };
    const result = await new StoreMemoryReader({ ...deps, planner }).query(A, { question: "What did Melanie paint?" });
    assert.equal(asked.length, 1);
    assert.equal(asked[0]?.question, "What did Melanie paint?");
    assert.deepEqual(asked[0]?.now, NOW);
    assert.deepEqual(result.plan, plan);
    assert.deepEqual([result.cost.llmCalls, result.cost.inputTokens, result.cost.outputTokens], [1, 20, 5]);
  });

  it("the distributed query service answers as the reader does (one implementation)", async () => {
    const service = new StoreQueryService({ ...deps, storeLabel: "sqlite (test)" });
    const req = { question: "What does Caroline prefer to drink?", budget: 300 };
    assert.deepEqual(timeless(await service.query(A, req)), timeless(await reader.query(A, req)));
    assert.deepEqual(await service.listRecords(A, { limit: 2 }), await reader.listRecords(A, { limit: 2 }));
    const id = recordId(A, PARIS);
    assert.deepEqual(await service.getRecord(A, id), await reader.getRecord(A, id));
  });
});
