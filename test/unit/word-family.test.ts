import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { plainerTerms } from "../../services/core/text/word-family.ts";

describe("word families: the plainer words a derived one is made from", () => {
  it("undoes the endings the Porter stems keep", () => {
    assert.deepEqual(plainerTerms("mentorship"), ["mentor"]);
    assert.deepEqual(plainerTerms("friendship"), ["friend"]);
    assert.deepEqual(plainerTerms("childhood"), ["child"]);
    assert.deepEqual(plainerTerms("musician"), ["music"]);
    assert.deepEqual(plainerTerms("Musicians"), ["music"]);
    assert.deepEqual(plainerTerms("entrepreneurial"), ["entrepreneur"]);
    assert.ok(plainerTerms("pianist").includes("piano"));
    assert.ok(plainerTerms("guitarist").includes("guitar"));
  });
  it("leaves words whose ending is part of a short base, and words without one", () => {
    for (const w of ["assist", "exist", "social", "special", "list", "ship", "painting", "adoption", "café"])
      assert.deepEqual(plainerTerms(w), [], w);
  });
});
