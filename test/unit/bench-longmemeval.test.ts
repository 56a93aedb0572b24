import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { longMemEvalCases } from "../../services/bench/datasets.ts";
import { loadLongMemEval, parseLongMemEvalDate } from "../../services/core/datasets/longmemeval.ts";

const dir = mkdtempSync(join(tmpdir(), "lme-test-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const item = (id: string, extra: Record<string, unknown> = {}) => ({
  question_id: id,
  question_type: "single-session-user",
  question: "What degree did I graduate with?",
  answer: "Business Administration",
  question_date: "2023/05/30 (Tue) 23:40",
  haystack_session_ids: ["sess_a", "answer_1"],
  haystack_dates: ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 10:05"],
  haystack_sessions: [
    [
      { role: "user", content: "Any tips for a trip to Rome?" },
      { role: "assistant", content: "Visit the Colosseum early." },
    ],
    [
      { role: "user", content: "I graduated with a degree in Business Administration.", has_answer: true },
      { role: "assistant", content: "" },
    ],
  ],
  answer_session_ids: ["answer_1"],
  ...extra,
});

const write = (name: string, data: unknown): string => {
  const p = join(dir, name);
  writeFileSync(p, JSON.stringify(data));
  return p;
};

describe("LongMemEval loader", () => {
  it("reads items into turns with session-scoped ids, dates and answer turns", () => {
    const [a, b] = loadLongMemEval(write("ok.json", [item("q1"), item("q2_abs", { answer: 3 })]));
    assert.ok(a && b);
    assert.equal(a.id, "q1");
    assert.equal(a.type, "single-session-user");
    assert.equal(a.questionDate, "2023-05-30T23:40:00.000Z");
    assert.deepEqual(
      a.turns.map((t) => t.turnId),
      ["sess_a:0", "sess_a:1", "answer_1:0", "answer_1:1"],
    );
    assert.deepEqual(
      a.turns.map((t) => t.sessionId),
      ["sess_a", "sess_a", "answer_1", "answer_1"],
    );
    assert.equal(a.turns[0]?.timestamp, "2023-05-20T02:21:00.000Z");
    assert.equal(a.turns[1]?.timestamp, "2023-05-20T02:21:30.000Z");
    assert.equal(a.turns[1]?.role, "assistant");
    assert.equal(a.turns[3]?.text, "(no text)");
    assert.deepEqual(a.answerTurnIds, ["answer_1:0"]);
    assert.deepEqual(a.answerSessionIds, ["answer_1"]);
    assert.equal(a.abstention, false);
    assert.equal(b.answer, "3");
    assert.equal(b.abstention, true);
  });

  it("gives a repeated session id distinct turn ids", () => {
    const [a] = loadLongMemEval(
      write("dup.json", [item("q3", { haystack_session_ids: ["s", "s"], answer_session_ids: ["s"] })]),
    );
    const ids = a?.turns.map((t) => t.turnId) ?? [];
    assert.equal(new Set(ids).size, ids.length);
    assert.deepEqual([...new Set(a?.turns.map((t) => t.sessionId))], ["s"]);
  });

  it("rejects mismatched haystack lengths and bad shapes", () => {
    assert.throws(() =>
      loadLongMemEval(write("bad1.json", [item("q4", { haystack_dates: ["2023/05/20 (Sat) 02:21"] })])),
    );
    assert.throws(() => loadLongMemEval(write("bad2.json", [{ question_id: "x" }])));
    assert.throws(() => loadLongMemEval(write("bad3.json", { not: "a list" })));
  });

  it("parses the dataset's dates and ISO dates", () => {
    assert.equal(parseLongMemEvalDate("2023/01/02 (Mon) 03:04").toISOString(), "2023-01-02T03:04:00.000Z");
    assert.equal(parseLongMemEvalDate("2023/01/02").toISOString(), "2023-01-02T00:00:00.000Z");
    assert.equal(parseLongMemEvalDate("2023-01-02T03:04:00Z").toISOString(), "2023-01-02T03:04:00.000Z");
    assert.throws(() => parseLongMemEvalDate("someday"));
  });

  it("becomes one bench case per item with session and turn targets; abstention items skipped", () => {
    const { spec, cases } = longMemEvalCases(loadLongMemEval(write("cases.json", [item("q1"), item("q2_abs")])));
    assert.equal(cases.length, 1);
    assert.deepEqual(spec.metrics, ["session", "turn"]);
    assert.equal(spec.skipped[0]?.count, 1);
    assert.deepEqual(cases[0]?.questions[0]?.targets, {
      session: { level: "session", ids: ["answer_1"] },
      turn: { level: "turn", ids: ["answer_1:0"] },
    });
    // The bench asks as of the question's date, not the haystack's last turn.
    assert.equal(cases[0]?.questions[0]?.askedAt, parseLongMemEvalDate("2023/05/30 (Tue) 23:40").toISOString());
  });
});
