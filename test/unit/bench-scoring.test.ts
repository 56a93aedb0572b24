import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Bm25Index, bm25Query, denseRank, recentFirst } from "../../services/bench/baselines.ts";
import { locomoCases } from "../../services/bench/datasets.ts";
import { type BenchTurn, greedyPack, renderTurnLine, turnUnits, windows } from "../../services/bench/pack.ts";
import { assertEncoder, parseBudgets } from "../../services/bench/run.ts";
import {
  aggregateByCategory,
  answerCoverage,
  contentTerms,
  evidenceRecall,
  percentile,
  perThousandTokens,
  recall,
  sessionRecall,
  sourceStripper,
  targetsFound,
} from "../../services/bench/scoring.ts";
import { markdownTable } from "../../services/bench/table.ts";
import { loadConfig } from "../../services/core/config.ts";
import { cleanEvidence, LocomoFileSchema, toConversation } from "../../services/core/datasets/locomo.ts";
import { countTokens } from "../../services/core/tokens.ts";
import { type PackInput, packContext } from "../../services/query/pack.ts";

const turn = (i: number, session = "s1", text = `turn number ${i} about topic ${i % 3}`): BenchTurn => ({
  turnId: `D1:${i}`,
  speaker: i % 2 === 0 ? "Alice" : "Bob",
  text,
  timestamp: new Date(Date.UTC(2023, 4, 8, 13, 0, i * 30)).toISOString(),
  sessionId: session,
});

describe("evidence recall", () => {
  it("is the share of evidence ids among the context's turn ids", () => {
    const items = [{ turnIds: ["D1:1", "D1:2"] }, { turnIds: ["D2:5"] }];
    assert.equal(evidenceRecall(["D1:2", "D2:5"], items), 1);
    assert.equal(evidenceRecall(["D1:2", "D3:1"], items), 0.5);
    assert.equal(evidenceRecall(["D3:1"], []), 0);
  });

  it("is undefined (left out, not 0 or 1) when there is no evidence", () => {
    assert.equal(evidenceRecall([], [{ turnIds: ["D1:1"] }]), undefined);
    assert.equal(recall([], new Set()), undefined);
  });

  it("counts a duplicated evidence id once", () => {
    assert.equal(recall(["D1:1", "D1:1", "D1:2"], new Set(["D1:1"])), 0.5);
  });

  it("survives the dataset's malformed evidence strings once cleaned", () => {
    const ids = cleanEvidence(["D8:6; D9:17", "D", "D:11:26", " D1:3 ", "D8:6"]);
    assert.deepEqual(ids, ["D8:6", "D9:17", "D1:3"]);
    assert.equal(evidenceRecall(ids, [{ turnIds: ["D9:17", "D1:3"] }]), 2 / 3);
    assert.equal(evidenceRecall(cleanEvidence(["D", "D:11:26"]), [{ turnIds: ["D1:1"] }]), undefined);
  });

  it("maps turns to sessions for session recall", () => {
    const sessionOf = new Map([
      ["a:0", "a"],
      ["a:1", "a"],
      ["b:0", "b"],
    ]);
    assert.equal(sessionRecall(["a", "c"], ["a:0", "a:1"], sessionOf), 0.5);
    assert.equal(sessionRecall(["a", "b"], ["a:1", "b:0", "unknown"], sessionOf), 1);
    assert.equal(sessionRecall([], ["a:0"], sessionOf), undefined);
  });
});

