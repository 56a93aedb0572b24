/**
 * Each turn embedded once in the distributed pipeline (issue 18), without a broker: the sensory
 * stage sends each turn's vector with it (the text both consumers embed, named by its model), the
 * segmenter and the indexer's raw-turn consumer use it instead of embedding the turn again, and a
 * turn without one (an older producer) or with another model's is embedded as before. The segmenter
 * decides the same cuts either way and keeps no vector in its state or segments. The Avro side (the
 * schema registry, old values, the stage processes) is test/integration/pipeline/turn-vectors.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { UpdateCandidatesEventSchema } from "../../services/core/adapters/kafka/serde.ts";
import type { StageInput } from "../../services/core/adapters/kafka/stage-runtime.ts";
import {
  carriedVector,
  type SensoryEvent,
  SensoryEventSchema,
  turnEmbeddingOf,
} from "../../services/core/adapters/kafka/turn-embedding.ts";
import { CachingEmbedder } from "../../services/core/caching-embedder.ts";
import { turnRowId } from "../../services/core/ids.ts";
import type { Compressor } from "../../services/core/ports.ts";
import { turnEmbeddingText } from "../../services/core/turn-text.ts";
import { keyOf, type Segment, SegmentSchema, type Turn, TurnSchema } from "../../services/core/types.ts";
import { rawTurnStage } from "../../services/indexer/raw-turn-stage.ts";
import { SEGMENTER_STATE_VERSION, segmenterStage } from "../../services/segmenter/kafka-handler.ts";
import { defaultSegmenterConfig, type SegmenterState } from "../../services/segmenter/segment-state.ts";
import { sensoryStage } from "../../services/sensory/kafka-handler.ts";
import { type LocalStores, withLocalStores } from "../helpers/local-stores.ts";
import { jsonCodec, stateCodec, turnOf } from "../helpers/stage-fixtures.ts";

const KEY = keyOf("acme", "c1");
const NOW = 1_700_000_000_000;

/** Keeps the text as it is. */
const identity: Compressor = { id: "identity", compress: async (text) => ({ text, keptRatio: 1 }) };

const TEXTS = [
  "I adopted a greyhound called Pepper last week.",
  "She sleeps on the sofa all afternoon.",
  "We walk along the canal every morning.",
  "My sister started a new job at the hospital in March.",
  "She works night shifts in the emergency ward.",
  "The quarterly budget review is due on Friday.",
];
const TURNS: Turn[] = TEXTS.map((text, i) => turnOf({ turnId: `t${i + 1}`, text }));

const sensoryWith = (embedder?: HashingEmbedder | CachingEmbedder) =>
  sensoryStage({
    input: jsonCodec("memory.turns.v1", TurnSchema),
    output: jsonCodec("memory.sensory.v1", SensoryEventSchema),
    compressor: identity,
    keepRate: 0.7,
    ...(embedder ? { embedder } : {}),
  });

/** The turns through the sensory stage as the runtime runs a chunk: prepare(), then handle() each. */
const throughSensory = async (stage: ReturnType<typeof sensoryWith>, turns: Turn[]): Promise<SensoryEvent[]> => {
  const inputs = turns.map((value) => ({ key: KEY, input: { kind: "event" as const, value } }));
  await stage.prepare?.(inputs);
  const out: SensoryEvent[] = [];
  for (const { key, input } of inputs)
    for (const o of (await stage.handle(key, input, undefined)).outputs)
      if ("value" in o && o.value) out.push(o.value as SensoryEvent);
  return out;
};

/** Events without their vectors: what an older sensory stage sent. */
const bare = (events: SensoryEvent[]): SensoryEvent[] => events.map(({ embedding: _, ...rest }) => rest);

describe("sensory stage: each turn's vector travels with it", () => {
  it("sends the vector of 'speaker: text' under the model's id, one model call per chunk", async () => {
    const model = new HashingEmbedder();
    const out = await throughSensory(sensoryWith(new CachingEmbedder(model)), TURNS);
    assert.equal(out.length, TURNS.length);
    assert.deepEqual(model.stats().calls, 1, "prepare() embeds the chunk in one call, handle() hits the cache");
    assert.equal(model.stats().texts, TURNS.length);
    const expected = await new HashingEmbedder().embed(TURNS.map((t) => turnEmbeddingText(t.speaker, t.text)));
    out.forEach((e, i) => {
      assert.equal(e.embedding?.model, model.id);
      assert.deepEqual(e.embedding?.vector, Array.from(expected[i] as Float32Array));
      assert.ok(SensoryEventSchema.safeParse(e).success, "the output passes the topic's schema");
    });
  });

  it("without an embedder sends no vector (consumers embed, as before)", async () => {
    const [e] = await throughSensory(sensoryWith(), TURNS.slice(0, 1));
    assert.equal(e?.embedding, undefined);
    assert.equal(e?.text, TEXTS[0]);
  });
});

