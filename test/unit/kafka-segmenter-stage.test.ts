/**
 * The segmenter stage handler without a broker: compressed turns and the conversation's keyed state
 * (open segment + short-term buffer) become closed segments under the same key. prepare() embeds a
 * chunk's turns in one call; flush / session-end / idle controls close and release; the tick asks
 * for an idle flush of silent keys only; the state survives the JSON round trip of the changelog; a
 * key that is not the turn's tenant/conversation is poison.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { PoisonError, type StageInput } from "../../services/core/adapters/kafka/stage-runtime.ts";
import type { Embedder } from "../../services/core/ports.ts";
import { keyOf, type Segment, SegmentSchema, type SensoryTurn, SensoryTurnSchema } from "../../services/core/types.ts";
import { summaryOf } from "../../services/segmenter/gate.ts";
import { SEGMENTER_STATE_VERSION, segmenterStage } from "../../services/segmenter/kafka-handler.ts";
import {
  defaultSegmenterConfig,
  initialSegmenterState,
  type SegmenterConfig,
  type SegmenterState,
  storeSummary,
} from "../../services/segmenter/segment-state.ts";
import { jsonCodec, stateCodec, turnOf } from "../helpers/stage-fixtures.ts";

const KEY = keyOf("acme", "c1");
const NOW = 1_700_000_000_000;

const sensory = (turnId: string, text: string, sessionId = "s1"): SensoryTurn => ({
  ...turnOf({ turnId, text, sessionId }),
  compressed: text.toLowerCase(),
  keptRatio: 1,
});

/** The hashing embedder, with every embed call's texts recorded. */
const recording = (): Embedder & { calls: string[][] } => {
  const inner = new HashingEmbedder();
  const calls: string[][] = [];
  return {
    calls,
    id: inner.id,
    dimension: inner.dimension,
    stats: () => inner.stats(),
    embed: async (texts) => {
      calls.push([...texts]);
      return inner.embed(texts);
    },
  };
};

const stageWith = (embedder: Embedder, cfg: Partial<SegmenterConfig> = {}, clock = () => NOW) =>
  segmenterStage({
    input: jsonCodec("memory.sensory.v1", SensoryTurnSchema),
    output: jsonCodec("memory.segments.v1", SegmentSchema),
    stateCodec: stateCodec("segmenter"),
    embedder,
    cfg: defaultSegmenterConfig(cfg),
    clock,
  });

const event = (value: SensoryTurn): StageInput<SensoryTurn> => ({ kind: "event", value });

/** Runs turns through the handler as the runtime would, the state going through JSON in between. */
const feed = async (stage: ReturnType<typeof stageWith>, turns: SensoryTurn[]) => {
  let state: SegmenterState | undefined;
  const outputs: { key: string; value: Segment }[] = [];
  for (const t of turns) {
    const r = await stage.handle(KEY, event(t), state);
    outputs.push(...(r.outputs as { key: string; value: Segment }[]));
    state = r.state === undefined ? undefined : (JSON.parse(JSON.stringify(r.state)) as SegmenterState);
  }
  return { state, outputs };
};

