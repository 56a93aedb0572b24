import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { SensoryTurn } from "../../services/core/types.ts";
import {
  cohesion,
  DEFAULT_GATE,
  evaluateGate,
  lengthPressure,
  robustZ,
  summarise,
  turnPressure,
} from "../../services/segmenter/gate.ts";
import {
  defaultSegmenterConfig,
  initialSegmenterState,
  isIdle,
  type SegmenterState,
  segmenterStep,
} from "../../services/segmenter/segment-state.ts";
import { axis, near, seededRandom } from "../helpers/seeded.ts";

const DIM = 16;

const turn = (i: number, sessionId = "s1", text = "we talked about the garden and the tomatoes"): SensoryTurn => ({
  tenant: "t",
  conversation: "c",
  turnId: `T${i}`,
  speaker: i % 2 ? "A" : "B",
  role: "user",
  text,
  compressed: text,
  keptRatio: 1,
  timestamp: new Date(Date.UTC(2024, 0, 1, 10, i)).toISOString(),
  sessionId,
});

describe("boundary gate", () => {
  it("cuts on a topic change after a cohesive run of turns, not inside it", () => {
    const rnd = seededRandom(7);
    const topicA = axis(DIM, 0);
    const segment = Array.from({ length: 10 }, () => near(topicA, 0.15, rnd));
    const history = Array.from({ length: 20 }, () => 0.05 + rnd() * 0.05);
    const same = evaluateGate({
      segment: summarise(segment),
      segmentTokens: 300,
      candidate: near(topicA, 0.15, rnd),
      surpriseHistory: history,
    });
    const shift = evaluateGate({
      segment: summarise(segment),
      segmentTokens: 300,
      candidate: axis(DIM, 5),
      surpriseHistory: history,
    });
    assert.equal(same.cut, false, `same topic p=${same.p}`);
    assert.equal(shift.cut, true, `new topic p=${shift.p}`);
    assert.ok(shift.surprise > 0.9 && same.surprise < 0.2);
    assert.ok(shift.cohesionDrop > 0);
    assert.equal(shift.z, 4, "z clipped at 4");
  });

  it("does not cut a fresh segment of one exchange on a moderate surprise (turn pressure)", () => {
    const drift = new Float32Array(DIM);
    drift[0] = 0.6;
    drift[1] = 0.8;
    const g = evaluateGate({
      segment: summarise([axis(DIM, 0), axis(DIM, 0)]),
      segmentTokens: 40,
      candidate: drift,
      surpriseHistory: [],
    });
    assert.ok(Math.abs(g.surprise - 0.4) < 1e-6);
    assert.equal(g.cut, false, `p=${g.p}`);
    assert.equal(g.turnPressure, -0.85);
    const unrelated = evaluateGate({
      segment: summarise([axis(DIM, 0), axis(DIM, 0)]),
      segmentTokens: 40,
      candidate: axis(DIM, 3),
      surpriseHistory: [],
    });
    assert.ok(unrelated.p > g.p, "an unrelated turn pushes harder than a drifting one");
  });

  it("length pressure forces a cut on a long segment even without surprise", () => {
    const rnd = seededRandom(3);
    const segment = Array.from({ length: 12 }, () => near(axis(DIM, 1), 0.1, rnd));
    const g = evaluateGate({
      segment: summarise(segment),
      segmentTokens: 1950,
      candidate: near(axis(DIM, 1), 0.1, rnd),
      surpriseHistory: [],
    });
    assert.ok(g.lengthPressure > 2.5);
    assert.equal(g.cut, true, `p=${g.p}`);
  });

  it("pressures and robust z follow the published shapes", () => {
    assert.equal(lengthPressure(100, DEFAULT_GATE), -1.3);
    assert.equal(lengthPressure(2000, DEFAULT_GATE), 3.0);
    assert.ok(Math.abs(lengthPressure(1350, DEFAULT_GATE) - 0.85) < 1e-9);
    assert.equal(turnPressure(2, DEFAULT_GATE), -0.85);
    assert.equal(turnPressure(100, DEFAULT_GATE), 1.0);
    assert.equal(robustZ(5, [1, 2, 3], 5), 0, "no z before 5 surprises");
    assert.equal(robustZ(-100, [1, 2, 3, 4, 5, 6], 5), -2);
    assert.ok(Math.abs(robustZ(3.5, [1, 2, 3, 4, 5, 6], 5) - 0) < 1e-9);
    assert.equal(cohesion([axis(DIM, 0)]), 1);
    assert.equal(cohesion([axis(DIM, 0), axis(DIM, 1)]), 0);
  });
});

