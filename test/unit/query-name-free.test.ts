// Questions that collect mentions of a person (lists, counts, inferences) are matched once more
// without the names found in nearly every record (services/query/name-free.ts, query.ts).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { contentQuestion, withoutNames } from "../../services/query/name-free.ts";
import { collectsMentions, isAggregation, isInference } from "../../services/query/planner.ts";
import { DEFAULT_QUERY_SETTINGS, type QueryDeps, runQuery } from "../../services/query/query.ts";
import { batchesFor } from "../contract/graph-store.contract.ts";
import { indexContractBatches, openLocalStores } from "../helpers/local-stores.ts";

describe("name-free question text", () => {
  it("blanks whole-word names and their possessive, case-insensitively", () => {
    assert.equal(withoutNames("What are Alice's hobbies?", ["Alice"]), "What are hobbies?");
    assert.equal(
      withoutNames("Which towns have alice and Bob both seen?", ["Alice", "Bob"]),
      "Which towns have and both seen?",
    );
    // A name inside another word is not the name.
    assert.equal(withoutNames("What did Alicent bring?", ["Alice"]), "What did Alicent bring?");
  });

  it("gives no content question when no name is in it or nothing else is", () => {
    assert.equal(contentQuestion("What pets does Bob keep?", []), undefined);
    assert.equal(contentQuestion("What pets does Bob keep?", ["Carol"]), undefined);
    assert.equal(contentQuestion("Bob?", ["Bob"]), undefined);
    assert.equal(contentQuestion("What pets does Bob keep?", ["Bob"]), "What pets does keep?");
  });
});

describe("questions that collect mentions", () => {
  it("recognises lists, counts, 'ever' and the present perfect", () => {
    for (const q of [
      "What kinds of music does Dana listen to?",
      "How many bikes does Eli own?",
      "Has Fay ever been to Japan?",
      "Where has Gus worked?",
      "Which languages has Hal studied?",
      "What sports does Ivy play?",
      "What LGBTQ+ events has Jay attended?",
      "Which small towns did Kai visit?",
      "What do Lou and Mo both enjoy?",
      "What do Lou and Mo have in common?",
      "What do Nia's kids like?",
      "What does Oz do to relax?",
    ])
      assert.ok(isAggregation(q), q);
  });

  it("recognises inferences about a person", () => {
    assert.ok(isInference("Would Jo enjoy a cooking class?"));
    assert.ok(isInference("What might Kim choose for a holiday?"));
  });

  it("leaves single facts and dates alone", () => {
    for (const q of [
      "Where did Lee move to?",
      "When did Max start his job?",
      "What is Ned's job?",
      "Who is Ola's sister?",
      "What new shoe did Pam buy yesterday?",
      "What colour is Rio's new car?",
      "What does Sam's tattoo mean?",
    ])
      assert.equal(collectsMentions(q), false, q);
  });
});

describe("runQuery: the similarity routes once more without common names", () => {
  let local: ReturnType<typeof openLocalStores>;
  let deps: QueryDeps;
  const settings = { ...DEFAULT_QUERY_SETTINGS, now: () => new Date("2023-08-01T00:00:00.000Z") };

  before(async () => {
    local = openLocalStores("query-name-free-");
    await indexContractBatches(local, "t");
    deps = { graph: local.graph, vectors: local.vectors, embedder: local.embedder };
  });

  after(() => local.dispose());

  const denseRuns = (routes: readonly { route: string }[]) => routes.filter((r) => r.route === "dense").length;

  it("adds name-free dense and raw-dense lists for a list question naming a common name, one among the records naming the person", async () => {
    // Caroline is in two of conversation c1's three records: too common to select by.
    const r = await runQuery(
      deps,
      "t",
      { question: "What kinds of drinks does Caroline prefer?", conversation: "c1", budget: 500, explain: true },
      settings,
    );
    // The question and its name-free form go to the embedder in one call.
    assert.equal(r.cost.embeddingCalls, 1);
    // As asked, name-free, name-free among Caroline's records (checked below), and the name-free one moved
    // by feedback (query-feedback.test.ts).
    assert.equal(denseRuns(r.explain?.routes ?? []), 4);
    assert.equal(r.explain?.routes.filter((l) => l.route === "raw-dense").length, 2);
    assert.equal(
      r.explain?.routes.some((l) => l.route === "entity"),
      false,
    );
    assert.match(r.context, /tea/);
    const caroline = batchesFor("t")
      .filter((b) => b.conversation === "c1")
      .flatMap((b) => b.records)
      .filter((rec) => rec.entities.some((e) => e.name === "Caroline"))
      .map((rec) => rec.id)
      .sort();
    // c1 holds three records, two of them naming Caroline: one dense list holds those two alone.
    assert.equal(caroline.length, 2);
    const lists = (r.explain?.routes ?? [])
      .filter((l) => l.route === "dense")
      .map((l) => l.hits.map((h) => h.id).sort());
    assert.equal(lists.filter((ids) => JSON.stringify(ids) === JSON.stringify(caroline)).length, 1);
  });

  it("asks once for a question about a single fact", async () => {
    const r = await runQuery(
      deps,
      "t",
      { question: "Where did Caroline move to?", conversation: "c1", budget: 500, explain: true },
      settings,
    );
    assert.equal(r.cost.embeddingCalls, 1);
    // The question as asked, and once more moved by feedback; no name-free pair.
    assert.equal(denseRuns(r.explain?.routes ?? []), 2);
    assert.equal(r.explain?.routes.filter((l) => l.route === "raw-dense").length, 1);
    assert.match(r.context, /Paris/);
  });

  it("tests a key's selectivity by a count capped at the threshold + 1, not by reading its matches", async () => {
    const graph = deps.graph;
    const caps: [string, string, number][] = [];
    const entityReads: number[] = [];
    const counting: QueryDeps = {
      ...deps,
      graph: Object.assign(Object.create(graph) as typeof graph, {
        countRecordsByKey: (...a: Parameters<typeof graph.countRecordsByKey>) => {
          caps.push([a[1], a[2], a[3]]);
          return graph.countRecordsByKey(...a);
        },
        recordsByEntities: (...a: Parameters<typeof graph.recordsByEntities>) => {
          entityReads.push(a[2]);
          return graph.recordsByEntities(...a);
        },
      }),
    };
    const r = await runQuery(
      counting,
      "t",
      { question: "When did Caroline go to Paris?", conversation: "c1", budget: 500, explain: true },
      settings,
    );
    // Three records in c1: a key in more than max(1, floor(3 * 0.3)) = 1 of them is common.
    assert.deepEqual(caps.filter(([index]) => index === "entity").sort(), [
      ["entity", "Caroline", 2],
      ["entity", "Paris", 2],
    ]);
    // The entity route reads by the selective key (Paris) alone, at the route's depth.
    assert.deepEqual(entityReads, [DEFAULT_QUERY_SETTINGS.routeDepth * 5]);
    assert.equal(
      r.explain?.routes.some((l) => l.route === "entity"),
      true,
    );
  });

  it("asks once when the name is no known entity (nothing to leave out)", async () => {
    const r = await runQuery(
      deps,
      "t",
      { question: "What kinds of drinks does Zed prefer?", conversation: "c1", budget: 500, explain: true },
      settings,
    );
    assert.equal(r.cost.embeddingCalls, 1);
    // The question as asked, and once more moved by feedback; no name-free pair.
    assert.equal(denseRuns(r.explain?.routes ?? []), 2);
    assert.equal(r.explain?.routes.filter((l) => l.route === "raw-dense").length, 1);
  });
});
