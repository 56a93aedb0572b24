/**
 * The encoder stage handler without a broker: a closed segment and the conversation's keyed
 * disambiguation context become one records event under the same key, and the new context is the
 * key's new state; LLM cost is reported per tenant; flushes stop here; a key that does not match its
 * segment is poison; an encoder failure is an ordinary (retried) error.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PoisonError } from "../../services/core/adapters/kafka/stage-runtime.ts";
import type { LlmCost, SegmentEncoder } from "../../services/core/ports.ts";
import {
  type DisambiguationContext,
  keyOf,
  type RecordsEvent,
  RecordsEventSchema,
  type Segment,
  SegmentSchema,
} from "../../services/core/types.ts";
import { ExtractiveEncoder } from "../../services/encoder/encode-segment.ts";
import { ENCODER_STATE_VERSION, encoderStage } from "../../services/encoder/kafka-handler.ts";
import { jsonCodec, recordOf, segmentOf, segmentTurnOf, stateCodec } from "../helpers/stage-fixtures.ts";

const KEY = keyOf("acme", "c1");
const NO_COST: LlmCost = { llmCalls: 0, inputTokens: 0, outputTokens: 0 };

const segment = segmentOf("seg-1", [
  segmentTurnOf("t1", "I moved to Paris last month!", "2023-06-01T10:00:00.000Z"),
  segmentTurnOf("t2", "My sister Melanie paints.", "2023-06-01T10:01:00.000Z"),
]);

const contextOf = (n: number): DisambiguationContext => ({
  aliases: {},
  referents: { she: `Person${n}` },
  speakers: ["Caroline"],
  recentRecords: [`r${n}`],
});

/** Records one record per segment and a context that counts the segments seen. */
const scripted = (cost: LlmCost = NO_COST) => {
  const seen: { segment: Segment; context: DisambiguationContext }[] = [];
  const encoder: SegmentEncoder = {
    id: "scripted",
    async encode(s, context) {
      seen.push({ segment: s, context });
      const n = seen.length;
      const record = recordOf(s, {
        text: `Caroline moved to Paris (${n}).`,
        entities: [{ name: "Caroline", kind: "person", aliases: [] }],
        topics: ["moving"],
        turnIds: ["t1"],
        saidAt: "2023-06-01T10:00:00.000Z",
      });
      return { records: [record], context: contextOf(n), cost };
    },
  };
  return { encoder, seen };
};

const stageWith = (encoder: SegmentEncoder, onCost?: (tenant: string, cost: LlmCost) => void) =>
  encoderStage({
    input: jsonCodec("memory.segments.v1", SegmentSchema),
    output: jsonCodec("memory.records.v1", RecordsEventSchema),
    stateCodec: stateCodec("encoder"),
    encoder,
    ...(onCost ? { onCost } : {}),
  });

