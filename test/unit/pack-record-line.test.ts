import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { recordParts } from "../../services/core/text/record-text.ts";
import { wordCount } from "../../services/core/text/words.ts";
import { countTokens } from "../../services/core/tokens.ts";
import { type PackInput, packContext, STANDS_ALONE_WORDS } from "../../services/query/pack.ts";
import { opensWithName } from "../../services/query/record-line.ts";

describe("a record's text read back into its parts", () => {
  it("reads the speaker, the day, the question answered and the statement", () => {
    assert.deepEqual(recordParts('Ana (2023-05-08), asked by Ben "Where did you go?": Ana went to Oslo.'), {
      speaker: "Ana",
      day: "2023-05-08",
      asked: { speaker: "Ben", question: "Where did you go?" },
      statement: "Ana went to Oslo.",
    });
    assert.deepEqual(recordParts("Ana Lee (2023-05-08): Ana Lee likes tea."), {
      speaker: "Ana Lee",
      day: "2023-05-08",
      statement: "Ana Lee likes tea.",
    });
  });

  it("takes a text in no such form for the statement whole", () => {
    assert.deepEqual(recordParts("Ana moved to Oslo (2023-05-08)."), { statement: "Ana moved to Oslo (2023-05-08)." });
    assert.deepEqual(recordParts("(2023-05-08): odd"), { statement: "(2023-05-08): odd" });
  });

  it("tells a statement that opens with the name as a word", () => {
    assert.equal(opensWithName("Ana went home.", "Ana"), true);
    assert.equal(opensWithName("Ana's dog barked.", "Ana"), true);
    assert.equal(opensWithName("Anabel went home.", "Ana"), false);
    assert.equal(opensWithName("Then Ana went home.", "Ana"), false);
    assert.equal(opensWithName("A.J. went home.", "A.J."), true);
    assert.equal(opensWithName("Ana went home.", ""), false);
    assert.equal(wordCount("  one two\tthree\n"), 3);
  });
});

