// The time route (services/query/query.ts): a window that holds more records than the route reads
// is searched by similarity within it, not sampled by the tightest dates; a window that holds
// nearly all of what the question matches adds no list; a question asked as of a moment reads the
// versions valid then.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { MemoryRecord, Segment } from "../../services/core/types.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { DEFAULT_QUERY_SETTINGS, runQuery } from "../../services/query/query.ts";
import { openLocalStores } from "../helpers/local-stores.ts";
import { recordOf, segmentOf, segmentTurnOf } from "../helpers/stage-fixtures.ts";

const TENANT = "acme";
/** Each route keeps 2 hits, so the time route reads 2 × 5 = 10 records of its window. */
const settings = { ...DEFAULT_QUERY_SETTINGS, routeDepth: 2, now: () => new Date("2024-06-01T00:00:00.000Z") };

const sam = { name: "Sam", kind: "person" as const, aliases: [] };

/** A segment of one day whose records are `texts`; `dated`: each record with an event time of that day. */
const dayOf = (conversation: string, day: string, texts: readonly string[], dated: boolean) => {
  const at = `${day}T09:00:00.000Z`;
  const segment: Segment = segmentOf(
    `seg-${conversation}-${day}`,
    texts.map((t, i) => segmentTurnOf(`${day}-${i}`, t, at)),
    TENANT,
    conversation,
  );
  const records: MemoryRecord[] = texts.map((text, i) => ({
    ...recordOf(segment, { text, entities: [sam], topics: [], turnIds: [`${day}-${i}`], saidAt: at }),
    ...(dated ? { time: { at } } : {}),
  }));
  return { segment, records };
};

describe("runQuery: the time route", () => {
  let local: ReturnType<typeof openLocalStores>;

  before(async () => {
    local = openLocalStores("query-time-route-");
    const index = (d: ReturnType<typeof dayOf>) => indexSegment({ ...local, candidates: false }, d.segment, d.records);
    // Conversation "years": where Sam lived, said in 2022 and 2023; in 2020 a dozen records with an
    // event time of their own (the tightest dates, which a read sorted by tightness takes first)
    // and the one that answers, dated only by when it was said.
    await index(dayOf("years", "2022-04-02", ["Sam lived in Lisbon by the sea.", "Sam lived in Madrid."], false));
    await index(dayOf("years", "2023-03-05", ["Sam lived in Berlin for work.", "Sam lived in Rome."], false));
    await index(
      dayOf(
        "years",
        "2020-02-01",
        Array.from({ length: 12 }, (_, i) => `Sam bought groceries on errand ${i}.`),
        true,
      ),
    );
    await index(dayOf("years", "2020-07-09", ["Sam lived in Porto by the river."], false));
    // Conversation "one-year": everything in 2020.
    await index(
      dayOf("one-year", "2020-05-01", ["Sam lived in Oslo.", "Sam lived in Bergen.", "Sam likes fjords."], false),
    );
  });

  after(() => local.dispose());

  const ask = (question: string, conversation: string) =>
    runQuery(
      { graph: local.graph, vectors: local.vectors, embedder: local.embedder },
      TENANT,
      { question, conversation, budget: 2000, explain: true },
      settings,
    );
  const timeHits = (r: Awaited<ReturnType<typeof ask>>) =>
    (r.explain?.routes ?? []).filter((x) => x.route === "time").flatMap((x) => x.hits.map((h) => h.id));

  it("searches a window that holds more than it reads by similarity within it", async () => {
    const r = await ask("Where did Sam live in 2020?", "years");
    assert.deepEqual(r.plan.timeWindow, { from: "2020-01-01T00:00:00.000Z", to: "2020-12-31T23:59:59.999Z" });
    const porto = r.items.find((i) => i.text.includes("Porto"));
    assert.ok(porto, `the 2020 answer is in the context: ${r.context}`);
    const hits = timeHits(r);
    assert.ok(hits.includes(porto.id), `the time route found it: ${hits.join(", ")}`);
    // Every hit lies in the window: the records' ids of 2020 and the raw turns of 2020.
    const in2020 = new Set([...r.items.filter((i) => i.date.startsWith("2020")).map((i) => i.id)]);
    for (const id of hits.filter((h) => r.items.some((i) => i.id === h))) assert.ok(in2020.has(id), id);
  });

  it("adds no time list for a window that holds nearly all the question matches", async () => {
    const r = await ask("Where did Sam live in 2020?", "one-year");
    assert.ok(r.plan.routes.includes("time"), "planned");
    assert.deepEqual(timeHits(r), [], "but the window narrows nothing");
    assert.ok(r.items.some((i) => i.text.includes("Oslo")));
  });
});
