/**
 * The stage runtime's decisions that need no broker (services/core/adapters/kafka/stage-runtime-parts.ts):
 * chunks of a batch, retries and backoff, committed offsets and lag, inputs from messages (control
 * header or value), outputs and changelog entries as messages, and the changelog read back.
 * (Sends split by size and dead-letter sizes: kafka-send-limits.test.ts.)
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { StageStateEnvelope } from "../../services/core/adapters/kafka/serde.ts";
import {
  afterFailure,
  applyStates,
  changelogMessages,
  chunksOf,
  decodeStageInput,
  lagAfter,
  nextOffset,
  outputMessages,
  PoisonError,
  refusalLabel,
  restoredUpTo,
  restoreTargets,
  stateFromEnvelope,
} from "../../services/core/adapters/kafka/stage-runtime-parts.ts";
import { CONTROL_HEADER } from "../../services/core/adapters/kafka/topics.ts";

/** Values are JSON objects with a string `v`; anything else is refused with a reason. */
const codec = {
  decode: async (bytes: Buffer | null) => {
    if (bytes === null) return { ok: false as const, reason: "decode: empty value" };
    const v: unknown = JSON.parse(bytes.toString());
    return typeof v === "object" && v !== null && typeof (v as { v?: unknown }).v === "string"
      ? { ok: true as const, value: v as { v: string } }
      : { ok: false as const, reason: "validation: v must be a string" };
  },
  encode: async (value: { v: string }) => Buffer.from(JSON.stringify(value)),
};

