/**
 * The second opinion (services/query/second-opinion.ts): the indexer stores a second model's vector
 * of every record and raw turn beside the first model's, of the same text; the query orders its
 * fused candidates by it and fuses that order in as one more list. Hashing embedders of another
 * dimension stand in for the two models (the real bge model: test/e2e/second-opinion.test.ts).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { turnRowId } from "../../services/core/ids.ts";
import type { Embedder, EmbedderStats } from "../../services/core/ports.ts";
import type { Segment } from "../../services/core/types.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { indexRawTurns } from "../../services/indexer/raw-turns.ts";
import { DEFAULT_QUERY_SETTINGS, runQuery } from "../../services/query/query.ts";
import { type OpinionCandidate, secondOpinionList } from "../../services/query/second-opinion.ts";
import { batchesFor } from "../contract/graph-store.contract.ts";
import { indexContractBatches, withLocalStores } from "../helpers/local-stores.ts";

const SECOND_DIM = 48;

/** A hashing embedder of the second model's dimension that keeps the texts of each call. */
class Recording extends HashingEmbedder {
  readonly calls: string[][] = [];
  constructor() {
    super(SECOND_DIM);
  }
  override async embed(texts: readonly string[]): Promise<Float32Array[]> {
    this.calls.push([...texts]);
    return super.embed(texts);
  }
}

const reference = new HashingEmbedder(SECOND_DIM);
const vectorOf = async (text: string): Promise<Float32Array> => (await reference.embed([text]))[0] as Float32Array;

const arriving = (tenant: string, segment: Segment) =>
  segment.turns.map((t) => ({ ...t, tenant, conversation: segment.conversation }));

describe("indexer: the second model's vectors beside the first's", () => {
  it("every record and raw turn gets the second model's vector of the text the first model embedded", async () => {
    await withLocalStores("second-opinion-index-", async (s) => {
      const second = new Recording();
      const batches = batchesFor("t");
      for (const b of batches) {
        await indexSegment({ ...s, secondEmbedder: second, candidates: false }, b.segment, b.records);
      }
      for (const b of batches) {
        const want = new Map<string, string>([
          ...b.records.map((r) => [r.id, r.text] as const),
          ...b.segment.turns.map(
            (t) => [turnRowId(b.segment.conversation, t.turnId), `${t.speaker}: ${t.text}`] as const,
          ),
        ]);
        const got = await s.vectors.getSecondVectors("t", [...want.keys()]);
        assert.equal(got.size, want.size);
        for (const [id, text] of want) assert.deepEqual(got.get(id), await vectorOf(text), id);
      }
      // The first model's vectors are the first model's, not the second's.
      const [first] = await s.vectors.get("t", [batches[0]?.records[0]?.id as string]);
      assert.equal(first?.vector.length, s.embedder.dimension);
    });
  });

  it("a raw turn written on arrival carries its vector, and its segment's close does not embed it again", async () => {
    await withLocalStores("second-opinion-raw-", async (s) => {
      const second = new Recording();
      const b = batchesFor("t")[0];
      assert.ok(b);
      await indexRawTurns({ ...s, secondEmbedder: second }, arriving("t", b.segment));
      const rows = b.segment.turns.map((t) => turnRowId(b.segment.conversation, t.turnId));
      assert.equal((await s.vectors.getSecondVectors("t", rows)).size, rows.length);
      second.calls.length = 0;
      await indexSegment({ ...s, secondEmbedder: second, candidates: false }, b.segment, b.records);
      assert.deepEqual(
        second.calls.flat(),
        b.records.map((r) => r.text),
        "only the records' texts are embedded at the segment's close",
      );
    });
  });

  it("a turn stored without one (written before the setting was on) gets one at its segment's close", async () => {
    await withLocalStores("second-opinion-late-", async (s) => {
      const b = batchesFor("t")[0];
      assert.ok(b);
      await indexRawTurns(s, arriving("t", b.segment));
      const rows = b.segment.turns.map((t) => turnRowId(b.segment.conversation, t.turnId));
      assert.equal((await s.vectors.getSecondVectors("t", rows)).size, 0);
      await indexSegment({ ...s, secondEmbedder: new Recording(), candidates: false }, b.segment, b.records);
      assert.equal((await s.vectors.getSecondVectors("t", rows)).size, rows.length);
    });
  });
});

/**
 * A second model that knows two directions: texts naming the word (and the question, when one is
 * given), and everything else.
 */