describe("answer coverage", () => {
  it("stems, lower-cases and drops stop words and a possessive 's", () => {
    assert.deepEqual([...contentTerms("The Painting of Caroline's sunsets")].sort(), ["carolin", "paint", "sunset"]);
    assert.deepEqual([...contentTerms("I'm sure that they'd go")], []);
  });

  it("is the share of the answer's content words found in the context", () => {
    assert.equal(answerCoverage("painting and swimming", "Melanie said she paints and swims often"), 1);
    assert.equal(answerCoverage("pottery, camping", "She went camping with the kids"), 0.5);
    assert.equal(answerCoverage("Sweden", "She moved from Norway"), 0);
  });

  it("matches numbers without leading zeros, so an ISO date meets a spelled-out day", () => {
    assert.equal(answerCoverage("7 May 2023", "[2023-05-07] Caroline: hi"), 1);
    assert.equal(answerCoverage("3", "[2023-05-07] three kids"), 0);
  });

  it("leaves a packed context's sources out, in every form they are written, and keeps its text", () => {
    const at = "2023-05-08T10:00:00Z";
    const record = (n: number, text: string, turnIds = [`D1:${n}`]): PackInput => ({
      kind: "record",
      id: `r${n}`,
      text,
      date: at,
      conversation: "conv-26",
      turnIds,
      speakers: ["Ana"],
      routes: [],
      fusedScore: 0,
      session: "session_1",
      saidAt: at,
    });
    const { context } = packContext(
      [
        record(31, "Ana has 2 cats.", ["D1:31", "D1:32"]),
        record(33, "Ana adopted them in 2019."),
        record(34, "Ana lives in flat 12."),
        { ...record(47, "Ben visited Ana."), session: "session_2", saidAt: "2023-06-01T10:00:00Z", turnIds: ["D2:47"] },
      ],
      500,
    );
    // The compact forms are there: a header's prefix note and citations under it, and a range.
    assert.match(context, /\(D1:…\):$/m);
    assert.match(context, /\[…31-32\]$/m);
    const strip = sourceStripper(["conv-26", "D1:31", "D1:32", "D1:33", "D1:34", "D2:47"]);
    const terms = contentTerms(strip(context));
    // (The headers' dates hold 1, 5, 6 and 8; the cited numbers are none of them.)
    for (const cited of ["31", "32", "33", "34", "47", "d1", "d2", "26"])
      assert.ok(!terms.has(cited), `"${cited}" is left out`);
    for (const said of ["2", "2019", "12", "cat", "flat"]) assert.ok(terms.has(said), `"${said}" is kept`);
  });

  it("strips only the ids from a baseline's lines: a turn's own bracketed text at a line end stays", () => {
    const line = "[2023-05-08] Ana: look at this D1:3 [shared a photo: a red kayak on the lake]";
    const baseline = sourceStripper(["conv-26", "D1:3"], { lineCitations: false });
    const terms = contentTerms(baseline(line));
    for (const said of ["kayak", "lake", "photo"]) assert.ok(terms.has(said), `"${said}" is kept`);
    assert.ok(!terms.has("d1"), "the id goes");
    // Our lines end with their citation, after the turn's own text: only the citation goes.
    const ours = sourceStripper(["conv-26", "D1:3"]);
    const oursTerms = contentTerms(ours("Ana: look at this [shared a photo: a red kayak] [D1:3]"));
    assert.ok(oursTerms.has("kayak") && !oursTerms.has("d1"));
  });

  it("is undefined (left out) when the answer has no content word", () => {
    assert.equal(answerCoverage("Yes, they would", "anything"), undefined);
    assert.equal(answerCoverage("", "anything"), undefined);
  });

  it("accepts a precomputed term set for a context scored many times", () => {
    assert.equal(answerCoverage("sunsets", contentTerms("a sunset painting")), 1);
  });

  it("counts targets found and turns per 1,000 tokens as a ratio of sums", () => {
    assert.equal(targetsFound(["D1:1", "D1:1", "D2:3", "D9:9"], new Set(["D1:1", "D2:3"])), 2);
    assert.equal(perThousandTokens(3, 1500), 2);
    assert.equal(perThousandTokens(3, 0), undefined);
  });
});

