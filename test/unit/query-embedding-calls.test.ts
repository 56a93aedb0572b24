// When and how the query embeds its texts (services/query/query.ts): a planner that waits on a
// model has the question embedded while it plans; one that waits on nothing has the question and
// its name-free form embedded after planning, in one call. Either way the graph routes read the
// store while the texts are embedded.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import type { GraphStore, PlannerInput, QueryPlanner } from "../../services/core/ports.ts";
import { DeterministicPlanner } from "../../services/query/planner.ts";
import { DEFAULT_QUERY_SETTINGS, type QueryDeps, runQuery } from "../../services/query/query.ts";
import { indexContractBatches, openLocalStores } from "../helpers/local-stores.ts";

/** The hashing embedder, keeping the texts of each call. */
class RecordingEmbedder extends HashingEmbedder {
  readonly calls: string[][] = [];

  override async embed(texts: readonly string[]): Promise<Float32Array[]> {
    this.calls.push([...texts]);
    return super.embed(texts);
  }
}

/** The deterministic planner's plans under another planner's flag; notes the embed calls made before it planned. */
const planning = (waitsOnModel: boolean, embedder: RecordingEmbedder) => {
  const inner = new DeterministicPlanner();
  const callsWhenPlanning: number[] = [];
  const planner: QueryPlanner = {
    id: waitsOnModel ? "model-like" : "local",
    waitsOnModel,
    plan: (input: PlannerInput) => {
      callsWhenPlanning.push(embedder.calls.length);
      return inner.plan(input);
    },
  };
  return { planner, callsWhenPlanning };
};

// Caroline is in two of conversation c1's three records: a list question about her is matched
// once more without her name too (name-free.ts).
const LIST_QUESTION = "What kinds of drinks does Caroline prefer?";
const NAME_FREE = "What kinds of drinks does prefer?";

describe("runQuery: when the question is embedded", () => {
  let local: ReturnType<typeof openLocalStores>;
  let stores: Omit<QueryDeps, "embedder">;
  const settings = { ...DEFAULT_QUERY_SETTINGS, now: () => new Date("2023-08-01T00:00:00.000Z") };
  const ask = (deps: QueryDeps, question: string) =>
    runQuery(deps, "t", { question, conversation: "c1", budget: 500 }, settings);

  before(async () => {
    local = openLocalStores("query-embedding-calls-");
    await indexContractBatches(local, "t");
    stores = { graph: local.graph, vectors: local.vectors };
  });

  after(() => local.dispose());

  it("with the deterministic planner: after planning, both texts in one call", async () => {
    const embedder = new RecordingEmbedder();
    await ask({ ...stores, embedder }, LIST_QUESTION);
    assert.deepEqual(embedder.calls, [[LIST_QUESTION, NAME_FREE]]);
  });

  it("treats any planner that waits on no model like the deterministic one", async () => {
    const embedder = new RecordingEmbedder();
    const { planner, callsWhenPlanning } = planning(false, embedder);
    await ask({ ...stores, embedder, planner }, LIST_QUESTION);
    assert.deepEqual(callsWhenPlanning, [0], "nothing embedded before the plan");
    assert.deepEqual(embedder.calls, [[LIST_QUESTION, NAME_FREE]]);
  });

  it("embeds the question while a planner that waits on a model plans", async () => {
    const embedder = new RecordingEmbedder();
    const { planner, callsWhenPlanning } = planning(true, embedder);
    await ask({ ...stores, embedder, planner }, LIST_QUESTION);
    assert.deepEqual(callsWhenPlanning, [1], "the question's embedding was asked for before the plan");
    assert.deepEqual(embedder.calls, [[LIST_QUESTION], [NAME_FREE]]);
  });

  it("reports in cost.embeddingCalls the calls the embedder got, not the texts", async () => {
    // A list question (two texts), a single fact (one text), a list question with a misspelt name
    // (the question embedded with the name corrected, and its name-free form).
    const questions = [LIST_QUESTION, "Where did Caroline move to?", "What kinds of drinks does Carolyn prefer?"];
    const calls: Record<string, number[]> = {};
    for (const waitsOnModel of [undefined, false, true]) {
      const label = waitsOnModel === undefined ? "deterministic" : `waitsOnModel ${waitsOnModel}`;
      calls[label] = [];
      for (const question of questions) {
        const embedder = new RecordingEmbedder();
        const planner = waitsOnModel === undefined ? {} : { planner: planning(waitsOnModel, embedder).planner };
        const r = await ask({ ...stores, embedder, ...planner }, question);
        assert.equal(r.cost.embeddingCalls, embedder.calls.length, `${question} (${label})`);
        calls[label]?.push(r.cost.embeddingCalls);
      }
    }
    assert.deepEqual(calls, {
      deterministic: [1, 1, 1],
      "waitsOnModel false": [1, 1, 1],
      // The early call with the question as asked, then the name-free form; with a corrected name
      // the early vector goes unused and the corrected question is embedded too.
      "waitsOnModel true": [2, 1, 3],
    });
  });

  it("reads the graph routes' keys while the question is embedded, and answers as when it waited", async () => {
    // The embedding resolves a macrotask later, as a worker thread's answer does; every store read
    // the graph routes make before it resolves ran during the embedding.
    let resolved = 0;
    class LateEmbedder extends HashingEmbedder {
      override async embed(texts: readonly string[]): Promise<Float32Array[]> {
        const vectors = await super.embed(texts);
        await new Promise<void>((resolve) => setImmediate(resolve));
        resolved++;
        return vectors;
      }
    }
    const readsBeforeVectors: string[] = [];
    const graph = new Proxy(stores.graph, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          if (resolved === 0) readsBeforeVectors.push(String(key));
          return value.apply(target, args);
        };
      },
    }) as GraphStore;
    const question = "When did Caroline go to the support group in May 2023?";
    const late = await ask({ ...stores, graph, embedder: new LateEmbedder() }, question);
    for (const route of ["searchRecordsLexical", "searchTurnsLexical", "recordsInTime"])
      assert.ok(readsBeforeVectors.includes(route), `${route} read before the vectors came: ${readsBeforeVectors}`);
    const waited = await ask({ ...stores, embedder: new HashingEmbedder() }, question);
    assert.equal(late.context, waited.context);
    assert.deepEqual(
      late.items.map((i) => i.id),
      waited.items.map((i) => i.id),
    );
  });
});
