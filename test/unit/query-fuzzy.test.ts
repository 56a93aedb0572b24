import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { boundedEditDistance, fuzzyTolerance } from "../../services/core/text/edit-distance.ts";
import { fuzzyEntities, planQuery } from "../../services/query/planner.ts";

describe("bounded edit distance", () => {
  it("counts insertions, deletions, substitutions and adjacent swaps as one edit each", () => {
    assert.equal(boundedEditDistance("melanie", "melanie", 2), 0);
    assert.equal(boundedEditDistance("melaine", "melanie", 2), 1);
    assert.equal(boundedEditDistance("carolin", "caroline", 2), 1);
    assert.equal(boundedEditDistance("karoline", "caroline", 2), 1);
    assert.equal(boundedEditDistance("jon", "john", 1), 1);
    assert.equal(boundedEditDistance("abcdef", "badcfe", 3), 3);
  });

  it("answers max + 1 for anything beyond the bound", () => {
    assert.equal(boundedEditDistance("melanie", "caroline", 2), 3);
    assert.equal(boundedEditDistance("a", "abcdef", 2), 3);
  });

  it("tolerates nothing below 5 letters, one edit to 8, two from 9", () => {
    assert.deepEqual([4, 5, 8, 9, 14].map(fuzzyTolerance), [0, 1, 1, 2, 2]);
  });
});

describe("fuzzy entities in the planner", () => {
  const known = ["Melanie", "Caroline", "Dane", "Sweden", "New York"];
  it("maps a misspelled capitalised name to the known one", () => {
    assert.deepEqual(fuzzyEntities("What did Melaine paint?", known, []), ["Melanie"]);
    assert.deepEqual(fuzzyEntities("When did Carolline's trip start?", known, []), ["Caroline"]);
  });

  it("leaves exact names, short words and lower-case words alone", () => {
    assert.deepEqual(fuzzyEntities("What did Melanie paint?", known, ["Melanie"]), []);
    assert.deepEqual(fuzzyEntities("Did Dan go?", known, []), []);
    assert.deepEqual(fuzzyEntities("Does she like to dance?", known, []), []);
  });

  it("puts the known spelling in the plan's entities and lexical rewrite", () => {
    const plan = planQuery({
      question: "What did Melaine paint?",
      knownEntities: known,
      knownTopics: [],
      now: new Date("2024-01-01T00:00:00Z"),
    });
    assert.deepEqual(plan.entities, ["Melanie"]);
    assert.match(plan.rewrites[0] ?? "", /\bmelanie\b/);
    assert.ok(plan.routes.includes("entity"));
  });
});