describe("LoCoMo questions as bench cases", () => {
  const sample = LocomoFileSchema.parse([
    {
      sample_id: "conv-x",
      conversation: {
        speaker_a: "Alice",
        speaker_b: "Bob",
        session_1_date_time: "1:56 pm on 8 May, 2023",
        session_1: [
          { speaker: "Alice", dia_id: "D1:1", text: "I moved to Lisbon in 2022." },
          { speaker: "Bob", dia_id: "D1:2", text: "Nice!" },
        ],
      },
      qa: [
        { question: "When did Alice move?", answer: 2022, evidence: ["D1:1"], category: 2 },
        { question: "Where?", answer: "Lisbon", evidence: ["D1:1; D1:2"], category: 1 },
        { question: "Bob's cat?", adversarial_answer: "none", evidence: ["D1:2"], category: 5 },
        { question: "Broken evidence", answer: "x", evidence: ["D", "D:11:26"], category: 4 },
      ],
    },
  ]);
  const { spec, cases } = locomoCases(sample.map(toConversation));

  it("skips category 5 and keeps categories 1-4", () => {
    assert.deepEqual(
      cases[0]?.questions.map((q) => q.category),
      ["2", "1", "4"],
    );
    assert.equal(spec.skipped[0]?.count, 1);
  });

  it("turns integer answers into strings and splits joined evidence", () => {
    assert.equal(cases[0]?.questions[0]?.answer, "2022");
    assert.deepEqual(cases[0]?.questions[1]?.targets.evidence?.ids, ["D1:1", "D1:2"]);
    assert.deepEqual(cases[0]?.questions[2]?.targets.evidence?.ids, []);
  });
});

describe("aggregation and percentiles", () => {
  it("averages per category and overall (macro over questions), skipping questions with no evidence", () => {
    const agg = aggregateByCategory(
      [
        { category: "1", value: 1 },
        { category: "1", value: 0 },
        { category: "2", value: 0.5 },
        { category: "2", value: undefined },
      ],
      ["1", "2", "3"],
    );
    assert.equal(agg.byCategory["1"]?.mean, 0.5);
    assert.equal(agg.byCategory["2"]?.mean, 0.5);
    assert.equal(agg.byCategory["2"]?.skipped, 1);
    assert.equal(agg.byCategory["3"]?.mean, undefined);
    assert.equal(agg.byCategory["3"]?.n, 0);
    assert.equal(agg.overall.mean, 0.5);
    assert.equal(agg.overall.n, 3);
  });

  it("interpolates percentiles between closest ranks", () => {
    const v = [10, 1, 9, 2, 8, 3, 7, 4, 6, 5];
    assert.equal(percentile(v, 50), 5.5);
    assert.ok(Math.abs((percentile(v, 95) ?? 0) - 9.55) < 1e-9);
    assert.equal(percentile(v, 0), 1);
    assert.equal(percentile(v, 100), 10);
    assert.equal(percentile([42], 95), 42);
    assert.equal(percentile([], 50), undefined);
    assert.throws(() => percentile(v, 101), RangeError);
  });
});

