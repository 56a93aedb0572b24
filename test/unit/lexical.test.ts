import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  anyTermQuery,
  lexicalTerms,
  lexicalText,
  MAX_QUERY_TERMS,
  queryTerms,
  rankBm25,
} from "../../services/core/lexical.ts";

const hit = (id: string, text: string, time = 0) => ({ id, lex: lexicalText(text).lex, time });

describe("lexical terms", () => {
  it("lower-cases, drops stop words and punctuation, stems English words, keeps other scripts whole", () => {
    assert.deepEqual(lexicalTerms("Where did Caroline's sisters go PAINTING?"), [
      "carolin",
      "s",
      "sister",
      "go",
      "paint",
    ]);
    assert.deepEqual(lexicalTerms("Où est Zoë, 2023?"), ["où", "est", "zoë", "2023"]);
    assert.deepEqual(lexicalTerms("what did she do?"), []);
    assert.deepEqual(lexicalText("painted paintings"), { lex: "paint paint", length: 2 });
  });

  it("makes a quoted OR query of distinct terms that user text cannot escape", () => {
    assert.equal(
      anyTermQuery(queryTerms('Où est "Zoë"? AND (tea* OR NEAR) -coffee ^:')),
      '"où" OR "est" OR "zoë" OR "tea" OR "near" OR "coffe"',
    );
    assert.equal(anyTermQuery(queryTerms("what did she do?")), undefined);
    assert.throws(() => anyTermQuery(['a" OR "b']), /not a term/);
    const many = Array.from({ length: 50 }, (_, i) => `w${i}`).join(" ");
    assert.equal(queryTerms(many).length, MAX_QUERY_TERMS);
    assert.deepEqual(queryTerms("tea tea Tea teas"), ["tea"]);
  });
});

describe("rankBm25", () => {
  it("computes Okapi BM25 with the non-negative IDF", () => {
    const hits = [hit("a", "tea tea garden"), hit("b", "coffee garden")];
    const scope = { items: 4, totalLength: 10 };
    const [a, b] = rankBm25(["tea", "garden"], hits, scope, 10);
    // tea: df 1, garden: df 2, N 4, avgdl 2.5; a: tf(tea) 2, dl 3; b: tf(garden) 1, dl 2.
    const idf = (df: number) => Math.log(1 + (4 - df + 0.5) / (df + 0.5));
    const tfPart = (f: number, dl: number) => (f * 2.2) / (f + 1.2 * (0.25 + (0.75 * dl) / 2.5));
    assert.equal(a?.id, "a");
    assert.ok(Math.abs((a?.score ?? 0) - (idf(1) * tfPart(2, 3) + idf(2) * tfPart(1, 3))) < 1e-12);
    assert.equal(b?.id, "b");
    assert.ok(Math.abs((b?.score ?? 0) - idf(2) * tfPart(1, 2)) < 1e-12);
  });

  it("breaks ties by newer time, then id; drops non-matching hits; honours k", () => {
    const hits = [
      hit("c", "tea", 1),
      hit("b", "tea", 2),
      hit("a", "tea", 1),
      hit("x", "coffee", 9),
      hit("b", "tea", 2),
    ];
    const scope = { items: 10, totalLength: 10 };
    assert.deepEqual(
      rankBm25(["tea"], hits, scope, 10).map((h) => h.id),
      ["b", "a", "c"],
    );
    assert.deepEqual(
      rankBm25(["tea"], hits, scope, 2).map((h) => h.id),
      ["b", "a"],
    );
    assert.deepEqual(rankBm25(["tea"], hits, scope, 0), []);
    assert.deepEqual(rankBm25([], hits, scope, 5), []);
  });

  it("gives the same scores whatever order the store returns the hits in", () => {
    const hits = [hit("a", "red apple pie"), hit("b", "apple"), hit("c", "pie pie crust"), hit("d", "red red red")];
    const scope = { items: 7, totalLength: 20 };
    const forward = rankBm25(queryTerms("red apple pie"), hits, scope, 10);
    const backward = rankBm25(queryTerms("red apple pie"), [...hits].reverse(), scope, 10);
    assert.deepEqual(backward, forward);
    assert.equal(forward.length, 4);
  });
});
