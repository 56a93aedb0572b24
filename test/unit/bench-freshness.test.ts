/**
 * The freshness bench's report (the run itself needs Kafka, the registry and Neo4j:
 * `npm run bench -- freshness`): both latencies and the throughput ratio are in the table, and
 * raw turns never seen are said, not hidden.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type FreshnessResult, freshnessMarkdown } from "../../services/bench/freshness.ts";

const result = (over: Partial<FreshnessResult> = {}): FreshnessResult => ({
  environment: {
    gitCommit: "abc",
    gitDirty: false,
    date: "2026-12-02T00:00:00.000Z",
    node: "v20",
    cpus: 2,
    loadavg: [1, 2, 3],
  },
  rate: 4,
  producedTurns: 80,
  rawTurn: { n: 80, p50: 1234.4, p95: 1890.6, max: 2100 },
  rawTurnMissing: 0,
  record: { n: 77, p50: 21000, p95: 31000, max: 33000 },
  ...over,
});

/** 419 turns in 100 s distributed against 80 s embedded: a ratio of 0.80. */
const throughput = {
  conversations: ["conv-26"],
  turns: 419,
  distributedSeconds: 100,
  embeddedSeconds: 80,
  distributedTurnsPerSecond: 4.19,
  embeddedTurnsPerSecond: 5.2375,
  ratio: 0.8,
};

describe("bench freshness report", () => {
  it("tabulates both latencies and the throughput ratio", () => {
    const md = freshnessMarkdown(
      result({
        throughput,
      }),
    );
    assert.match(md, /80 turns at 4\/s; 2 CPUs, load 1\.0 2\.0 3\.0/);
    assert.match(md, /\| produce → raw turn queryable \(row \+ vector\) \| 80 \| 1234 \| 1891 \| 2100 \|/);
    assert.match(md, /\| produce → a record citing the turn queryable \| 77 \| 21000 \| 31000 \| 33000 \|/);
    assert.match(md, /\| distributed \(4 stage processes, Neo4j\) \| 419 \| 100\.0 \| 4\.19 \|/);
    assert.match(md, /distributed \/ embedded throughput: 0\.80 \(conv-26, cold: no warm-up pass\)/);
    assert.doesNotMatch(md, /Warm-up pass/);
    assert.doesNotMatch(md, /never seen/);
    assert.doesNotMatch(md, /CPU seconds/, "no CPU line without the figures");
  });

  it("names the warm-up pass the measured one came after, with its own figures", () => {
    const md = freshnessMarkdown(
      result({
        throughput: {
          ...throughput,
          warmUp: { conversations: ["conv-30"], turns: 329, distributedSeconds: 50, embeddedSeconds: 30, ratio: 0.6 },
        },
      }),
    );
    assert.match(md, /distributed \/ embedded throughput: 0\.80 \(conv-26, after the warm-up pass\)/);
    assert.match(
      md,
      /Warm-up pass before it \(conv-30, 329 turns, another tenant kept meanwhile\): distributed 50\.0 s, embedded 30\.0 s, ratio 0\.60/,
    );
  });

  it("splits the raw-turn latency by step and states the CPU each runtime used", () => {
    const l = (p50: number) => ({ n: 80, p50, p95: p50 * 2, max: p50 * 3 });
    const md = freshnessMarkdown(
      result({
        rawTurnStages: { sensoryWritten: l(40), sensoryVisible: l(60), indexed: l(300) },
        throughput: {
          ...throughput,
          stageCpuSeconds: { sensory: 5, segmenter: 30, encoder: 10, indexer: 55 },
          embeddedCpuSeconds: 70,
        },
      }),
    );
    assert.match(md, /\| produce → sensory wrote the turn \(fetch, compress, embed\) \| 80 \| 40 \| 80 \| 120 \|/);
    assert.match(md, /\| written → read_committed consumer has it \(transaction, fetch\) \| 80 \| 60 \| 120 \| 180 \|/);
    assert.match(md, /\| consumer has it → raw turn queryable \(store writes, poll\) \| 80 \| 300 \| 600 \| 900 \|/);
    assert.match(
      md,
      /CPU seconds in the throughput run: sensory 5\.0, segmenter 30\.0, encoder 10\.0, indexer 55\.0 \(stage processes 100\.0, without Kafka and Neo4j\); embedded runtime 70\.0\./,
    );
  });

  it("adds the servers' CPU and the wall-time floor all of the distributed CPU sets on the machine's cores", () => {
    const md = freshnessMarkdown(
      result({
        throughput: {
          ...throughput,
          stageCpuSeconds: { sensory: 5, segmenter: 30, encoder: 10, indexer: 55 },
          serverCpuSeconds: { kafka: 4, registry: 1, neo4j: 15 },
          embeddedCpuSeconds: 70,
        },
      }),
    );
    // 100 s of stages + 20 s of servers on 2 cores: 60 s at least; the embedded run took 80 s.
    assert.match(
      md,
      /Servers' CPU seconds in the throughput run \(this checkout's infra\): kafka 4\.0, registry 1\.0, neo4j 15\.0; the distributed run in all \(stage processes \+ servers\) 120\.0 CPU s, on 2 cores at least 60\.0 s of wall time \(a ratio of 1\.33 at most against this embedded run\)\./,
    );
  });

  it("states the texts each stage's model embedded next to the embedded runtime's", () => {
    const md = freshnessMarkdown(
      result({
        throughput: {
          ...throughput,
          stageEmbeddedTexts: { sensory: 419, segmenter: 0, encoder: 0, indexer: 1203 },
          embeddedTexts: 1622,
        },
      }),
    );
    assert.match(
      md,
      /Texts embedded in the throughput run: sensory 419, segmenter 0, encoder 0, indexer 1203 \(stage processes 1622\); embedded runtime 1622\./,
    );
    assert.doesNotMatch(freshnessMarkdown(result({ throughput })), /Texts embedded/, "no line without the figures");
  });

  it("says how many raw turns were never seen, and leaves out the throughput table when not run", () => {
    const md = freshnessMarkdown(result({ rawTurnMissing: 3, rawTurn: { n: 77, p50: 1, p95: 2, max: 3 } }));
    assert.match(md, /3 raw turns were never seen/);
    assert.doesNotMatch(md, /turns\/s/);
  });
});
