// A list question about a speaker packs that speaker's own items first (services/query/own-words.ts).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { ownWordsFirst, speakersNamed } from "../../services/query/own-words.ts";
import { DEFAULT_QUERY_SETTINGS, runQuery } from "../../services/query/query.ts";
import { makeRecord, makeSegment, makeTurn } from "../contract/graph-store.contract.ts";
import { openLocalStores } from "../helpers/local-stores.ts";

const item = (id: string, ...speakers: string[]) => ({ id, speakers });

describe("own words first", () => {
  const ranked = [
    item("a", "Caroline"),
    item("b", "Melanie"),
    item("c", "Caroline", "Melanie"),
    item("d", "Caroline"),
    item("e", "Melanie"),
  ];

  it("finds the speakers a question names, as whole words in any case", () => {
    assert.deepEqual([...speakersNamed("What activities does Melanie partake in?", ranked)], ["Melanie"]);
    assert.deepEqual([...speakersNamed("what has melanie's family done?", ranked)], ["Melanie"]);
    // A name inside another word is not the name.
    assert.deepEqual([...speakersNamed("What did Melanies bring?", ranked)], []);
  });

  it("matches a name as written in a question written with capitals", () => {
    const items = [item("a", "Will"), item("b", "Melanie")];
    assert.deepEqual([...speakersNamed("What will Melanie do next summer?", items)], ["Melanie"]);
    assert.deepEqual([...speakersNamed("What has Will painted?", items)], ["Will"]);
    // Typed in lower case, every case matches: both named, so the order is kept.
    assert.deepEqual([...speakersNamed("what will melanie do?", items)].sort(), ["Melanie", "Will"]);
  });

  it("moves the named speaker's items ahead of the others, each part in its order", () => {
    assert.deepEqual(
      ownWordsFirst("What activities does Melanie partake in?", ranked).map((i) => i.id),
      ["b", "c", "e", "a", "d"],
    );
  });

  it("keeps the order when the question names both speakers or none", () => {
    const order = ranked.map((i) => i.id);
    assert.deepEqual(
      ownWordsFirst("What do Caroline and Melanie both like?", ranked).map((i) => i.id),
      order,
    );
    assert.deepEqual(
      ownWordsFirst("What do Jon's kids like?", ranked).map((i) => i.id),
      order,
    );
  });
});

describe("runQuery: a list question about a speaker", () => {
  let local: ReturnType<typeof openLocalStores>;
  const saidAt = (minute: number) => `2023-05-08T09:0${minute}:00.000Z`;
  // Caroline talks about activities in the question's own words; Melanie says what she did.
  const said: [string, string][] = [
    ["Caroline", "What activities does Melanie like? I like activities too, activities are fun."],
    ["Melanie", "I went camping with my kids."],
    ["Caroline", "Caroline loves outdoor activities and group activities."],
  ];

  before(async () => {
    local = openLocalStores("query-own-words-");
    const turns = said.map(([speaker, text], i) => ({ ...makeTurn(`t${i + 1}`, text, saidAt(i)), speaker }));
    const records = said.map(([speaker, text], i) => {
      const r = makeRecord("t", "c1", "seg-1", {
        text: `${speaker}: ${text}`,
        type: "event",
        entities: [speaker, ...(text.includes("Melanie") ? ["Melanie"] : [])],
        topics: [],
        saidAt: saidAt(i),
        turnIds: [`t${i + 1}`],
      });
      return { ...r, source: { ...r.source, speakers: [speaker] } };
    });
    await indexSegment({ ...local, candidates: false }, makeSegment("t", "c1", "seg-1", turns), records);
  });

  after(() => local.dispose());

  it("packs what the speaker said before what the other speaker said about the same words", async () => {
    const r = await runQuery(
      { graph: local.graph, vectors: local.vectors, embedder: local.embedder },
      "t",
      { question: "What activities does Melanie partake in?", conversation: "c1", budget: 2000, explain: true },
      { ...DEFAULT_QUERY_SETTINGS, now: () => new Date("2023-08-01T00:00:00.000Z") },
    );
    // The fusion ranks Caroline's lines first: they share the question's words.
    const firstFused = r.explain?.fused[0]?.text ?? "";
    assert.match(firstFused, /activities/);
    assert.equal(r.items[0]?.speakers.includes("Melanie"), true, JSON.stringify(r.items.map((i) => i.speakers)));
    assert.match(r.items[0]?.text ?? "", /camping/);
  });
});
