// Duration questions fetch the event's first and last mention (services/query/both-ends.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { bothEnds } from "../../services/query/both-ends.ts";
import { asksForDuration } from "../../services/query/planner.ts";
import type { RankedList } from "../../services/query/rrf.ts";

const list = (route: RankedList["route"], ids: string[]): RankedList => ({
  route,
  ids: ids.map((id, i) => ({ id, score: 1 - i / 100 })),
});

describe("asksForDuration", () => {
  it("recognises how long, since when and counts of years, months, weeks or days", () => {
    for (const q of [
      "How long did it take Ann to learn to sail?",
      "Since when has Bo lived in Oslo?",
      "How many years has Cy been a nurse?",
      "how many weeks was Di away?",
    ])
      assert.ok(asksForDuration(q), q);
  });

  it("leaves dates, counts of things and lists alone", () => {
    for (const q of ["When did Ed move?", "How many dogs does Flo have?", "What books has Gil read?"])
      assert.equal(asksForDuration(q), false, q);
  });
});

describe("bothEnds", () => {
  const time = new Map([
    ["plan", Date.UTC(2023, 0, 5)],
    ["middle", Date.UTC(2023, 2, 1)],
    ["opened", Date.UTC(2023, 5, 20)],
    ["later", Date.UTC(2023, 8, 1)],
  ]);

  it("puts the earliest and the latest of the best hits first and second, across both lists", () => {
    const ends = bothEnds([list("dense", ["middle", "opened"]), list("raw-dense", ["plan", "middle"])], time, 5);
    assert.deepEqual(
      ends?.ids.map((h) => h.id),
      ["plan", "opened"],
    );
    assert.equal(ends?.route, "time");
  });

  it("looks only at each list's best hits", () => {
    const ends = bothEnds([list("dense", ["middle", "opened", "later"])], time, 2);
    assert.deepEqual(
      ends?.ids.map((h) => h.id),
      ["middle", "opened"],
    );
  });

  it("gives nothing without two distinct times", () => {
    assert.equal(bothEnds([list("dense", ["plan", "undated"])], time, 5), undefined);
    assert.equal(bothEnds([list("dense", ["plan", "plan"])], time, 5), undefined);
    assert.equal(bothEnds([], time, 5), undefined);
  });
});
