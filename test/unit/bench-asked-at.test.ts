import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { askedAtEnd } from "../../services/bench/harness.ts";
import type { BenchTurn } from "../../services/bench/pack.ts";

const turn = (turnId: string, timestamp: string, sessionId: string): BenchTurn => ({
  turnId,
  speaker: "Ana",
  text: "hello",
  timestamp,
  sessionId,
});

describe("bench questions asked at the conversation's end", () => {
  it("asks as of the latest turn, wherever it stands in the list", () => {
    const turns = [
      turn("D1:1", "2023-05-08T13:56:00.000Z", "1"),
      turn("D3:1", "2023-07-02T09:00:00.000Z", "3"),
      turn("D2:1", "2023-06-01T18:30:00.000Z", "2"),
    ];
    assert.equal(askedAtEnd(turns), "2023-07-02T09:00:00.000Z");
  });

  it("leaves the time to the engine when there are no turns", () => {
    assert.equal(askedAtEnd([]), undefined);
  });
});
