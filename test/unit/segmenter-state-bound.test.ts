/**
 * Segmenter state stays bounded (issue 12): the open segment keeps the gate's constant-size summary
 * of its embeddings, not one 384-d vector per turn. Prints the state's JSON bytes per open
 * conversation at 10 / 100 / 2,000 open turns in the old format (every embedding) and the current
 * one, and asserts the bound stated below. Also: the summary gives the gate the same inputs as the
 * full vectors (centroid bit-identical, cohesion within float noise), the old format migrates to
 * exactly the state a fresh run builds, and a key with nothing left is a tombstone.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { stateFromEnvelope } from "../../services/core/adapters/kafka/stage-runtime-parts.ts";
import { keyOf, type SensoryTurn } from "../../services/core/types.ts";
import { mean } from "../../services/core/vector-math.ts";
import { cohesion, DEFAULT_GATE, evaluateGate, summarise } from "../../services/segmenter/gate.ts";
import { migrateSegmenterState, SEGMENTER_STATE_VERSION } from "../../services/segmenter/kafka-handler.ts";
import {
  defaultSegmenterConfig,
  initialSegmenterState,
  isDisposable,
  loadSummary,
  type SegmenterState,
  segmenterStep,
  upgradeSegmenterState,
} from "../../services/segmenter/segment-state.ts";
import { axis, near, seededRandom } from "../helpers/seeded.ts";

const DIM = 384;
/**
 * The bound: the gate's part of the state is constant (under 11 KB at 384 dimensions, whatever the
 * turn count); the rest is the open turns themselves and their boundary decisions, which the closed
 * segment carries out, about 0.5 KB per short turn. A 2,000-turn open segment stays under 1 MB
 * (Kafka's default message limit); the old format needed ~8 KB per turn, ~16 MB at 2,000 turns.
 */
const GATE_BYTES_MAX = 11 * 1024;
const BYTES_2000_MAX = 1_000_000;

const WORDS = ["garden", "tomatoes", "watering", "the", "plan", "we", "talked", "about", "soil", "seeds", "sun"];

/** Deterministic short turns (seeded) and similar vectors, so that only the size rules could cut. */
const conversation = (n: number, seed = 42) => {
  const rnd = seededRandom(seed);
  const topic = axis(DIM, 0);
  return Array.from({ length: n }, (_, i) => {
    const text = Array.from({ length: 6 }, () => WORDS[Math.floor(rnd() * WORDS.length)]).join(" ");
    const turn: SensoryTurn = {
      tenant: "t",
      conversation: "c",
      turnId: `T${i}`,
      speaker: i % 2 ? "A" : "B",
      role: "user",
      text,
      compressed: text,
      keptRatio: 1,
      timestamp: new Date(Date.UTC(2024, 0, 1) + i * 60_000).toISOString(),
      sessionId: "s1",
    };
    return { turn, embedding: near(topic, 0.05, rnd) };
  });
};

/** A gate that never cuts on its own and a cap no test conversation reaches: one open segment. */
const NEVER_CLOSES = defaultSegmenterConfig({
  bufferTokens: 0,
  gate: { ...DEFAULT_GATE, threshold: 1.01, hardCapTokens: 1_000_000 },
});

const openFor = (turns: ReturnType<typeof conversation>) => {
  let s = initialSegmenterState("t", "c");
  for (const [i, x] of turns.entries()) {
    const r = segmenterStep(s, { kind: "turn", ...x, nowMs: i }, NEVER_CLOSES);
    assert.equal(r.segments.length, 0, "no segment closes");
    s = r.state;
  }
  return s;
};

/** The same state in format 1: the gate summary replaced by every open turn's embedding. */
const asV1 = (s: SegmenterState, turns: ReturnType<typeof conversation>): unknown => {
  if (!s.open) return s;
  const { gate: _gate, ...rest } = s.open;
  return { ...s, open: { ...rest, embeddings: turns.map((x) => Array.from(x.embedding)) } };
};