describe("encoder stage handler", () => {
  it("keeps its context as versioned keyed state in its changelog", () => {
    const stage = stageWith(scripted().encoder);
    assert.equal(stage.name, "encoder");
    assert.equal(stage.state?.version, ENCODER_STATE_VERSION);
    assert.equal(stage.state?.codec.topic, "memory.encoder-state.v1");
  });

  it("encodes a first segment from an empty context; the records event and the new state carry the new context", async () => {
    const { encoder, seen } = scripted();
    const r = await stageWith(encoder).handle(KEY, { kind: "event", value: segment }, undefined);
    assert.deepEqual(seen[0]?.context, { aliases: {}, referents: {}, speakers: [], recentRecords: [] });
    assert.equal(r.outputs.length, 1);
    const out = r.outputs[0] as { key: string; value: RecordsEvent };
    assert.equal(out.key, KEY);
    assert.equal(out.value.tenant, "acme");
    assert.equal(out.value.conversation, "c1");
    assert.deepEqual(out.value.segment, segment);
    assert.deepEqual(
      out.value.records.map((x) => x.text),
      ["Caroline moved to Paris (1)."],
    );
    assert.deepEqual(out.value.context, contextOf(1));
    assert.deepEqual(r.state, contextOf(1));
    assert.ok(RecordsEventSchema.safeParse(out.value).success, "the output passes the records topic's schema");
  });

  it("hands the key's state to the encoder: the context of one segment reaches the next", async () => {
    const { encoder, seen } = scripted();
    const stage = stageWith(encoder);
    const first = await stage.handle(KEY, { kind: "event", value: segment }, undefined);
    // The runtime keeps the state as JSON in the changelog: what comes back is a parsed copy.
    const restored = JSON.parse(JSON.stringify(first.state)) as DisambiguationContext;
    const second = await stage.handle(KEY, { kind: "event", value: segment }, restored);
    assert.deepEqual(seen[1]?.context, contextOf(1));
    assert.deepEqual(second.state, contextOf(2));
  });

  it("reports LLM cost for the segment's tenant only when the encoder called an LLM", async () => {
    const costs: [string, LlmCost][] = [];
    const onCost = (tenant: string, cost: LlmCost) => costs.push([tenant, cost]);
    await stageWith(scripted().encoder, onCost).handle(KEY, { kind: "event", value: segment }, undefined);
    assert.deepEqual(costs, []);
    const paid: LlmCost = { llmCalls: 1, inputTokens: 120, outputTokens: 30 };
    await stageWith(scripted(paid).encoder, onCost).handle(KEY, { kind: "event", value: segment }, undefined);
    assert.deepEqual(costs, [["acme", paid]]);
  });

  for (const control of ["flush", "session-end", "idle"] as const) {
    it(`drops the ${control} control message and keeps the state as it is`, async () => {
      const { encoder, seen } = scripted();
      const state = contextOf(7);
      const r = await stageWith(encoder).handle(KEY, { kind: "control", control }, state);
      assert.deepEqual(r.outputs, []);
      assert.equal(r.state, state);
      assert.equal(seen.length, 0);
    });
  }

  it("refuses a key that is not the segment's tenant/conversation as poison, before encoding", async () => {
    const { encoder, seen } = scripted();
    for (const key of [keyOf("other", "c1"), keyOf("acme", "c2"), ""])
      await assert.rejects(
        stageWith(encoder).handle(key, { kind: "event", value: segment }, undefined),
        (err: unknown) => err instanceof PoisonError && /does not match/.test(err.message),
      );
    assert.equal(seen.length, 0);
  });

  it("lets an encoder failure through as an ordinary error, which the runtime retries", async () => {
    const failing: SegmentEncoder = {
      id: "failing",
      encode: async () => {
        throw new Error("LLM timed out");
      },
    };
    await assert.rejects(
      stageWith(failing).handle(KEY, { kind: "event", value: segment }, undefined),
      (err: unknown) => err instanceof Error && !(err instanceof PoisonError),
    );
  });

  it("with the default extractive encoder: records cite the segment's turns and the state names the speaker", async () => {
    const r = await stageWith(new ExtractiveEncoder()).handle(KEY, { kind: "event", value: segment }, undefined);
    const out = r.outputs[0] as { key: string; value: RecordsEvent };
    assert.ok(out.value.records.length > 0, "records extracted");
    const turnIds = new Set(segment.turns.map((t) => t.turnId));
    for (const rec of out.value.records) {
      assert.equal(rec.source.segmentId, segment.id);
      assert.ok(
        rec.source.turnIds.every((t) => turnIds.has(t)),
        `${rec.text} cites ${rec.source.turnIds.join(",")}`,
      );
    }
    assert.ok(r.state?.speakers.includes("Caroline"), "the context knows the speaker");
    assert.deepEqual(r.state, out.value.context);
  });

  it("drops the context on an erase control and forwards it to the indexer; flushes still stop here", async () => {
    const { encoder, seen } = scripted();
    const stage = stageWith(encoder);
    const r = await stage.handle(KEY, { kind: "control", control: "erase" }, contextOf(1));
    assert.deepEqual(r.outputs, [{ key: KEY, control: "erase" }]);
    assert.equal(r.state, undefined);
    assert.ok(r.dropKeys?.(KEY));
    assert.equal(r.dropKeys?.(keyOf("acme", "c2")), false);
    const tenantKey = keyOf("acme", "\u0000erase-tenant:1:0");
    const t = await stage.handle(tenantKey, { kind: "control", control: "erase-tenant" }, undefined);
    assert.deepEqual(t.outputs, [{ key: tenantKey, control: "erase-tenant" }]);
    assert.ok(t.dropKeys?.(keyOf("acme", "c9")));
    assert.equal(t.dropKeys?.(keyOf("acme/eu", "c9")), false);
    assert.deepEqual(await stage.handle(KEY, { kind: "control", control: "flush" }, contextOf(1)), {
      outputs: [],
      state: contextOf(1),
    });
    assert.equal(seen.length, 0, "nothing encoded");
  });
});