describe("greedy packing of baseline lines", () => {
  const turns = Array.from({ length: 40 }, (_, i) =>
    turn(i, i < 23 ? "s1" : "s2", `${"word ".repeat((i * 7) % 31)}item ${i}`),
  );
  const units = turnUnits(turns);

  it("renders '[date] speaker: text' lines", () => {
    assert.equal(renderTurnLine(turn(2)), "[2023-05-08] Alice: turn number 2 about topic 2");
  });

  it("never exceeds the budget, whatever the order and mode", () => {
    const orders = [units, [...units].reverse(), recentFirst(units), windows(turns, 5)];
    for (const ranked of orders)
      for (const budget of [1, 5, 17, 50, 123, 400, 1000, 100_000])
        for (const mode of ["skip", "stop"] as const) {
          const p = greedyPack(ranked, budget, mode);
          assert.ok(p.tokens <= budget, `${p.tokens} > ${budget}`);
          assert.equal(p.tokens, countTokens(p.context));
        }
  });

  it("skips a unit that does not fit in skip mode and stops in stop mode", () => {
    const big = { id: "big", seq: 0, turns: [turn(0, "s1", "lorem ipsum ".repeat(200))] };
    const small = { id: "small", seq: 1, turns: [turn(1)] };
    assert.deepEqual(greedyPack([big, small], 100, "skip").turnIds, ["D1:1"]);
    assert.deepEqual(greedyPack([big, small], 100, "stop").turnIds, []);
  });

  it("renders packed units in conversation order and packs everything when it fits", () => {
    const p = greedyPack([...units].reverse(), 1_000_000);
    assert.deepEqual(
      p.turnIds,
      turns.map((t) => t.turnId),
    );
    assert.equal(p.context.split("\n").length, turns.length);
  });

  it("keeps most-recent turns in the truncated full context", () => {
    const p = greedyPack(recentFirst(units), 60, "stop");
    assert.ok(p.turnIds.length > 0);
    assert.equal(p.turnIds.at(-1), "D1:39");
  });

  it("cuts windows of 5 consecutive turns without crossing sessions", () => {
    const w = windows(turns, 5);
    assert.deepEqual(
      w.map((u) => u.turns.length),
      [5, 5, 5, 5, 3, 5, 5, 5, 2],
    );
    for (const u of w) assert.equal(new Set(u.turns.map((t) => t.sessionId)).size, 1);
  });
});

describe("baseline rankers", () => {
  it("builds an FTS5 query of OR-ed word tokens with syntax stripped", () => {
    assert.equal(
      bm25Query('What did "Alice" (NOT Bob) say* about NEAR: x^y-z?'),
      '"what" OR "did" OR "alice" OR "not" OR "bob" OR "say" OR "about" OR "near" OR "x" OR "y" OR "z"',
    );
    assert.equal(bm25Query("?!* ()"), undefined);
  });

  it("ranks turns by BM25 and returns nothing for no shared word", () => {
    const ts = [
      turn(0, "s1", "We adopted a puppy named Biscuit"),
      turn(1, "s1", "The weather is nice"),
      turn(2, "s1", "Biscuit the puppy loves the beach; Biscuit!"),
    ];
    const index = new Bm25Index(turnUnits(ts), (u) => u.turns.map((t) => t.text).join("\n"));
    try {
      const ranked = index.rank("Where does Biscuit go?").map((u) => u.id);
      assert.deepEqual(ranked, ["D1:2", "D1:0"]);
      assert.deepEqual(index.rank("zebra"), []);
      assert.deepEqual(index.rank("(*)"), []);
    } finally {
      index.close();
    }
  });

  it("ranks by cosine for dense baselines", () => {
    const us = turnUnits([turn(0), turn(1), turn(2)]);
    const v = (x: number, y: number) => Float32Array.from([x, y]);
    const ranked = denseRank(us, [v(1, 0), v(0, 1), v(0.6, 0.8)], v(0, 1));
    assert.deepEqual(
      ranked.map((u) => u.id),
      ["D1:1", "D1:2", "D1:0"],
    );
  });
});

describe("bench options and rendering", () => {
  it("refuses the LLM encoder without an LLM instead of falling back", () => {
    const none = loadConfig({}, {});
    const local = loadConfig({}, { MEMORY_LLM_PROVIDER: "local" });
    assert.throws(() => assertEncoder("llm", none), /--encoder llm needs an LLM/);
    assert.equal(assertEncoder("llm", local), "llm");
    assert.throws(() => assertEncoder("gpt", none), /unknown encoder/);
    assert.equal(assertEncoder("extractive", none), "extractive");
  });

  it("parses budgets", () => {
    assert.deepEqual(parseBudgets("2000, 500,1000,500"), [500, 1000, 2000]);
    assert.throws(() => parseBudgets("500,abc"));
    assert.throws(() => parseBudgets("10"));
  });

  it("renders a markdown table with escaped cells", () => {
    assert.equal(
      markdownTable(["system", "recall"], [["a|b", "0.5"]]),
      "| system | recall |\n| --- | ---: |\n| a\\|b | 0.5 |",
    );
  });
});