describe("segmenter stage handler", () => {
  it("keeps its open segments as versioned keyed state in its changelog", () => {
    const stage = stageWith(recording());
    assert.equal(stage.name, "segmenter");
    assert.equal(stage.state?.version, SEGMENTER_STATE_VERSION);
    assert.equal(stage.state?.codec.topic, "memory.segmenter-state.v1");
  });

  it("prepare() embeds the chunk's turns in one call and skips control messages", async () => {
    const embedder = recording();
    const stage = stageWith(embedder);
    await stage.prepare?.([
      { key: KEY, input: event(sensory("t1", "I moved to Paris.")) },
      { key: KEY, input: { kind: "control", control: "flush" } },
      { key: keyOf("acme", "c2"), input: event(sensory("t2", "Melanie paints.")) },
    ]);
    assert.equal(embedder.calls.length, 1);
    assert.equal(embedder.calls[0]?.length, 2);
    assert.ok(embedder.calls[0]?.[0]?.includes("I moved to Paris."));
    await stage.prepare?.([{ key: KEY, input: { kind: "control", control: "flush" } }]);
    assert.equal(embedder.calls.length, 1, "no call for a chunk of controls");
  });

  it("opens a segment for a conversation's first turn: no output yet, a JSON-safe state for the key", async () => {
    const r = await stageWith(recording()).handle(KEY, event(sensory("t1", "I moved to Paris last month.")), undefined);
    assert.deepEqual(r.outputs, []);
    const state = r.state as SegmenterState;
    assert.equal(state.tenant, "acme");
    assert.equal(state.conversation, "c1");
    assert.deepEqual(
      state.open?.turns.map((t) => t.turnId),
      ["t1"],
    );
    assert.equal(state.lastActivityMs, NOW);
    assert.deepEqual(JSON.parse(JSON.stringify(state)), state, "the changelog keeps it as JSON");
  });

  for (const [control, closedBy] of [
    ["flush", "flush"],
    ["session-end", "session-end"],
    ["idle", "idle"],
  ] as const) {
    it(`closes and releases the open segment on a ${control} control, under the conversation's key`, async () => {
      const stage = stageWith(recording());
      const { state } = await feed(stage, [sensory("t1", "I moved to Paris."), sensory("t2", "It was a big change.")]);
      const r = await stage.handle(KEY, { kind: "control", control }, state);
      assert.equal(r.outputs.length, 1);
      const out = r.outputs[0] as { key: string; value: Segment };
      assert.equal(out.key, KEY);
      assert.equal(out.value.closedBy, closedBy);
      assert.deepEqual(
        out.value.turns.map((t) => t.turnId),
        ["t1", "t2"],
      );
      assert.ok(SegmentSchema.safeParse(out.value).success, "the output passes the segments topic's schema");
      assert.equal(r.state?.open, null);
      assert.deepEqual(r.state?.buffer, []);
    });
  }

  it("deletes the key (a changelog tombstone) when a flush leaves nothing, not even surprise history", async () => {
    const stage = stageWith(recording());
    const { state } = await feed(stage, [sensory("t1", "I moved to Paris.")]);
    const r = await stage.handle(KEY, { kind: "control", control: "idle" }, state);
    assert.equal(r.outputs.length, 1);
    assert.equal(r.state, undefined);
  });

  it("does nothing for a control message on a key without state", async () => {
    const r = await stageWith(recording()).handle(KEY, { kind: "control", control: "flush" }, undefined);
    assert.deepEqual(r, { outputs: [], state: undefined });
  });

  it("releases a segment closed by a new session as soon as the buffer allows", async () => {
    const stage = stageWith(recording(), { bufferTokens: 0 });
    const { state, outputs } = await feed(stage, [
      sensory("t1", "I moved to Paris.", "s1"),
      sensory("t2", "Hello again!", "s2"),
    ]);
    assert.deepEqual(
      outputs.map((o) => [o.key, o.value.closedBy, o.value.turns.map((t) => t.turnId)]),
      [[KEY, "session-end", ["t1"]]],
    );
    assert.deepEqual(
      state?.open?.turns.map((t) => t.turnId),
      ["t2"],
    );
  });

  it("refuses a key that is not tenant/conversation, or not the turn's, as poison", async () => {
    const stage = stageWith(recording());
    const turn = sensory("t1", "hello");
    for (const key of ["acme", "", keyOf("other", "c1"), keyOf("acme", "c2")])
      await assert.rejects(
        stage.handle(key, event(turn), undefined),
        (err: unknown) => err instanceof PoisonError,
        `key ${JSON.stringify(key)}`,
      );
  });

  it("lets an embedder that returns no vector fail as an ordinary error, which the runtime retries", async () => {
    const empty: Embedder = { ...recording(), embed: async () => [] };
    await assert.rejects(
      stageWith(empty).handle(KEY, event(sensory("t1", "hello")), undefined),
      (err: unknown) => err instanceof Error && !(err instanceof PoisonError) && /no vector/.test(err.message),
    );
  });

  it("tick() asks for an idle flush of the keys silent past the timeout that hold something", () => {
    const cfg = { idleTimeoutMs: 60_000 };
    const stage = stageWith(recording(), cfg);
    const open = (lastActivityMs: number): SegmenterState => ({
      ...initialSegmenterState("acme", "x"),
      open: {
        sessionId: "s1",
        turns: [],
        gate: storeSummary(summaryOf(new Float32Array(4))),
        tokens: 0,
        decisions: [],
      },
      lastActivityMs,
    });
    const states = new Map<string, SegmenterState>([
      [keyOf("acme", "silent"), open(NOW - 61_000)],
      [keyOf("acme", "recent"), open(NOW - 1_000)],
      [keyOf("acme", "empty"), { ...initialSegmenterState("acme", "empty"), lastActivityMs: NOW - 600_000 }],
    ]);
    assert.deepEqual(stage.tick?.(states, NOW), [
      { key: keyOf("acme", "silent"), input: { kind: "control", control: "idle" } },
    ]);
  });

  it("on an erase control drops the conversation's state without releasing the open segment, and forwards it", async () => {
    const stage = stageWith(recording());
    const { state } = await feed(stage, [sensory("t1", "I moved to Paris."), sensory("t2", "It was a big change.")]);
    assert.ok(state?.open, "a segment is open");
    const r = await stage.handle(KEY, { kind: "control", control: "erase" }, state);
    assert.deepEqual(r.outputs, [{ key: KEY, control: "erase" }], "no segment released, the control travels on");
    assert.equal(r.state, undefined, "a tombstone in the changelog");
    assert.ok(r.dropKeys?.(KEY));
    assert.equal(r.dropKeys?.(keyOf("acme", "c2")), false, "another conversation keeps its state");
  });

  it("on an erase-tenant control drops every conversation of the tenant, and no other tenant's", async () => {
    const key = keyOf("acme", "\u0000erase-tenant:0:3");
    const r = await stageWith(recording()).handle(key, { kind: "control", control: "erase-tenant" }, undefined);
    assert.deepEqual(r.outputs, [{ key, control: "erase-tenant" }]);
    assert.equal(r.state, undefined);
    const drop = r.dropKeys ?? (() => false);
    assert.ok(drop(keyOf("acme", "c1")) && drop(keyOf("acme", "c2")) && drop(keyOf("acme", "a/b")));
    assert.equal(drop(keyOf("acme/eu", "c1")), false, "tenant acme/eu is not tenant acme");
    assert.equal(drop(keyOf("globex", "c1")), false);
    assert.equal(drop("not-a-key"), false);
  });

  it("refuses an erase control whose key is not tenant/conversation as poison", async () => {
    for (const control of ["erase", "erase-tenant"] as const)
      await assert.rejects(
        stageWith(recording()).handle("acme", { kind: "control", control }, undefined),
        (err: unknown) => err instanceof PoisonError,
      );
  });
});