describe("bounded segmenter state", () => {
  it("keeps the gate's part constant and the whole state under the bound at 10 / 100 / 2,000 open turns", () => {
    const rows: string[] = [];
    for (const n of [10, 100, 2000]) {
      const turns = conversation(n);
      const s = openFor(turns);
      assert.equal(s.open?.turns.length, n);
      const after = JSON.stringify(s).length;
      const before = JSON.stringify(asV1(s, turns)).length;
      const gate = JSON.stringify(s.open?.gate).length;
      rows.push(`${n} open turns: ${before} B -> ${after} B (gate summary ${gate} B)`);
      assert.ok(gate < GATE_BYTES_MAX, `gate summary ${gate} B`);
      if (n === 2000) assert.ok(after < BYTES_2000_MAX, `2,000 open turns: ${after} B`);
    }
    console.log(`segmenter state bytes per open conversation (JSON, before -> after):\n  ${rows.join("\n  ")}`);
  });

  it("gives the gate the inputs the full vectors gave: centroid bit-identical, cohesion within float noise", () => {
    const rnd = seededRandom(9);
    const vectors = Array.from({ length: 40 }, (_, i) => near(axis(DIM, i % 3), 0.3, rnd));
    const s = summarise(vectors);
    const centroid = new Float32Array(DIM);
    for (let i = 0; i < DIM; i++) centroid[i] = (s.sum[i] as number) / s.count;
    assert.deepEqual(centroid, mean(vectors));
    assert.deepEqual(s.last, vectors.slice(-2));
    const pairs = (vectors.length * (vectors.length - 1)) / 2;
    assert.ok(Math.abs(s.pairCosines / pairs - cohesion(vectors)) < 1e-12);
    const g = evaluateGate({ segment: s, segmentTokens: 300, candidate: axis(DIM, 7), surpriseHistory: [] });
    const reference = cohesion(vectors) - cohesion([...vectors, axis(DIM, 7)]);
    assert.ok(Math.abs(g.cohesionDrop - reference) < 1e-12);
  });

  it("migrates a format-1 state (every embedding) to exactly the state a fresh run builds", () => {
    const turns = conversation(25, 7);
    const s = openFor(turns);
    const v1 = JSON.stringify(asV1(s, turns));
    assert.deepEqual(upgradeSegmenterState(JSON.parse(v1) as SegmenterState), s);
    assert.deepEqual(migrateSegmenterState(1, v1), s);
    const restored = stateFromEnvelope(
      { version: SEGMENTER_STATE_VERSION, migrate: migrateSegmenterState },
      { stateVersion: 1, payload: v1 },
    );
    assert.deepEqual(restored, s);
    assert.deepEqual(loadSummary(restored.open?.gate ?? assert.fail()).count, 25);
    assert.throws(() => stateFromEnvelope({ version: SEGMENTER_STATE_VERSION }, { stateVersion: 1, payload: v1 }));
    // The migrated state carries on exactly as the fresh one.
    const next = conversation(26, 7).at(-1) ?? assert.fail();
    assert.deepEqual(
      segmenterStep(migrateSegmenterState(1, v1), { kind: "turn", ...next, nowMs: 99 }, NEVER_CLOSES),
      segmenterStep(s, { kind: "turn", ...next, nowMs: 99 }, NEVER_CLOSES),
    );
    assert.equal(upgradeSegmenterState(s), s, "a current state passes through");
  });

  it("a key with nothing open, buffered or remembered is disposable (tombstone); surprise history is kept", () => {
    const cfg = defaultSegmenterConfig({ bufferTokens: 0 });
    const [a, b] = conversation(2);
    assert.ok(a && b);
    const one = segmenterStep(initialSegmenterState("t", "c"), { kind: "turn", ...a, nowMs: 1 }, cfg).state;
    const flushedOne = segmenterStep(one, { kind: "flush", reason: "idle", nowMs: 2 }, cfg);
    assert.equal(flushedOne.segments.length, 1);
    assert.equal(isDisposable(flushedOne.state), true, "one turn: no gate ran, nothing to keep");
    const two = segmenterStep(one, { kind: "turn", ...b, nowMs: 2 }, cfg).state;
    const flushedTwo = segmenterStep(two, { kind: "flush", reason: "idle", nowMs: 3 }, cfg).state;
    assert.equal(isDisposable(flushedTwo), false, "the surprise history the next session's z reads");
    assert.equal(flushedTwo.surprises.length, 1);
    assert.ok(JSON.stringify(flushedTwo).length < 200 + 24 * DEFAULT_GATE.historySize);
    assert.equal(keyOf("t", "c"), "t/c");
  });
});
