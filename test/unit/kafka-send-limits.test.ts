/**
 * What keeps a stage's transaction under the broker's message limit: dead letters carry at most
 * DLQ_PAYLOAD_MAX_BYTES of the original value, and a chunk's messages go in sends of at most
 * SEND_MAX_BYTES, in order.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, it } from "node:test";
import { DLQ_PAYLOAD_MAX_BYTES, DLQ_TEXT_MAX_CHARS, deadLetter } from "../../services/core/adapters/kafka/serde.ts";
import { SEND_MAX_BYTES, splitBySize } from "../../services/core/adapters/kafka/stage-runtime.ts";

const source = (value: Buffer | null, key = "t/c") => ({ topic: "in", partition: 2, offset: "41", key, value });

describe("dead letters stay under the broker's message limit", () => {
  it("keeps a small value whole", () => {
    const d = deadLetter("sensory", source(Buffer.from("abc")), "bad value");
    assert.equal(Buffer.from(d.payload, "base64").toString(), "abc");
    assert.equal(d.error, "bad value");
  });

  it("keeps the head of a value near 1 MB and says how long it was, its hash and where it is", () => {
    const value = Buffer.alloc(1_000_000, 0x78);
    const d = deadLetter("segmenter", source(value), "decode failed");
    assert.equal(Buffer.from(d.payload, "base64").length, DLQ_PAYLOAD_MAX_BYTES);
    assert.ok(d.payload.length < 400 * 1024, "base64 payload well under 1 MB");
    assert.match(
      d.error,
      /^decode failed \[payload: the first \d+ of 1000000 bytes; sha256 [0-9a-f]{64}; the whole value is at in\/2@41\]$/,
    );
    assert.ok(d.error.includes(createHash("sha256").update(value).digest("hex")));
  });

  it("caps a huge key and reason", () => {
    const d = deadLetter("encoder", source(null, "k".repeat(200_000)), "r".repeat(200_000));
    assert.ok(d.key.length < DLQ_TEXT_MAX_CHARS + 40);
    assert.ok(d.error.length < DLQ_TEXT_MAX_CHARS + 40);
    assert.equal(d.payload, "");
  });
});

describe("splitBySize", () => {
  const msg = (n: number, key = "k") => ({ key, value: Buffer.alloc(n) });

  it("keeps everything in one send when it fits", () => {
    const parts = splitBySize(
      [
        { topic: "a", messages: [msg(10), msg(10)] },
        { topic: "b", messages: [msg(5)] },
      ],
      1000,
    );
    assert.equal(parts.length, 1);
    assert.deepEqual(
      parts[0]?.map((p) => [p.topic, p.messages.length]),
      [
        ["a", 2],
        ["b", 1],
      ],
    );
  });

  it("splits into sends under the bound, in order, a single large message alone", () => {
    const big = SEND_MAX_BYTES;
    const input = [
      { topic: "out", messages: [msg(300 * 1024, "o1"), msg(300 * 1024, "o2"), msg(big, "o3")] },
      { topic: "dlq", messages: [msg(100, "d1")] },
    ];
    const parts = splitBySize(input, SEND_MAX_BYTES);
    const flat = parts.flatMap((p) => p.flatMap((t) => t.messages.map((m) => `${t.topic}:${String(m.key)}`)));
    assert.deepEqual(flat, ["out:o1", "out:o2", "out:o3", "dlq:d1"], "order kept");
    for (const p of parts) {
      const size = p.reduce((n, t) => n + t.messages.reduce((k, m) => k + (m.value as Buffer).length, 0), 0);
      assert.ok(size <= SEND_MAX_BYTES || p.flatMap((t) => t.messages).length === 1, "each send under the bound");
    }
    assert.equal(parts.length, 4, "o1 | o2 | o3 (over the bound, alone) | d1");
  });
});
