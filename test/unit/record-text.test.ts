import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { recordPrefix, recordText, statementText, withoutSaidDay } from "../../services/core/text/record-text.ts";

describe("record text format: one writer, one reader", () => {
  it("writes the speaker and day, and the asker's question when there is one", () => {
    assert.equal(recordPrefix("Ana", "2024-01-02"), "Ana (2024-01-02):");
    assert.equal(
      recordText("Jon", "2023-01-20", "Yes!", { speaker: "Gina", question: "Did Jon go to the festival?" }),
      'Jon (2023-01-20), asked by Gina "Did Jon go to the festival?": Yes!',
    );
  });

  it("reads back the statement of what it writes", () => {
    const cases: [string, string, string, { speaker: string; question: string } | undefined][] = [
      ["Ana", "2024-01-02", "Ana lives in Boston.", undefined],
      ["Mary Ann", "2023-12-31", "Mary Ann's favorite color: blue.", undefined],
      ["Jon", "2023-01-20", "Jon is opening a studio.", { speaker: "Gina", question: "What business is Jon in?" }],
      ["Jon", "2023-01-20", "Yes: on 2023-01-14.", { speaker: "Gina", question: "Did Jon go (finally)?" }],
    ];
    for (const [speaker, day, statement, asked] of cases)
      assert.equal(statementText(recordText(speaker, day, statement, asked)), statement);
  });

  it("leaves a text without the prefix as it is, trimmed (LLM encoder records)", () => {
    assert.equal(statementText("  Ana lives in Boston (since 2020).  "), "Ana lives in Boston (since 2020).");
    assert.equal(statementText("Ana (2024-01-02) moved: to Boston."), "Ana (2024-01-02) moved: to Boston.");
  });

  it("drops the prefix's day only where it is the given day (shown in a header already)", () => {
    assert.equal(
      withoutSaidDay(recordText("Ana", "2024-01-02", "Ana lives in Boston."), "2024-01-02"),
      "Ana: Ana lives in Boston.",
    );
    assert.equal(
      withoutSaidDay(
        recordText("Jon", "2023-01-20", "Yes!", { speaker: "Gina", question: "Did Jon (finally) go?" }),
        "2023-01-20",
      ),
      'Jon, asked by Gina "Did Jon (finally) go?": Yes!',
    );
    const other = recordText("Mary Ann", "2023-12-31", "Mary Ann moved.");
    assert.equal(withoutSaidDay(other, "2024-01-01"), other, "another day stays");
    for (const text of ["Ana (2024-01-02) moved: to Boston.", "Ana (2024-01-02), then Boston.", "Ana lives in Boston."])
      assert.equal(withoutSaidDay(text, "2024-01-02"), text, "not a prefix");
    // Bounded like the reader: a very long speaker-like run is not scanned as a prefix.
    const long = `${"x".repeat(50_000)} (2024-01-02): y`;
    assert.equal(withoutSaidDay(long, "2024-01-02"), long);
  });
});
