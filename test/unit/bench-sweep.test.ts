import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { renderMarkdown } from "../../services/bench/report.ts";
import { aggregateByCategory } from "../../services/bench/scoring.ts";
import { budgetSweep } from "../../services/bench/sweep.ts";
import type { BenchReport, SystemName, SystemSummary } from "../../services/bench/types.ts";

/** A summary built the harness's way from per-question rows: (category, recall, coverage). */
const summaryOf = (rows: readonly [string, number | undefined, number | undefined][]): SystemSummary => ({
  meanTokens: 0,
  metrics: {
    evidence: aggregateByCategory(
      rows.map(([category, value]) => ({ category, value })),
      ["1", "2"],
    ),
  },
  coverage: aggregateByCategory(
    rows.map(([category, , value]) => ({ category, value })),
    ["1", "2"],
  ),
  foundPerKTokens: null,
});

const empty = summaryOf([]);

type PerBudget = Record<string, Partial<Record<SystemName, SystemSummary>>>;

/** Budgets 100..400: case a has two questions (categories 1 and 2), case b one (category 1). */
const caseA: PerBudget = {
  "100": {
    ours: summaryOf([
      ["1", 0, 0],
      ["2", 0, 1],
    ]),
    "bm25-turns": empty,
  },
  "200": {
    ours: summaryOf([
      ["1", 1, 0.5],
      ["2", 0, 1],
    ]),
    "bm25-turns": empty,
  },
  "300": {
    ours: summaryOf([
      ["1", 1, 1],
      ["2", 0.5, 1],
    ]),
    "bm25-turns": empty,
  },
  "400": {
    ours: summaryOf([
      ["1", 1, 1],
      ["2", 1, undefined],
    ]),
    "bm25-turns": empty,
  },
};
const caseB: PerBudget = {
  "100": { ours: summaryOf([["1", 0, 0]]), "bm25-turns": empty },
  "200": { ours: summaryOf([["1", 0, 0]]), "bm25-turns": empty },
  "300": { ours: summaryOf([["1", 1, 1]]), "bm25-turns": empty },
  "400": { ours: summaryOf([["1", 1, 1]]), "bm25-turns": empty },
};
// The overall summary per budget: both cases' questions together, as the harness builds it.
const overall: PerBudget = {
  "100": {
    ours: summaryOf([
      ["1", 0, 0],
      ["2", 0, 1],
      ["1", 0, 0],
    ]),
    "bm25-turns": empty,
  },
  "200": {
    ours: summaryOf([
      ["1", 1, 0.5],
      ["2", 0, 1],
      ["1", 0, 0],
    ]),
    "bm25-turns": empty,
  },
  "300": {
    ours: summaryOf([
      ["1", 1, 1],
      ["2", 0.5, 1],
      ["1", 1, 1],
    ]),
    "bm25-turns": empty,
  },
  "400": {
    ours: summaryOf([
      ["1", 1, 1],
      ["2", 1, undefined],
      ["1", 1, 1],
    ]),
    "bm25-turns": empty,
  },
};

const close = (actual: number | undefined, expected: number) =>
  assert.ok(actual !== undefined && Math.abs(actual - expected) < 1e-12, `${actual} ≠ ${expected}`);

