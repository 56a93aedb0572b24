/**
 * Attention ∩ similarity boundaries in the segmenter (docs/segmenter.md): the rule per mode, the
 * pure step with attention shares (mode gate ignores them; mode attention cuts at a dip; mode both
 * lets the gate propose and attention confirm or veto), the decision log, the state round trip,
 * the scorer's batching (one attend() per prepared batch, memo hits afterwards) and the Kafka
 * handler computing a chunk's pairs in prepare(). The model is scripted here (one token per word,
 * a chosen share); onnx-attention.test.ts tests the real one.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import type { StageInput } from "../../services/core/adapters/kafka/stage-runtime.ts";
import { keyOf, type Segment, SegmentSchema, type SensoryTurn, SensoryTurnSchema } from "../../services/core/types.ts";
import { type AttentionParams, attentionCheck, attentionZ } from "../../services/segmenter/attention-rule.ts";
import { AttentionScorer } from "../../services/segmenter/attention-scorer.ts";
import { DEFAULT_GATE } from "../../services/segmenter/gate.ts";
import { segmenterStage } from "../../services/segmenter/kafka-handler.ts";
import {
  defaultSegmenterConfig,
  initialSegmenterState,
  isDisposable,
  type SegmenterConfig,
  type SegmenterState,
  segmenterStep,
} from "../../services/segmenter/segment-state.ts";
import { scriptedAttention } from "../helpers/scripted-attention.ts";
import { jsonCodec, stateCodec, turnOf } from "../helpers/stage-fixtures.ts";

const PARAMS: AttentionParams = { dipZ: -1, confirmZ: 0, historySize: 8, minHistory: 3 };
const sensory = (turnId: string, text: string): SensoryTurn => ({
  ...turnOf({ turnId, text }),
  compressed: text,
  keptRatio: 1,
});
const unit = (i: number): Float32Array => {
  const v = new Float32Array(8);
  v[i % 8] = 1;
  return v;
};
/** Gate thresholds that make the gate propose at every turn (0) or never (2). */
const cfg = (boundaries: SegmenterConfig["boundaries"], gateThreshold: number): SegmenterConfig =>
  defaultSegmenterConfig({ boundaries, attention: PARAMS, gate: { ...DEFAULT_GATE, threshold: gateThreshold } });

/** Runs turns with given shares (index 0 has none) through the pure step; returns the cut turn indexes. */
const run = (c: SegmenterConfig, shares: readonly number[]) => {
  let state: SegmenterState = initialSegmenterState("acme", "c1");
  const cuts: number[] = [];
  const segments: Segment[] = [];
  shares.forEach((share, i) => {
    const out = segmenterStep(
      state,
      {
        kind: "turn",
        turn: sensory(`t${i}`, `turn ${i}`),
        embedding: unit(0),
        ...(Number.isFinite(share) ? { attention: share } : {}),
        nowMs: i,
      },
      c,
    );
    state = JSON.parse(JSON.stringify(out.state)) as SegmenterState; // the changelog's round trip
    segments.push(...out.segments);
    if (i > 0 && state.open?.turns.length === 1) cuts.push(i);
  });
  const flushed = segmenterStep(state, { kind: "flush", reason: "flush", nowMs: 99 }, c);
  return { cuts, state, segments: [...segments, ...flushed.segments] };
};

const SHARES = [Number.NaN, 0.5, 0.45, 0.55, 0.6, 0.05, 0.62, 0.58, 0.65];

