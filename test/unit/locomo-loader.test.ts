// The LoCoMo loader: session dates converted, the API's turn rules applied, every problem named by
// sample, session and turn, and a file with any problem rejected as a whole.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LocomoFormatError, parseLocomo } from "../../services/core/datasets/locomo.ts";

const sample = (id: string, session1: unknown[], extra: Record<string, unknown> = {}) => ({
  sample_id: id,
  conversation: {
    speaker_a: "Caroline",
    speaker_b: "Melanie",
    session_1_date_time: "1:56 pm on 8 May, 2023",
    session_1: session1,
    ...extra,
  },
  qa: [],
});

const good = (n: number) => ({ speaker: "Caroline", dia_id: `D1:${n}`, text: `turn ${n}` });

describe("LoCoMo loader", () => {
  it("converts the session date and keeps valid samples whole", () => {
    const [conv] = parseLocomo([sample("conv-1", [good(1), good(2)])]);
    assert.equal(conv?.turns.length, 2);
    assert.equal(conv?.turns[0]?.timestamp, "2023-05-08T13:56:00.000Z");
    assert.equal(conv?.turns[1]?.timestamp, "2023-05-08T13:56:30.000Z");
    assert.equal(conv?.turns[0]?.sessionId, "session_1");
  });

  it("names sample, session and turn of every problem, and returns nothing for a file with any", () => {
    const file = [
      sample("conv-ok", [good(1)]),
      sample("conv-bad", [good(1), { speaker: "Caroline", text: "no id" }, { ...good(3), speaker: "Car\u0000oline" }]),
      sample("conv-date", [good(1)], { session_1_date_time: "someday" }),
      { conversation: {} },
    ];
    assert.throws(
      () => parseLocomo(file, "data.json"),
      (err: unknown) => {
        assert.ok(err instanceof LocomoFormatError);
        assert.match(err.message, /^data\.json: 4 problem\(s\), nothing ingested/);
        assert.deepEqual(err.problems, [
          "sample 1 (conv-bad), session_1, turn 1 dia_id: Invalid input: expected string, received undefined",
          "sample 1 (conv-bad), session_1, turn 2 (D1:3) speaker: must not contain control characters",
          'sample 2 (conv-date), session_1: unparseable session date: "someday"',
          "sample 3 sample_id: Invalid input: expected string, received undefined",
        ]);
        return true;
      },
    );
  });
});