class Pointing implements Embedder {
  readonly id = "pointing";
  readonly dimension = 2;
  readonly calls: string[][] = [];
  constructor(
    private readonly word: RegExp,
    private readonly question?: string,
  ) {}
  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    this.calls.push([...texts]);
    return texts.map((t) => Float32Array.from(this.word.test(t) || t === this.question ? [1, 0] : [0, 1]));
  }
  stats(): EmbedderStats {
    return { calls: this.calls.length, texts: this.calls.flat().length, ms: 0 };
  }
}

const candidate = (id: string, text: string, kind: "record" | "turn" = "record"): OpinionCandidate => ({
  id,
  kind,
  text,
  speakers: ["Ana"],
});

describe("secondOpinionList", () => {
  const question = Promise.resolve(Float32Array.from([1, 0]));

  it("orders the candidates by the second model's cosine, stored vectors first, the rest embedded as indexed", async () => {
    const embedder = new Pointing(/tea/);
    const stored = new Map([["r2", Float32Array.from([1, 0])]]);
    const { list, embeddedHere } = await secondOpinionList(
      { embedder, weight: 4 },
      { getSecondVectors: async (_t, ids) => new Map([...stored].filter(([id]) => ids.includes(id))) },
      "t",
      question,
      [candidate("r1", "coffee"), candidate("r2", "anything"), candidate("c::t3", "I drink tea", "turn")],
    );
    assert.equal(list.route, "second-opinion");
    assert.equal(list.weight, 4);
    // r2 by its stored vector, the turn by its text, r1 last; ties keep the order given.
    assert.deepEqual(
      list.ids.map((h) => h.id),
      ["r2", "c::t3", "r1"],
    );
    assert.equal(embeddedHere, 2);
    assert.deepEqual(embedder.calls, [["coffee", "Ana: I drink tea"]]);
  });

  it("embeds every candidate where the store keeps no second vectors, and ranks a vector of another dimension last", async () => {
    const embedder = new Pointing(/tea/);
    const { list } = await secondOpinionList({ embedder, weight: 1 }, {}, "t", question, [
      candidate("a", "water"),
      candidate("b", "tea"),
    ]);
    assert.deepEqual(
      list.ids.map((h) => h.id),
      ["b", "a"],
    );
    const odd = await secondOpinionList(
      { embedder, weight: 1 },
      { getSecondVectors: async () => new Map([["b", Float32Array.from([1, 0, 0])]]) },
      "t",
      question,
      [candidate("b", "tea"), candidate("a", "water")],
    );
    assert.deepEqual(
      odd.list.ids.map((h) => h.id),
      ["a", "b"],
    );
  });
});

describe("runQuery with a second opinion", () => {
  const settings = { ...DEFAULT_QUERY_SETTINGS, now: () => new Date("2023-08-01T00:00:00.000Z") };
  const QUESTION = "Where did Caroline move to?";

  it("fuses the second model's order in: it moves the item it ranks first up, and says so in the routes and costs", async () => {
    await withLocalStores("second-opinion-query-", async (s) => {
      await indexContractBatches(s, "t");
      const req = { question: QUESTION, conversation: "c1", budget: 500, explain: true };
      const without = await runQuery(s, "t", req, settings);
      const tea = (text: string) => /tea/.test(text);
      assert.ok(!tea(without.items[0]?.text ?? ""), "without it the tea record is not first");
      assert.ok(without.items.every((i) => i.routes.every((r) => r.route !== "second-opinion")));

      // The question points where the tea texts point: the second model ranks them first.
      const opinion = { embedder: new Pointing(/tea/, QUESTION), weight: 50 };
      const withIt = await runQuery({ ...s, secondOpinion: opinion }, "t", req, settings);
      assert.ok(tea(withIt.items[0]?.text ?? ""), `first item: ${withIt.items[0]?.text}`);
      assert.ok(withIt.items.every((i) => i.routes.some((r) => r.route === "second-opinion")));
      assert.ok(withIt.explain?.routes.some((r) => r.route === "second-opinion"));
      // The question's second vector, and the candidates' (the hashing stores hold none).
      assert.equal(withIt.cost.embeddingCalls, without.cost.embeddingCalls + 2);
      assert.deepEqual(
        new Set(withIt.items.map((i) => i.id)),
        new Set(without.items.map((i) => i.id)),
        "the same candidates, ordered again",
      );
    });
  });
});