describe("chunks of a batch", () => {
  it("cuts a batch into consecutive chunks of at most the chunk size, in order", () => {
    assert.deepEqual(chunksOf([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]);
    assert.deepEqual(chunksOf([1, 2, 3], 3), [[1, 2, 3]]);
    assert.deepEqual(chunksOf([1], 50), [[1]]);
    assert.deepEqual(chunksOf([], 50), []);
  });

  it("refuses a chunk size that would never advance", () => {
    for (const size of [0, -1, 1.5, Number.NaN]) assert.throws(() => chunksOf([1, 2], size), RangeError);
  });
});

describe("retries", () => {
  it("retries an ordinary error with exponential backoff until the attempts are spent", () => {
    const err = new Error("store unavailable");
    assert.deepEqual(afterFailure(err, 1, 3, 200), { retry: true, delayMs: 200 });
    assert.deepEqual(afterFailure(err, 2, 3, 200), { retry: true, delayMs: 400 });
    assert.deepEqual(afterFailure(err, 3, 3, 200), { retry: false });
    assert.deepEqual(afterFailure("not even an Error", 1, 2, 50), { retry: true, delayMs: 50 });
  });

  it("never retries poison: it goes to the dead-letter queue after its first attempt", () => {
    assert.deepEqual(afterFailure(new PoisonError("key does not match"), 1, 3, 200), { retry: false });
  });

  it("with one attempt allowed, the first failure is final", () => {
    assert.deepEqual(afterFailure(new Error("x"), 1, 1, 200), { retry: false });
  });
});

describe("offsets", () => {
  it("commits the offset after the last one processed, past 2^53", () => {
    assert.equal(nextOffset("0"), "1");
    assert.equal(nextOffset("41"), "42");
    assert.equal(nextOffset("9007199254740993"), "9007199254740994");
  });

  it("counts the messages still unread after the last processed one, never below zero", () => {
    assert.equal(lagAfter("100", "89"), 10);
    assert.equal(lagAfter("100", "99"), 0);
    assert.equal(lagAfter("100", "120"), 0, "a stale high watermark is no negative lag");
  });
});

describe("inputs from messages", () => {
  it("reads a control header as a control input, whatever the value", async () => {
    for (const control of ["flush", "session-end", "idle"] as const)
      assert.deepEqual(
        await decodeStageInput({ headers: { [CONTROL_HEADER]: Buffer.from(control) }, value: null }, codec),
        {
          ok: true,
          input: { kind: "control", control },
        },
      );
    assert.deepEqual(
      await decodeStageInput(
        { headers: { [CONTROL_HEADER]: [Buffer.from("flush")] }, value: Buffer.from("{}") },
        codec,
      ),
      { ok: true, input: { kind: "control", control: "flush" } },
    );
  });

  it("refuses an unknown control kind with a reason that names it", async () => {
    const d = await decodeStageInput({ headers: { [CONTROL_HEADER]: "explode" }, value: null }, codec);
    assert.deepEqual(d, { ok: false, reason: 'unknown control message "explode"' });
  });

  it("decodes a value without a control header with the input codec, and passes on its refusal", async () => {
    assert.deepEqual(await decodeStageInput({ value: Buffer.from('{"v":"hi"}') }, codec), {
      ok: true,
      input: { kind: "event", value: { v: "hi" } },
    });
    assert.deepEqual(await decodeStageInput({ headers: { other: "x" }, value: Buffer.from('{"v":1}') }, codec), {
      ok: false,
      reason: "validation: v must be a string",
    });
    assert.deepEqual(await decodeStageInput({ value: null }, codec), { ok: false, reason: "decode: empty value" });
  });

  it("labels a refusal by what its reason says before the first colon", () => {
    assert.equal(refusalLabel("validation: v must be a string"), "validation");
    assert.equal(refusalLabel('unknown control message "x"'), 'unknown control message "x"');
  });
});

describe("outputs as messages", () => {
  it("encodes values with the output codec and sends controls as null values with the header, in order", async () => {
    const messages = await outputMessages(
      "sensory",
      [
        { key: "a", value: { v: "1" } },
        { key: "a", control: "flush" },
        { key: "b", value: { v: "2" } },
      ],
      codec,
    );
    assert.deepEqual(messages, [
      { key: "a", value: Buffer.from('{"v":"1"}') },
      { key: "a", value: null, headers: { [CONTROL_HEADER]: "flush" } },
      { key: "b", value: Buffer.from('{"v":"2"}') },
    ]);
  });

  it("lets a sink forward controls but refuses a value it has no topic for", async () => {
    assert.equal((await outputMessages("indexer", [{ key: "a", control: "idle" }], undefined)).length, 1);
    await assert.rejects(
      outputMessages("indexer", [{ key: "a", value: { v: "1" } }], undefined),
      /indexer has no output topic/,
    );
  });
});

describe("keyed state in the changelog", () => {
  const envelopes: StageStateEnvelope[] = [];
  const format = {
    version: 3,
    codec: {
      encode: async (e: StageStateEnvelope) => {
        envelopes.push(e);
        return Buffer.from(e.payload);
      },
    },
  };

  it("writes each changed key to the input's partition, a deleted state as a tombstone", async () => {
    envelopes.length = 0;
    const dirty = new Map<string, { n: number } | undefined>([
      ["t/c1", { n: 1 }],
      ["t/c2", undefined],
    ]);
    const messages = await changelogMessages("segmenter", dirty, format, 4, "2024-01-01T00:00:00.000Z");
    assert.deepEqual(messages, [
      { key: "t/c1", value: Buffer.from('{"n":1}'), partition: 4 },
      { key: "t/c2", value: null, partition: 4 },
    ]);
    assert.deepEqual(envelopes, [
      { stage: "segmenter", key: "t/c1", stateVersion: 3, payload: '{"n":1}', updatedAt: "2024-01-01T00:00:00.000Z" },
    ]);
  });

  it("uses the stage's own JSON form when it has one, both ways", async () => {
    const custom = {
      ...format,
      toJson: (s: { n: number }) => `n=${s.n}`,
      fromJson: (j: string) => ({ n: Number(j.slice(2)) }),
    };
    const [m] = await changelogMessages("x", new Map([["k", { n: 7 }]]), custom, 0, "now");
    assert.equal(m?.value?.toString(), "n=7");
    assert.deepEqual(stateFromEnvelope(custom, { stateVersion: 3, payload: "n=7" }), { n: 7 });
  });

  it("applies committed changes to the held states: set or delete", () => {
    const states = new Map([
      ["a", 1],
      ["b", 2],
    ]);
    applyStates(
      states,
      new Map<string, number | undefined>([
        ["a", undefined],
        ["c", 3],
        ["b", 5],
      ]),
    );
    assert.deepEqual([...states].sort(), [
      ["b", 5],
      ["c", 3],
    ]);
  });

  it("reads an entry back as JSON, and refuses an entry of another state version", () => {
    assert.deepEqual(stateFromEnvelope({ version: 1 }, { stateVersion: 1, payload: '{"open":null}' }), { open: null });
    assert.throws(
      () => stateFromEnvelope({ version: 2 }, { stateVersion: 1, payload: "{}" }),
      /changelog state version 1, stage expects 2/,
    );
  });

  it("restores only the assigned partitions that hold entries, each up to its high watermark", () => {
    const offsets = [
      { partition: 0, low: "0", high: "10" },
      { partition: 1, low: "5", high: "5" },
      { partition: 2, low: "3", high: "8" },
      { partition: 3, low: "0", high: "4" },
    ];
    const target = restoreTargets(offsets, [0, 1, 2, 7]);
    assert.deepEqual(
      [...target],
      [
        [0, 10n],
        [2, 8n],
      ],
    );
    const seen = new Map<number, bigint>([[0, 8n]]);
    assert.equal(restoredUpTo(seen, target, 0), false, "offset 9 not seen yet");
    seen.set(0, 9n);
    assert.equal(restoredUpTo(seen, target, 0), true);
    assert.equal(restoredUpTo(seen, target, 2), false, "nothing of partition 2 seen");
    assert.equal(restoredUpTo(seen, target, 7), true, "a partition with nothing to read is done");
  });
});
