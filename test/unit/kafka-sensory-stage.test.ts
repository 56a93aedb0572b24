/**
 * The sensory stage handler without a broker: a turn becomes one compressed turn under the same
 * tenant/conversation key; control messages keep their place; a key that does not match its turn is
 * poison (straight to the dead-letter queue); a compressor failure is an ordinary error (retried).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PoisonError, type StageOutput } from "../../services/core/adapters/kafka/stage-runtime.ts";
import type { Compressor } from "../../services/core/ports.ts";
import { keyOf, type SensoryTurn, SensoryTurnSchema, TurnSchema } from "../../services/core/types.ts";
import { sensoryStage } from "../../services/sensory/kafka-handler.ts";
import { jsonCodec, turnOf } from "../helpers/stage-fixtures.ts";

/** Keeps every other word; records what it was asked. */
const halving = (): Compressor & { calls: { text: string; keepRate: number }[] } => {
  const calls: { text: string; keepRate: number }[] = [];
  return {
    id: "halving",
    calls,
    async compress(text, keepRate) {
      calls.push({ text, keepRate });
      const words = text.split(" ");
      return { text: words.filter((_, i) => i % 2 === 0).join(" "), keptRatio: 0.5 };
    },
  };
};

const stageWith = (compressor: Compressor) =>
  sensoryStage({
    input: jsonCodec("memory.turns.v1", TurnSchema),
    output: jsonCodec("memory.sensory.v1", SensoryTurnSchema),
    compressor,
    keepRate: 0.7,
  });

const KEY = keyOf("acme", "c1");

describe("sensory stage handler", () => {
  it("is stateless and reads turns / writes compressed turns on its codecs' topics", () => {
    const stage = stageWith(halving());
    assert.equal(stage.name, "sensory");
    assert.equal(stage.state, undefined);
    assert.equal(stage.input.topic, "memory.turns.v1");
    assert.equal(stage.output?.topic, "memory.sensory.v1");
  });

  it("turns one turn into one compressed turn under the turn's own key, the original text kept", async () => {
    const compressor = halving();
    const turn = turnOf({ turnId: "t1", text: "I adopted a dog called Pepper on Saturday" });
    const r = await stageWith(compressor).handle(KEY, { kind: "event", value: turn }, undefined);
    assert.deepEqual(compressor.calls, [{ text: turn.text, keepRate: 0.7 }]);
    assert.equal(r.state, undefined);
    assert.equal(r.outputs.length, 1);
    const out = r.outputs[0] as { key: string; value: SensoryTurn };
    assert.equal(out.key, KEY);
    assert.deepEqual(out.value, { ...turn, compressed: "I a called on", keptRatio: 0.5 });
    assert.ok(SensoryTurnSchema.safeParse(out.value).success, "the output passes the output topic's schema");
  });

  for (const control of ["flush", "session-end", "idle"] as const) {
    it(`forwards the ${control} control message under its key without compressing anything`, async () => {
      const compressor = halving();
      const r = await stageWith(compressor).handle(KEY, { kind: "control", control }, undefined);
      assert.deepEqual(r.outputs, [{ key: KEY, control }] satisfies StageOutput<SensoryTurn>[]);
      assert.equal(r.state, undefined);
      assert.equal(compressor.calls.length, 0);
    });
  }

  it("refuses a key that is not the turn's tenant/conversation as poison, before compressing", async () => {
    const compressor = halving();
    const turn = turnOf({ turnId: "t1", text: "hello there" });
    for (const key of [keyOf("other", "c1"), keyOf("acme", "c2"), "", "acme"])
      await assert.rejects(
        stageWith(compressor).handle(key, { kind: "event", value: turn }, undefined),
        (err: unknown) => err instanceof PoisonError && /does not match/.test(err.message),
        `key ${JSON.stringify(key)}`,
      );
    assert.equal(compressor.calls.length, 0);
  });

  it("lets a compressor failure through as an ordinary error, which the runtime retries", async () => {
    const failing: Compressor = {
      id: "failing",
      compress: async () => {
        throw new Error("model not loaded");
      },
    };
    const turn = turnOf({ turnId: "t1", text: "hello there" });
    await assert.rejects(
      stageWith(failing).handle(KEY, { kind: "event", value: turn }, undefined),
      (err: unknown) => err instanceof Error && !(err instanceof PoisonError) && err.message === "model not loaded",
    );
  });

  it("forwards erase and erase-tenant controls under their own key, compressing nothing", async () => {
    const compressor = halving();
    const stage = stageWith(compressor);
    const tenantKey = keyOf("acme", "\u0000erase-tenant:2:17");
    for (const [key, control] of [
      [KEY, "erase"],
      [tenantKey, "erase-tenant"],
    ] as const) {
      const r = await stage.handle(key, { kind: "control", control }, undefined);
      assert.deepEqual(r.outputs, [{ key, control }] satisfies StageOutput<SensoryTurn>[]);
      assert.equal(r.state, undefined);
    }
    assert.equal(compressor.calls.length, 0);
  });
});
