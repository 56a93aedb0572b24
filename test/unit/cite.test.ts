import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { citation, idRuns, prefixNote, sharedPrefix, withoutCitations } from "../../services/query/cite.ts";

describe("citations", () => {
  it("finds the ids' shared prefix only up to a separator, leaving every id a rest", () => {
    assert.equal(sharedPrefix(["D3:5", "D3:12", "D3:7"]), "D3:");
    assert.equal(sharedPrefix(["D3:5"]), "D3:");
    // Not inside a number or word: "D1" of D13:2 and D1:4 is no prefix a reader could split off.
    assert.equal(sharedPrefix(["D13:2", "D1:4"]), "");
    assert.equal(sharedPrefix(["a1", "a2"]), "");
    // UUIDs share nothing up to a separator, so they stay whole.
    assert.equal(sharedPrefix(["3f2b1c9e-8d7a-4e5f-9a1b-2c3d4e5f6a7b", "3f9d0a12-1b2c-4d3e-8f4a-5b6c7d8e9f0a"]), "");
    assert.equal(sharedPrefix(["chat-7/turn-1", "chat-7/turn-22"]), "chat-7/turn-");
    // Every id keeps a rest: "D3:" would leave the id "D3:" none, and "D3" ends at no separator.
    assert.equal(sharedPrefix(["D3:", "D3:5"]), "");
    assert.equal(sharedPrefix([]), "");
  });

  it("writes consecutive numbered ids of one stem as a range, in their order", () => {
    assert.deepEqual(idRuns(["D3:5", "D3:6", "D3:7", "D3:9"]), ["D3:5-7", "D3:9"]);
    assert.deepEqual(idRuns(["D3:5", "D4:6"]), ["D3:5", "D4:6"]);
    assert.deepEqual(idRuns(["D3:6", "D3:5"]), ["D3:6", "D3:5"]);
    assert.deepEqual(idRuns(["x", "y"]), ["x", "y"]);
    assert.deepEqual(idRuns(["t09", "t10"]), ["t09-10"]);
    assert.deepEqual(idRuns([]), []);
  });

  it("cites whole or under a header's prefix, with the ellipsis standing for the prefix", () => {
    assert.equal(citation(["D3:5"]), "[D3:5]");
    assert.equal(citation(["D3:5", "D3:6"]), "[D3:5-6]");
    assert.equal(citation(["D3:5", "D3:6"], "D3:"), "[…5-6]");
    assert.equal(citation(["D3:5", "D3:9"], "D3:"), "[…5,…9]");
    assert.equal(prefixNote("D3:"), " (D3:…)");
  });

  it("strips line-end citations and header prefix notes, and nothing else", () => {
    const context = [
      "Memories of conv-1 (dated, sourced; newer facts override older):",
      "2023-05-08 (D3:…):",
      "Ana moved in [2019] to flat 5. […5-6]",
      "Ben: Nice! […7]",
      "2023-06-01:",
      "Ben: I moved to Oslo. [D4:1,D4:3]",
    ].join("\n");
    assert.equal(
      withoutCitations(context),
      [
        "Memories of conv-1 (dated, sourced; newer facts override older):",
        "2023-05-08:",
        "Ana moved in [2019] to flat 5.",
        "Ben: Nice!",
        "2023-06-01:",
        "Ben: I moved to Oslo.",
      ].join("\n"),
    );
  });
});