describe("carried vectors", () => {
  const embedder = new HashingEmbedder();
  const vector = Float32Array.from({ length: embedder.dimension }, (_, i) => (i === 3 ? 1 : 0));

  it("are used when the model and dimension match, exactly as sent", () => {
    const got = carriedVector({ embedding: turnEmbeddingOf(embedder, vector) }, embedder);
    assert.deepEqual(got, vector);
  });

  it("are ignored from another model, of another dimension, or when absent", () => {
    assert.equal(
      carriedVector({ embedding: { model: "onnx:other:fp32", vector: Array.from(vector) } }, embedder),
      undefined,
    );
    assert.equal(carriedVector({ embedding: turnEmbeddingOf(embedder, vector.slice(1)) }, embedder), undefined);
    assert.equal(carriedVector({}, embedder), undefined);
  });

  it("are validated: finite numbers, at least one, a model id", () => {
    const base = { ...turnOf({ turnId: "t1", text: "x" }), compressed: "x", keptRatio: 1 };
    assert.ok(SensoryEventSchema.safeParse(base).success, "absent is fine");
    for (const embedding of [
      { model: "m", vector: [] },
      { model: "m", vector: [0.1, Number.NaN] },
      { model: "m", vector: [Number.POSITIVE_INFINITY] },
      { model: "", vector: [0.1] },
    ]) {
      const r = SensoryEventSchema.safeParse({ ...base, embedding });
      assert.equal(r.success, false, JSON.stringify(embedding));
      assert.match(r.error?.issues[0]?.path.join(".") ?? "", /^embedding\./);
    }
  });
});

describe("segmenter: a carried vector is not embedded again", () => {
  const stageWith = (embedder: HashingEmbedder) =>
    segmenterStage({
      input: jsonCodec("memory.sensory.v1", SensoryEventSchema),
      output: jsonCodec("memory.segments.v1", SegmentSchema),
      stateCodec: stateCodec("segmenter"),
      embedder: new CachingEmbedder(embedder),
      cfg: defaultSegmenterConfig({}),
      clock: () => NOW,
    });

  /** The chunk through prepare() and handle(), the state through JSON (the changelog), then a flush. */
  const run = async (embedder: HashingEmbedder, events: SensoryEvent[]) => {
    const stage = stageWith(embedder);
    const inputs = events.map((value) => ({ key: KEY, input: { kind: "event", value } as StageInput<SensoryEvent> }));
    await stage.prepare?.(inputs);
    let state: SegmenterState | undefined;
    const segments: Segment[] = [];
    const states: string[] = [];
    for (const { key, input } of [...inputs, { key: KEY, input: { kind: "control", control: "flush" } as const }]) {
      const r = await stage.handle(key, input, state);
      for (const o of r.outputs) if ("value" in o && o.value) segments.push(o.value as Segment);
      states.push(JSON.stringify(r.state ?? null));
      state = r.state === undefined ? undefined : (JSON.parse(JSON.stringify(r.state)) as SegmenterState);
    }
    return { segments, states };
  };

  it("cuts the same segments with the carried vectors, without a model call, and keeps no vector", async () => {
    const events = await throughSensory(sensoryWith(new HashingEmbedder()), TURNS);
    const carrying = new HashingEmbedder();
    const withVectors = await run(carrying, events);
    assert.equal(carrying.stats().texts, 0, "no turn embedded by the segmenter");
    const embedding = new HashingEmbedder();
    const without = await run(embedding, bare(events));
    assert.equal(embedding.stats().texts, TURNS.length, "turns without a vector are embedded, as before");
    assert.deepEqual(withVectors.segments, without.segments, "same segments, same decisions");
    assert.ok(withVectors.segments.length > 0);
    for (const s of withVectors.segments) assert.ok(SegmentSchema.safeParse(s).success);
    assert.deepEqual(withVectors.states, without.states, "the changelog entries are the same");
    assert.ok(
      withVectors.states.every((s) => !s.includes('"embedding"')),
      "no vector in the state",
    );
    assert.equal(SEGMENTER_STATE_VERSION, 2, "the state format is unchanged");
  });

  it("embeds a turn whose vector is another model's", async () => {
    const events = await throughSensory(sensoryWith(new HashingEmbedder(64)), TURNS.slice(0, 2));
    const embedder = new HashingEmbedder();
    await run(embedder, events);
    assert.equal(embedder.stats().texts, 2);
  });
});

describe("indexer raw-turn consumer: a carried vector is stored, not recomputed", () => {
  const withStores = (fn: (s: LocalStores) => Promise<void>): Promise<void> => withLocalStores("turn-vectors-", fn);

  it("writes carried vectors as sent and embeds only the turns without one, in one call", async () => {
    await withStores(async (s) => {
      const stage = rawTurnStage({
        input: jsonCodec("memory.sensory.v1", SensoryEventSchema),
        output: jsonCodec("memory.update-queue.v1", UpdateCandidatesEventSchema),
        ...s,
      });
      const events = await throughSensory(sensoryWith(new HashingEmbedder()), TURNS.slice(0, 3));
      // The middle turn comes from an older producer: no vector.
      const mixed = [events[0], ...bare([events[1] as SensoryEvent]), events[2]] as SensoryEvent[];
      const inputs = mixed.map((value) => ({ key: KEY, input: { kind: "event" as const, value } }));
      await stage.prepare?.(inputs);
      for (const { key, input } of inputs) await stage.handle(key, input, undefined);
      assert.equal(s.embedder.stats().texts, 1, "only the turn without a vector was embedded");
      assert.equal(s.embedder.stats().calls, 1);
      const ids = mixed.map((t) => turnRowId(t.conversation, t.turnId));
      const stored = new Map((await s.vectors.get("acme", ids)).map((v) => [v.id, v.vector]));
      assert.equal(stored.size, 3, "every turn has its vector");
      assert.deepEqual(Array.from(stored.get(ids[0] as string) ?? []), events[0]?.embedding?.vector);
      assert.deepEqual(Array.from(stored.get(ids[2] as string) ?? []), events[2]?.embedding?.vector);
      const rows = await s.graph.getTurns(
        "acme",
        mixed.map((t) => ({ conversation: t.conversation, turnId: t.turnId })),
      );
      assert.equal(rows.length, 3, "and its row");
    });
  });
});