describe("a record's line in the packed context", () => {
  const said = "2023-05-08T10:00:00Z";
  const record = (n: number, text: string, date = said): PackInput => ({
    kind: "record",
    id: `r${n}`,
    text,
    date,
    conversation: "c1",
    turnIds: [`D1:${n}`],
    speakers: ["Ana"],
    routes: [],
    fusedScore: 0,
    session: "s1",
    saidAt: said,
  });
  const linesOf = (items: PackInput[]): string[] => {
    const packed = packContext(items, 1000);
    assert.equal(packed.tokens, countTokens(packed.context));
    assert.equal(packed.items.length, items.length);
    return packed.context.split("\n").slice(2);
  };

  it("leaves out the question a statement that reads alone answers, and keeps it for a short answer", () => {
    const long = Array.from({ length: STANDS_ALONE_WORDS }, (_, i) => `w${i}`).join(" ");
    const short = Array.from({ length: STANDS_ALONE_WORDS - 1 }, (_, i) => `w${i}`).join(" ");
    assert.deepEqual(
      linesOf([
        record(1, `Ana (2023-05-08), asked by Ben "Why?": ${long}.`),
        record(2, `Ana (2023-05-08), asked by Ben "Why?": ${short}.`),
        record(3, 'Ana (2023-05-08), asked by Ben "Where?": Ana went to Oslo.'),
      ]),
      [
        `Ana: ${long}. […1]`,
        `Ana, asked by Ben "Why?": ${short}. […2]`,
        'Ana, asked by Ben "Where?": Ana went to Oslo. […3]',
      ],
    );
  });

  it("writes no label before a statement that names its speaker first, and no event date it gives", () => {
    assert.deepEqual(
      linesOf([
        record(1, "Ana (2023-05-08): Ana ran a race on 2023-05-06.", "2023-05-06T00:00:00Z"),
        record(2, "Ana (2023-05-08): Ana ran a race last week.", "2023-05-01T00:00:00Z"),
        record(3, "Ana (2023-05-08): It was fun."),
      ]),
      // Said at one moment, the lines follow their event dates.
      ["(2023-05-01) Ana ran a race last week. […2]", "Ana ran a race on 2023-05-06. […1]", "Ana: It was fun. […3]"],
    );
  });

  it("writes an event time over several days as the encoder words it, never as its first day", () => {
    const spanning = (n: number, text: string, from: string, to: string): PackInput => ({
      ...record(n, text, `${from}T00:00:00.000Z`),
      dateTo: `${to}T23:59:59.999Z`,
    });
    assert.deepEqual(
      linesOf([
        // The statement gives it: no date before the line (before, "(2022-01-01)": a day nobody said).
        spanning(1, "Ana (2023-05-08): Ana painted that lake in 2022.", "2022-01-01", "2022-12-31"),
        spanning(2, "Ana (2023-05-08): The week of 2023-02-20 was wild.", "2023-02-20", "2023-02-26"),
        spanning(
          3,
          "Ana (2023-05-08): Ana moved the opening from 2023-06-19 to 2023-06-20.",
          "2023-06-19",
          "2023-06-20",
        ),
        // The statement does not: the span, in the words the encoder would have used.
        spanning(4, "Ana (2023-05-08): Ana went to Oslo.", "2023-03-01", "2023-03-31"),
        spanning(5, "Ana (2023-05-08): Ana ran.", "2023-04-01", "2023-04-09"),
      ]),
      [
        "Ana painted that lake in 2022. […1]",
        "Ana: The week of 2023-02-20 was wild. […2]",
        "(March 2023) Ana went to Oslo. […4]",
        "(2023-04-01 to 2023-04-09) Ana ran. […5]",
        "Ana moved the opening from 2023-06-19 to 2023-06-20. […3]",
      ],
    );
  });

  const turn = (n: number, speaker: string, text: string): PackInput => ({
    ...record(n, text),
    kind: "turn",
    id: `turn:D1:${n}`,
    speakers: [speaker],
    // Said just before the answer.
    date: "2023-05-08T09:59:00Z",
    saidAt: "2023-05-08T09:59:00Z",
  });
  const long = "Ana went to Oslo with her sister in May and loved every single day of it.";

  it("cites only the statement's turn where the line leaves the question out, so the asker's turn can still be packed", () => {
    const answer = {
      ...record(2, `Ana (2023-05-08), asked by Ben "Where did you go?": ${long}`),
      turnIds: ["D1:1", "D1:2"],
    };
    const asker = turn(1, "Ben", "Where did you go? Oslo is lovely in May.");
    const packed = packContext([answer, asker], 1000);
    assert.deepEqual(
      packed.items.map((i) => [i.id, i.turnIds]),
      [
        ["r2", ["D1:2"]],
        ["turn:D1:1", ["D1:1"]],
      ],
    );
    assert.deepEqual(packed.context.split("\n").slice(2), [
      "Ben: Where did you go? Oslo is lovely in May. […1]",
      `${long} […2]`,
    ]);
  });

  it("leaves a short answer's question out where the asker's turn is in the context already", () => {
    const answer = {
      ...record(2, 'Ana (2023-05-08), asked by Ben "Where did you go?": To Oslo.'),
      turnIds: ["D1:1", "D1:2"],
    };
    const asker = turn(1, "Ben", "Where did you go?");
    const before = packContext([asker, answer], 1000);
    assert.deepEqual(
      before.items.map((i) => i.turnIds),
      [["D1:1"], ["D1:2"]],
    );
    assert.deepEqual(before.context.split("\n").slice(2), ["Ben: Where did you go? […1]", "Ana: To Oslo. […2]"]);
    // Ranked first, the record carries the question: the asker's turn adds nothing and is skipped.
    const after = packContext([answer, asker], 1000);
    assert.deepEqual(
      after.items.map((i) => i.turnIds),
      [["D1:1", "D1:2"]],
    );
    assert.match(after.context, /Ana, asked by Ben "Where did you go\?": To Oslo\. \[D1:1-2\]$/);
  });

  it("keeps the items' stored text", () => {
    const text =
      'Ana (2023-05-08), asked by Ben "Why?": because the long statement here has well over twelve words in it.';
    assert.equal(packContext([record(1, text)], 1000).items[0]?.text, text);
  });
});
