// A query process's warm-up (services/query/warm-up.ts): it runs the query path on an empty tenant
// of its own, only reads, never asks the configured planner (an LLM would bill the warm-up), and
// leaves every tenant's answers as they were.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { QueryPlanner } from "../../services/core/ports.ts";
import { DEFAULT_QUERY_SETTINGS, type QueryDeps, runQuery } from "../../services/query/query.ts";
import { QUERY_WARM_UP_PREFIX, warmUpQueries } from "../../services/query/warm-up.ts";
import { indexContractBatches, type LocalStores, openLocalStores } from "../helpers/local-stores.ts";

/** The port methods that change a store: none may be called by a warm-up. */
const WRITES = /^(write|upsert|put|delete|supersede|purge|merge|erase|flush|scrub|setStatus|markStatus|apply|record)/i;

/** The object, with the name of every method called on it recorded (tenant arguments too). */
const recording = <T extends object>(target: T, calls: { method: string; tenant: unknown }[]): T =>
  new Proxy(target, {
    get(obj, prop, receiver) {
      const value = Reflect.get(obj, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls.push({ method: String(prop), tenant: args[0] });
        return (value as (...a: unknown[]) => unknown).apply(obj, args);
      };
    },
  });

describe("warmUpQueries", () => {
  let local: ReturnType<typeof openLocalStores>;
  const settings = { ...DEFAULT_QUERY_SETTINGS, now: () => new Date("2023-08-01T00:00:00.000Z") };
  const question = { question: "What kinds of drinks does Caroline prefer?", conversation: "c1", budget: 500 };

  before(async () => {
    local = openLocalStores("query-warm-up-");
    await indexContractBatches(local, "t");
  });

  after(() => local.dispose());

  it("only reads, from one empty tenant of its own, and leaves answers as they were", async () => {
    const plain: LocalStores = local;
    const before = await runQuery(plain, "t", question, settings);
    const calls: { method: string; tenant: unknown }[] = [];
    const planner: QueryPlanner = {
      id: "llm-like",
      waitsOnModel: true,
      plan: () => {
        throw new Error("the warm-up asked the configured planner");
      },
    };
    const deps: QueryDeps = {
      graph: recording(local.graph, calls),
      vectors: recording(local.vectors, calls),
      embedder: local.embedder,
      planner,
    };
    const result = await warmUpQueries(deps, settings);
    assert.equal(result.queries, 3);
    assert.ok(result.ms >= 0);
    assert.ok(calls.length > 0, "the query path ran against the stores");
    assert.deepEqual(
      calls.filter((c) => WRITES.test(c.method)).map((c) => c.method),
      [],
      "no store method that writes was called",
    );
    const tenants = new Set(calls.map((c) => c.tenant).filter((t) => typeof t === "string"));
    assert.equal(tenants.size, 1, `one tenant asked: ${[...tenants].join(", ")}`);
    const [tenant] = [...tenants] as string[];
    assert.ok(tenant?.startsWith(QUERY_WARM_UP_PREFIX), tenant);
    assert.equal(await local.graph.countRecords(tenant as string), 0);
    assert.equal(await local.graph.countSegments(tenant as string), 0);
    const afterWarmUp = await runQuery(plain, "t", question, settings);
    assert.equal(afterWarmUp.context, before.context);
    assert.deepEqual(
      afterWarmUp.items.map((i) => i.id),
      before.items.map((i) => i.id),
    );
  });

  it("runs the second-opinion model's first forward pass too, when one is configured", async () => {
    const secondCalls: { method: string; tenant: unknown }[] = [];
    const deps: QueryDeps = {
      graph: local.graph,
      vectors: local.vectors,
      embedder: local.embedder,
      secondOpinion: { embedder: recording(local.embedder, secondCalls), weight: 4 },
    };
    await warmUpQueries(deps, settings);
    assert.equal(secondCalls.filter((c) => c.method === "embed").length, 3, "one question vector per warm-up query");
  });

  it("asks a fresh tenant each time", async () => {
    const calls: { method: string; tenant: unknown }[] = [];
    const deps = { ...local, graph: recording(local.graph, calls) };
    await warmUpQueries(deps, settings);
    await warmUpQueries(deps, settings);
    const tenants = new Set(calls.map((c) => c.tenant).filter((t) => typeof t === "string"));
    assert.equal(tenants.size, 2);
  });
});