describe("attention rule", () => {
  it("orients z for dips: below the recent shares is negative, 0 until enough history", () => {
    assert.equal(attentionZ(0.1, [0.5, 0.5], 3), 0);
    assert.ok(attentionZ(0.1, [0.5, 0.5, 0.5], 3) < -1);
    assert.ok(attentionZ(0.1, [0.4, 0.5, 0.6, 0.45], 3) < -1);
    assert.ok(attentionZ(0.9, [0.4, 0.5, 0.6, 0.45], 3) > 0);
  });

  it("mode attention proposes at a dip; mode both confirms or vetoes the gate's cut", () => {
    assert.deepEqual(attentionCheck("attention", false, 0.1, -2, PARAMS), {
      share: 0.1,
      cut: true,
      record: { share: 0.1, z: -2, agrees: true, decision: "proposed" },
    });
    assert.equal(attentionCheck("attention", true, 0.5, -0.5, PARAMS).cut, false);
    assert.equal(attentionCheck("both", true, 0.1, -2, PARAMS).record.decision, "confirmed");
    assert.equal(attentionCheck("both", true, 0.6, 1, PARAMS).record.decision, "vetoed");
    assert.equal(attentionCheck("both", true, 0.6, 1, PARAMS).cut, false);
    const quiet = attentionCheck("both", false, 0.1, -2, PARAMS);
    assert.equal(quiet.cut, false);
    assert.equal(quiet.record.decision, "none");
  });
});