describe("budget sweep", () => {
  it("is absent with three budgets or fewer", () => {
    const three = { "100": overall["100"], "200": overall["200"], "300": overall["300"] } as PerBudget;
    assert.equal(budgetSweep(three, {}, "evidence", ["1", "2"]), undefined);
  });

  it("averages each budget's mean over the budgets, overall, per category and per case", () => {
    const sweep = budgetSweep(overall, { a: caseA, b: caseB }, "evidence", ["1", "2"]);
    assert.ok(sweep);
    assert.deepEqual(sweep.budgets, [100, 200, 300, 400]);
    const ours = sweep.systems.ours;
    assert.ok(ours);
    // Overall recall per budget: 0, 1/3, 2.5/3, 1 → mean (0 + 1/3 + 5/6 + 1) / 4.
    close(ours.overall.recall, (0 + 1 / 3 + 5 / 6 + 1) / 4);
    // Coverage per budget: 1/3, 1.5/3, 1, 1 (the question without a coverage left out at 400).
    close(ours.overall.coverage, (1 / 3 + 0.5 + 1 + 1) / 4);
    // Category 2 recall: 0, 0, 0.5, 1; its coverage has no value at 400, so that budget is left out.
    close(ours.byCategory["2"]?.recall, 0.375);
    close(ours.byCategory["2"]?.coverage, 1);
    // Category 1 recall: 0, 0.5, 1, 1.
    close(ours.byCategory["1"]?.recall, 0.625);
    close(ours.byCase.a?.recall, (0 + 0.5 + 0.75 + 1) / 4);
    close(ours.byCase.b?.recall, 0.5);
  });

  it("lists only systems that scored a question, and sorts budgets numerically", () => {
    const shuffled: PerBudget = {
      "1000": overall["400"] ?? {},
      "200": overall["200"] ?? {},
      "100": overall["100"] ?? {},
      "300": overall["300"] ?? {},
    };
    const sweep = budgetSweep(shuffled, {}, "evidence", ["1", "2"]);
    assert.deepEqual(sweep?.budgets, [100, 200, 300, 1000]);
    assert.deepEqual(Object.keys(sweep?.systems ?? {}), ["ours"]);
  });

  it("is rendered in the markdown report as its own section", () => {
    const sweep = budgetSweep(overall, { a: caseA, b: caseB }, "evidence", ["1", "2"]);
    const report = {
      config: {
        dataset: "locomo",
        dataFile: "x.json",
        dataSha256: "0".repeat(64),
        budgets: [100, 200, 300, 400],
        encoder: "extractive",
        embedder: "e",
        keepRate: 1,
        compressor: "c",
        segmenter: { threshold: 0, hardCapTokens: 0, bufferTokens: 0 },
        cases: ["a", "b"],
        gitCommit: null,
        gitDirty: null,
        date: "2026-01-01T00:00:00.000Z",
        node: "v20",
        wallSeconds: 1,
      },
      spec: {
        name: "locomo",
        metrics: ["evidence"],
        categories: [
          { id: "1", label: "multi-hop" },
          { id: "2", label: "temporal" },
        ],
        skipped: [],
      },
      summary: overall,
      byCase: { a: caseA, b: caseB },
      sweep,
      cost: {
        ours: { queryMsP50: null, queryMsP95: null, engineQueryMsP50: null, keptRatio: null },
        embedder: { id: "e", texts: 0, seconds: 0, sentencesPerSecond: 0 },
        baselines: Object.fromEntries(
          ["bm25-turns", "dense-turns", "window5-dense", "full-context"].map((s) => [
            s,
            { embeddingCalls: 0, embeddedTexts: 0, units: 0, buildSeconds: 0, queryMsP50: null, queryMsP95: null },
          ]),
        ),
        fullContextUnbounded: { meanTokens: 0, metrics: {} },
        perCase: [],
      },
      questions: [
        { case: "a", question: "q", category: "1", budget: 100, system: "ours", tokens: 0, ms: 0 },
        { case: "a", question: "q", category: "1", budget: 100, system: "bm25-turns", tokens: 0, ms: 0 },
      ],
    } as unknown as BenchReport;
    const md = renderMarkdown(report);
    assert.match(md, /## Budget sweep/);
    assert.match(md, /Means over the 4 budgets \(100, 200, 300, 400\)/);
    // ours' row: category 1 and 2 recall, overall recall, coverage, then each case's recall / coverage.
    const section = md.slice(md.indexOf("## Budget sweep"), md.indexOf("Full context, unbounded"));
    const row = section.split("\n").find((l) => l.startsWith("| ours |"));
    assert.equal(row, "| ours | 0.6250 | 0.3750 | 0.5417 | 0.7083 | 0.5625 / 0.8125 | 0.5000 / 0.5000 |");
    // bm25-turns ran no question with a score here, so it has no sweep row.
    assert.ok(!section.includes("| bm25-turns |"));
  });
});