describe("segmenter handler", () => {
  const cfg = defaultSegmenterConfig({ bufferTokens: 0 });
  const run = (state: SegmenterState, inputs: { i: number; v: Float32Array; session?: string }[]) => {
    let s = state;
    const out = [];
    for (const x of inputs) {
      const r = segmenterStep(s, { kind: "turn", turn: turn(x.i, x.session), embedding: x.v, nowMs: x.i * 1000 }, cfg);
      s = r.state;
      out.push(...r.segments);
    }
    return { state: s, segments: out };
  };

  it("closes on a topic shift and keeps every decision with the segment", () => {
    const rnd = seededRandom(11);
    const inputs = [
      ...Array.from({ length: 14 }, (_, i) => ({ i, v: near(axis(DIM, 0), 0.1, rnd) })),
      ...Array.from({ length: 4 }, (_, i) => ({ i: 14 + i, v: near(axis(DIM, 7), 0.1, rnd) })),
    ];
    const { state, segments } = run(initialSegmenterState("t", "c"), inputs);
    assert.equal(segments.length, 1);
    const [seg] = segments;
    assert.ok(seg);
    assert.equal(seg.closedBy, "gate");
    assert.deepEqual(
      seg.turns.map((t) => t.turnId),
      Array.from({ length: 14 }, (_, i) => `T${i}`),
    );
    assert.equal(seg.decisions.length, 14, "13 joins + the cut");
    assert.equal(seg.decisions.at(-1)?.turnId, "T14");
    assert.equal(seg.decisions.at(-1)?.cut, true);
    assert.equal(state.open?.turns[0]?.turnId, "T14");
  });

  it("closes on session change and on explicit flush; the short-term buffer batches by tokens", () => {
    const buffered = defaultSegmenterConfig({ bufferTokens: 10_000 });
    let s = initialSegmenterState("t", "c");
    const v = axis(DIM, 0);
    for (const i of [0, 1, 2])
      s = segmenterStep(s, { kind: "turn", turn: turn(i), embedding: v, nowMs: i }, buffered).state;
    const change = segmenterStep(s, { kind: "turn", turn: turn(3, "s2"), embedding: v, nowMs: 3 }, buffered);
    assert.equal(change.segments.length, 1, "session end always flushes the buffer");
    assert.equal(change.segments[0]?.closedBy, "session-end");
    const flushed = segmenterStep(change.state, { kind: "flush", reason: "flush", nowMs: 4 }, buffered);
    assert.equal(flushed.segments.length, 1);
    assert.equal(flushed.segments[0]?.closedBy, "flush");
    assert.equal(flushed.state.open, null);
    assert.equal(
      segmenterStep(flushed.state, { kind: "flush", reason: "idle", nowMs: 5 }, buffered).segments.length,
      0,
    );
  });

  it("holds closed segments in the buffer until the token threshold", () => {
    const small = defaultSegmenterConfig({ bufferTokens: 10_000, gate: { ...DEFAULT_GATE, hardCapTokens: 30 } });
    let s = initialSegmenterState("t", "c");
    let released = 0;
    for (let i = 0; i < 8; i++) {
      const r = segmenterStep(s, { kind: "turn", turn: turn(i), embedding: axis(DIM, 0), nowMs: i }, small);
      s = r.state;
      released += r.segments.length;
    }
    assert.equal(released, 0);
    assert.ok(s.buffer.length >= 2, "hard-cap segments wait in the buffer");
    assert.ok(s.buffer.every((b) => b.closedBy === "hard-cap"));
    assert.equal(isIdle(s, 7 + small.idleTimeoutMs, small), true);
    assert.equal(isIdle(s, 8, small), false);
  });

  it("is deterministic: the same turns give the same segment ids", () => {
    const rnd1 = seededRandom(5);
    const rnd2 = seededRandom(5);
    const mk = (rnd: () => number) =>
      Array.from({ length: 30 }, (_, i) => ({ i, v: near(axis(DIM, Math.floor(i / 10)), 0.1, rnd) }));
    const a = run(initialSegmenterState("t", "c"), mk(rnd1));
    const b = run(initialSegmenterState("t", "c"), mk(rnd2));
    assert.deepEqual(
      a.segments.map((s) => s.id),
      b.segments.map((s) => s.id),
    );
    assert.ok(a.segments.length >= 1);
  });
});