describe("segmenter step with attention", () => {
  it("mode gate ignores the shares: same cuts as without them, no attention in the log", () => {
    const withShares = run(cfg("gate", 0), SHARES);
    const without = run(
      cfg("gate", 0),
      SHARES.map(() => Number.NaN),
    );
    assert.deepEqual(withShares.cuts, without.cuts);
    assert.deepEqual(withShares.cuts, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.ok(withShares.segments.flatMap((s) => s.decisions).every((d) => d.attention === undefined));
    assert.equal(withShares.state.attentionShares, undefined);
  });

  it("mode attention cuts at the dip only, closed by attention, the gate's features beside it", () => {
    const r = run(cfg("attention", 2), SHARES);
    assert.deepEqual(r.cuts, [5]);
    const closer = r.segments[0] as Segment;
    assert.equal(closer.closedBy, "attention");
    const last = closer.decisions[closer.decisions.length - 1];
    assert.equal(last?.turnId, "t5");
    assert.equal(last?.reason, "attention");
    assert.equal(last?.attention?.decision, "proposed");
    assert.equal(last?.attention?.share, 0.05);
    assert.ok(typeof last?.p === "number" && typeof last.surprise === "number");
    assert.ok(SegmentSchema.safeParse(closer).success);
  });

  it("mode both: the gate proposes everywhere, attention confirms the dip and vetoes the rest", () => {
    const r = run(cfg("both", 0), SHARES);
    // z is 0 (confirms) until minHistory shares, so turns 1-3 are confirmed; then only the dip.
    assert.deepEqual(r.cuts, [1, 2, 3, 5]);
    const decisions = r.segments.flatMap((s) => s.decisions);
    const byTurn = new Map(decisions.map((d) => [d.turnId, d]));
    assert.equal(byTurn.get("t5")?.attention?.decision, "confirmed");
    assert.equal(byTurn.get("t5")?.reason, "gate");
    for (const t of ["t4", "t6", "t7", "t8"]) {
      assert.equal(byTurn.get(t)?.attention?.decision, "vetoed", t);
      assert.equal(byTurn.get(t)?.cut, false);
    }
  });

  it("mode both without a share falls back to the gate; mode attention does not cut", () => {
    const none = SHARES.map(() => Number.NaN);
    assert.deepEqual(run(cfg("both", 0), none).cuts, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.deepEqual(run(cfg("attention", 0), none).cuts, []);
  });

  it("the hard cap cuts in every mode", () => {
    for (const mode of ["attention", "both"] as const) {
      const c = { ...cfg(mode, 2), gate: { ...DEFAULT_GATE, threshold: 2, hardCapTokens: 5 } };
      const r = run(c, [Number.NaN, 0.5, 0.5, 0.5, 0.5]);
      assert.ok(r.cuts.length > 0, mode);
      assert.ok(
        r.segments.some((s) => s.closedBy === "hard-cap"),
        mode,
      );
    }
  });

  it("keeps a bounded share history, which makes the key's state non-disposable", () => {
    const r = run(cfg("attention", 2), [Number.NaN, ...Array.from({ length: 20 }, (_, i) => 0.3 + (i % 5) / 10)]);
    assert.equal(r.state.attentionShares?.length, PARAMS.historySize);
    assert.equal(isDisposable({ ...r.state, open: null, buffer: [], surprises: [] }), false);
  });
});

describe("attention scorer", () => {
  it("computes a batch's pairs in one attend() call and answers share() from the memo", async () => {
    const model = scriptedAttention((_prev, cur) => (cur.startsWith("new") ? 0.1 : 0.6));
    const scorer = new AttentionScorer(model);
    await scorer.prepare([
      { previous: "a b c", current: "d e" },
      { previous: "d e", current: "new topic here" },
    ]);
    assert.equal(model.calls.length, 1);
    assert.ok(Math.abs((await scorer.share("a b c", "d e")) - 0.6) < 1e-6);
    assert.ok(Math.abs((await scorer.share("d e", "new topic here")) - 0.1) < 1e-6);
    assert.equal(model.calls.length, 1);
    await scorer.share("x", "y");
    assert.equal(model.calls.length, 2);
  });
});

describe("segmenter stage handler with attention", () => {
  const KEY = keyOf("acme", "c1");
  const event = (value: SensoryTurn): StageInput<SensoryTurn> => ({ kind: "event", value });

  it("refuses an attention mode without the model", () => {
    assert.throws(
      () =>
        segmenterStage({
          input: jsonCodec("memory.sensory.v1", SensoryTurnSchema),
          output: jsonCodec("memory.segments.v1", SegmentSchema),
          stateCodec: stateCodec("segmenter"),
          embedder: new HashingEmbedder(),
          cfg: cfg("both", 0.55),
        }),
      /need the turn attention model/,
    );
  });

  it("prepares the chunk's pairs in one call, then cuts where attention dips", async () => {
    const model = scriptedAttention((_prev, cur) => (cur.includes("NEW") ? 0.05 : 0.5 + (cur.length % 3) / 20));
    const stage = segmenterStage({
      input: jsonCodec("memory.sensory.v1", SensoryTurnSchema),
      output: jsonCodec("memory.segments.v1", SegmentSchema),
      stateCodec: stateCodec("segmenter"),
      embedder: new HashingEmbedder(),
      cfg: { ...cfg("attention", 0.55), bufferTokens: 0 },
      attention: new AttentionScorer(model),
      clock: () => 1_700_000_000_000,
    });
    const texts = ["we talk", "still talking", "talking more", "and more so", "yes indeed", "NEW subject", "ok then"];
    const turns = texts.map((t, i) => sensory(`t${i}`, t));
    await stage.prepare?.(turns.map((t) => ({ key: KEY, input: event(t) })));
    assert.equal(model.calls.length, 1);
    assert.equal(model.calls[0]?.length, texts.length - 1);
    let state: SegmenterState | undefined;
    const outputs: Segment[] = [];
    for (const t of turns) {
      const r = await stage.handle(KEY, event(t), state);
      outputs.push(...r.outputs.map((o) => (o as { value: Segment }).value));
      state = r.state === undefined ? undefined : (JSON.parse(JSON.stringify(r.state)) as SegmenterState);
    }
    assert.equal(model.calls.length, 1, "handle() reads the prepared shares");
    assert.equal(outputs.length, 1);
    assert.equal(outputs[0]?.closedBy, "attention");
    assert.deepEqual(
      outputs[0]?.turns.map((t) => t.turnId),
      ["t0", "t1", "t2", "t3", "t4"],
    );
    assert.equal(outputs[0]?.decisions.at(-1)?.attention?.decision, "proposed");
  });
});
