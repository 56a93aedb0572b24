import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  assignConversations,
  eventLoopSummary,
  interleaveQuestions,
  type LoadBenchReport,
  renderLoadMarkdown,
  summarize,
} from "../../services/bench/load.ts";
import type { TurnInput } from "../../services/core/requests.ts";

const turn = (n: number): TurnInput => ({
  speaker: "A",
  role: "user",
  text: `turn ${n}`,
  timestamp: "2023-05-08T13:56:00Z",
  sessionId: "s1",
});

describe("bench load: pure parts", () => {
  it("summarizes latencies with interpolated percentiles and the max; errors counted apart", () => {
    const s = summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 2);
    assert.equal(s.n, 10);
    assert.equal(s.errors, 2);
    assert.equal(s.p50, 5.5);
    assert.ok(Math.abs((s.p95 as number) - 9.55) < 1e-9);
    assert.equal(s.max, 10);
    const empty = summarize([]);
    assert.deepEqual(empty, { n: 0, errors: 0, p50: undefined, p95: undefined, p99: undefined, max: undefined });
  });

  it("converts the event-loop histogram from nanoseconds to milliseconds, zeros without samples", () => {
    const h = { count: 3, mean: 2e6, max: 9e6, percentile: (p: number) => (p === 50 ? 1e6 : 8e6) };
    assert.deepEqual(eventLoopSummary(h), { mean: 2, p50: 1, p99: 8, max: 9 });
    assert.deepEqual(eventLoopSummary({ count: 0, mean: Number.NaN, max: 0, percentile: () => 0 }), {
      mean: 0,
      p50: 0,
      p99: 0,
      max: 0,
    });
  });

  it("gives every client its own conversation, cycling the data's conversations, turns capped", () => {
    const data = [
      { id: "a", turns: [turn(1), turn(2), turn(3)], questions: [{ question: "qa1" }, { question: "qa2" }] },
      { id: "b", turns: [turn(4)], questions: [{ question: "qb1" }] },
    ];
    const clients = assignConversations(data, 3, 2);
    assert.deepEqual(
      clients.map((c) => [c.conversation, c.turns.length]),
      [
        ["a-client0", 2],
        ["b-client1", 1],
        ["a-client2", 2],
      ],
    );
    assert.deepEqual(
      interleaveQuestions(clients).map((q) => `${q.conversation}:${q.question}`),
      ["a-client0:qa1", "b-client1:qb1", "a-client2:qa1", "a-client0:qa2", "a-client2:qa2"],
    );
    assert.throws(() => assignConversations([], 2, 2), /no conversations/);
  });

  it("renders the table with a dash for a missing value and says when the pipeline did not catch up", () => {
    const none = summarize([]);
    const report: LoadBenchReport = {
      config: {
        bench: "load",
        dataFile: "/d.json",
        dataSha256: "0123456789abcdef",
        ingesters: 8,
        queriers: 2,
        turnsPerClient: 10,
        queriesPerClient: 5,
        maxSeconds: 60,
        gitCommit: null,
        gitDirty: null,
        date: "2026-01-01T00:00:00.000Z",
        node: "v20",
        cpus: 2,
        loadAverage: { before: [1], after: [2] },
      },
      loadSeconds: 3,
      drainSeconds: null,
      ack: summarize([1, 3]),
      query: none,
      healthz: none,
      eventLoop: { mean: 1, p50: 1, p99: 2, max: 3 },
      progress: { turns: 1, segments: 0, records: 0 },
      failures: { "fetch failed: other side closed": 2 },
    };
    const md = renderLoadMarkdown(report);
    assert.match(md, /\| ingest ack \| 2 \| 0 \| 2\.0 \|/);
    assert.match(md, /\| query \| 0 \| 0 \| – \|/);
    assert.match(md, /not within the drain limit/);
    assert.match(md, /failed requests: 2 × fetch failed: other side closed\./);
  });
});
