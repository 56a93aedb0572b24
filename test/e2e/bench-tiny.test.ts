import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, it } from "node:test";
import { runBench } from "../../services/bench/run.ts";
import { type BenchReport, SYSTEMS } from "../../services/bench/types.ts";
import { loadConfig } from "../../services/core/config.ts";

const MODEL_DIR = resolve("models");
const HAS_MODEL = existsSync(join(MODEL_DIR, "all-MiniLM-L6-v2"));
const skip = HAS_MODEL ? false : "embedder model absent: run `npm run setup` to fetch models/all-MiniLM-L6-v2";

const dir = mkdtempSync(join(tmpdir(), "bench-tiny-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const session1: [string, string][] = [
  ["Alice", "Hi Bob! Guess what, we adopted a golden retriever puppy last weekend."],
  ["Bob", "No way! What did you name the puppy?"],
  ["Alice", "We named him Biscuit, because of his colour."],
  ["Bob", "Biscuit is a perfect name. Is he house trained yet?"],
  ["Alice", "Not yet, but he learns fast. He already knows how to sit."],
  ["Bob", "Speaking of news, I started a new job at a bakery in Lisbon."],
  ["Alice", "A bakery in Lisbon! Do you bake the pastries yourself?"],
  ["Bob", "Yes, I make pastel de nata every morning at five."],
  ["Alice", "That sounds exhausting but delicious."],
  ["Bob", "It is. Talk soon, say hi to Biscuit for me!"],
];
const session2: [string, string][] = [
  ["Bob", "Hey Alice, how was your weekend?"],
  ["Alice", "I ran the Berlin marathon on Sunday, finished in four hours."],
  ["Bob", "Congratulations! Was it your first marathon?"],
  ["Alice", "Yes, my first one. My legs still hurt."],
  ["Bob", "The bakery in Lisbon keeps me busy; we opened a second shop downtown."],
  ["Alice", "Two shops already, impressive."],
  ["Bob", "My sister Clara is visiting me from Porto next month."],
  ["Alice", "Say hello to Clara. Is she into baking too?"],
  ["Bob", "She prefers painting; she sells watercolours of the coast."],
  ["Alice", "Lovely. I should buy one for my living room."],
];

const locomoFile = (): string => {
  const toTurns = (n: number, rows: [string, string][]) =>
    rows.map(([speaker, text], i) => ({ speaker, dia_id: `D${n}:${i + 1}`, text }));
  const sample = {
    sample_id: "tiny-1",
    conversation: {
      speaker_a: "Alice",
      speaker_b: "Bob",
      session_1_date_time: "1:56 pm on 8 May, 2023",
      session_1: toTurns(1, session1),
      session_2_date_time: "10:00 am on 25 September, 2023",
      session_2: toTurns(2, session2),
    },
    qa: [
      { question: "What is the name of Alice's puppy?", answer: "Biscuit", evidence: ["D1:3"], category: 4 },
      { question: "Where does Bob work?", answer: "a bakery in Lisbon", evidence: ["D1:6; D2:5"], category: 1 },
      {
        question: "When did Alice run the Berlin marathon?",
        answer: "September 2023",
        evidence: ["D2:2"],
        category: 2,
      },
      { question: "What does Clara sell?", answer: "watercolours", evidence: ["D2:9"], category: 4 },
      { question: "In what year did Bob start at the bakery?", answer: 2023, evidence: ["D1:6"], category: 3 },
      { question: "What is Bob's cat called?", adversarial_answer: "Bob has no cat", evidence: [], category: 5 },
      { question: "Broken evidence", answer: "x", evidence: ["D", "D:11:26"], category: 4 },
    ],
  };
  const p = join(dir, "tiny-locomo.json");
  writeFileSync(p, JSON.stringify([sample]));
  return p;
};

const readReport = (files: readonly string[]): BenchReport => {
  const json = files.find((f) => f.endsWith(".json"));
  assert.ok(json, "a JSON report is written");
  return JSON.parse(readFileSync(json, "utf8")) as BenchReport;
};

const assertShape = (report: BenchReport, budgets: readonly number[]) => {
  for (const budget of budgets) {
    const systems = report.summary[String(budget)];
    assert.ok(systems, `budget ${budget} reported`);
    for (const s of SYSTEMS) {
      const summary = systems[s];
      assert.ok(summary, `${s} at ${budget} reported`);
      assert.ok(summary.meanTokens <= budget, `${s} at ${budget}: ${summary.meanTokens} tokens`);
      for (const m of report.spec.metrics) {
        const agg = summary.metrics[m];
        assert.ok(agg, `${s}/${m} at ${budget}`);
        const values = [agg.overall.mean, ...Object.values(agg.byCategory).map((a) => a.mean)];
        for (const v of values) if (v !== null && v !== undefined) assert.ok(v >= 0 && v <= 1, `${s} ${m} ${v}`);
      }
    }
  }
  for (const q of report.questions)
    for (const v of Object.values(q.recall)) if (v !== null) assert.ok(v >= 0 && v <= 1);
};

describe("bench harness end to end (real embedder)", { skip }, () => {
  it("runs a tiny LoCoMo-format conversation through the engine and every baseline", async () => {
    const budgets = [100, 4000];
    const out = join(dir, "out");
    const config = loadConfig({ dataDir: join(dir, "unused-data"), modelDir: MODEL_DIR }, {});
    const { report, markdown, files } = await runBench("locomo", config, {
      data: locomoFile(),
      budgets,
      out,
      progress: false,
    });
    assert.deepEqual(readReport(files).summary, JSON.parse(JSON.stringify(report.summary)));
    assertShape(report, budgets);
    assert.equal(report.config.budgets.length, 2);
    assert.match(report.config.dataSha256, /^[0-9a-f]{64}$/);
    assert.match(report.config.embedder, /MiniLM/i);
    assert.equal(report.config.encoder, "extractive");
    // Category 5 skipped; the malformed-evidence question is asked but has nothing to score.
    assert.equal(report.spec.skipped[0]?.count, 1);
    assert.equal(report.questions.filter((q) => q.system === "ours" && q.budget === 4000).length, 6);

    const fullTokens = report.cost.perCase[0]?.fullContextTokens ?? 0;
    assert.ok(fullTokens > 0 && fullTokens < 4000, `the conversation (${fullTokens} tokens) fits in 4000`);
    const big = report.summary["4000"];
    assert.equal(big?.["full-context"].metrics.evidence?.overall.mean, 1);
    assert.equal(big?.["full-context"].metrics.evidence?.overall.n, 5);
    assert.equal(report.cost.fullContextUnbounded.metrics.evidence?.overall.mean, 1);
    assert.ok((big?.ours.metrics.evidence?.overall.mean ?? 0) > 0, "ours finds some evidence");
    assert.ok((report.summary["100"]?.["full-context"].meanTokens ?? 0) <= 100);

    const cost = report.cost;
    assert.equal(cost.ours.constructionLlmCalls, 0);
    assert.equal(cost.ours.constructionInputTokens, 0);
    assert.ok(cost.ours.segments > 0 && cost.ours.records > 0);
    assert.ok(cost.ours.ingestEmbeddingCalls > 0);
    assert.ok(cost.ours.keptRatio !== null && cost.ours.keptRatio > 0 && cost.ours.keptRatio <= 1);
    assert.ok(cost.embedder.sentencesPerSecond > 0 && cost.ours.ingestTurnsPerSecond > 0);
    assert.ok(cost.ours.queryMsP50 !== null && cost.ours.queryMsP95 !== null);
    assert.ok(cost.ours.queryMsP50 <= cost.ours.queryMsP95);
    assert.match(markdown, /## Budget 100 tokens/);
    assert.match(markdown, /\| window5-dense \|/);
    assert.match(markdown, /## Cost and speed/);

    // Answer coverage and evidence turns per 1,000 tokens beside recall, also per conversation.
    for (const s of SYSTEMS) {
      const c = big?.[s].coverage.overall;
      assert.ok(c && (c.mean === undefined || (c.mean >= 0 && c.mean <= 1)), `${s} coverage`);
    }
    assert.ok((big?.["full-context"].coverage.overall.n ?? 0) > 0, "answers with content words are scored");
    assert.ok((big?.["full-context"].foundPerKTokens ?? 0) > 0, "full context finds evidence per 1,000 tokens");
    assert.deepEqual(Object.keys(report.byCase), report.config.cases);
    assert.deepEqual(report.byCase[report.config.cases[0] as string]?.["4000"]?.ours, big?.ours);
    assert.match(markdown, /answer coverage/);
  });

  it("runs our engine alone with baselines off", async () => {
    const config = loadConfig({ dataDir: join(dir, "unused-data"), modelDir: MODEL_DIR }, {});
    const { report, markdown } = await runBench("locomo", config, {
      data: locomoFile(),
      budgets: [4000],
      out: null,
      baselines: false,
    });
    assert.deepEqual([...new Set(report.questions.map((q) => q.system))], ["ours"]);
    assert.ok((report.summary["4000"]?.ours.metrics.evidence?.overall.mean ?? 0) > 0);
    assert.equal(report.cost.baselines["dense-turns"].embeddingCalls, 0);
    // Nothing was embedded for the baselines, so the embedder's own speed is not reported as measured.
    assert.equal(report.cost.embedder.texts, 0);
    assert.match(markdown, /the embedder alone \([^)]*\) not measured \(--no-baselines\)/);
    assert.doesNotMatch(markdown, /\| bm25-turns \| 0\.\d/);
  });

  it("runs a tiny LongMemEval-format file and scores session and turn recall", async () => {
    const item = (id: string) => ({
      question_id: id,
      question_type: "single-session-user",
      question: "Which city did I move to for my bakery job?",
      answer: "Lisbon",
      question_date: "2023/10/01 (Sun) 09:00",
      haystack_session_ids: ["s_noise", "s_answer"],
      haystack_dates: ["2023/05/20 (Sat) 02:21", "2023/06/01 (Thu) 10:00"],
      haystack_sessions: [
        session2.map(([speaker, content]) => ({ role: speaker === "Bob" ? "user" : "assistant", content })),
        [
          { role: "user", content: "I moved to Lisbon for a job at a bakery.", has_answer: true },
          { role: "assistant", content: "Congratulations on the move to Lisbon!" },
        ],
      ],
      answer_session_ids: ["s_answer"],
    });
    const data = join(dir, "tiny-lme.json");
    writeFileSync(data, JSON.stringify([item("lme-1"), item("lme-2_abs")]));
    const config = loadConfig({ dataDir: join(dir, "unused-data"), modelDir: MODEL_DIR }, {});
    const { report } = await runBench("longmemeval", config, { data, budgets: [200, 4000], out: null });
    assertShape(report, [200, 4000]);
    assert.deepEqual(report.config.cases, ["lme-1"]);
    assert.equal(report.summary["4000"]?.["full-context"].metrics.session?.overall.mean, 1);
    assert.equal(report.summary["4000"]?.["full-context"].metrics.turn?.overall.mean, 1);
    assert.ok((report.summary["4000"]?.ours.metrics.session?.overall.mean ?? 0) > 0);
  });
});
