import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ContextItem } from "../../services/core/query-types.ts";
import { countTokens } from "../../services/core/tokens.ts";
import { maximalMarginalRelevance } from "../../services/query/mmr.ts";
import { CONTEXT_HEADER, type PackInput, packContext } from "../../services/query/pack.ts";
import { planQuery } from "../../services/query/planner.ts";
import { reciprocalRankFusion } from "../../services/query/rrf.ts";
import { axis } from "../helpers/seeded.ts";

describe("reciprocal rank fusion", () => {
  it("sums 1/(k + rank) over lists and records which routes found each id", () => {
    const fused = reciprocalRankFusion(
      [
        {
          route: "dense",
          ids: [
            { id: "a", score: 0.9 },
            { id: "b", score: 0.8 },
            { id: "a", score: 0.1 },
          ],
        },
        {
          route: "lexical",
          ids: [
            { id: "b", score: 5 },
            { id: "c", score: 4 },
          ],
        },
      ],
      60,
    );
    const b = fused.find((f) => f.id === "b");
    assert.equal(fused[0]?.id, "b");
    assert.ok(Math.abs((b?.score ?? 0) - (1 / 62 + 1 / 61)) < 1e-12);
    assert.deepEqual(
      b?.routes.map((r) => [r.route, r.rank]),
      [
        ["dense", 2],
        ["lexical", 1],
      ],
    );
    assert.ok(
      Math.abs((fused.find((f) => f.id === "a")?.score ?? 0) - 1 / 61) < 1e-12,
      "a duplicate in one list counts once",
    );
    assert.deepEqual(
      fused.map((f) => f.id),
      ["b", "a", "c"],
    );
  });

  it("counts a weighted list's ranks at its weight", () => {
    const fused = reciprocalRankFusion(
      [
        { route: "dense", ids: [{ id: "a", score: 1 }] },
        {
          route: "dense",
          weight: 0.4,
          ids: [
            { id: "b", score: 1 },
            { id: "a", score: 0.5 },
          ],
        },
      ],
      60,
    );
    assert.ok(Math.abs((fused.find((f) => f.id === "a")?.score ?? 0) - (1 / 61 + 0.4 / 62)) < 1e-12);
    assert.ok(Math.abs((fused.find((f) => f.id === "b")?.score ?? 0) - 0.4 / 61) < 1e-12);
    assert.deepEqual(
      fused.map((f) => f.id),
      ["a", "b"],
    );
  });

  it("breaks ties deterministically by id", () => {
    const fused = reciprocalRankFusion([
      { route: "dense", ids: [{ id: "z", score: 1 }] },
      { route: "lexical", ids: [{ id: "m", score: 1 }] },
    ]);
    assert.deepEqual(
      fused.map((f) => f.id),
      ["m", "z"],
    );
  });
});

describe("maximal marginal relevance", () => {
  it("prefers a less relevant but different item over a near duplicate", () => {
    const x = axis(4, 0);
    const out = maximalMarginalRelevance(
      [
        { id: "top", relevance: 1.0, vector: x },
        { id: "dup", relevance: 0.95, vector: x },
        { id: "other", relevance: 0.7, vector: axis(4, 1) },
      ],
      0.7,
      3,
    );
    assert.deepEqual(
      out.map((c) => c.id),
      ["top", "other", "dup"],
    );
  });

  it("with lambda 1 is plain relevance order, and respects the limit", () => {
    const out = maximalMarginalRelevance(
      [
        { id: "a", relevance: 0.2 },
        { id: "b", relevance: 0.9 },
        { id: "c", relevance: 0.5 },
      ],
      1,
      2,
    );
    assert.deepEqual(
      out.map((c) => c.id),
      ["b", "c"],
    );
  });
});

describe("budget packing", () => {
  const item = (id: string, date: string, text: string): Omit<ContextItem, "tokens"> => ({
    kind: "record",
    id,
    text,
    date,
    conversation: "c1",
    turnIds: [`D1:${id}`],
    speakers: ["Ana"],
    routes: [],
    fusedScore: 0,
  });

  it("never exceeds the budget (real tokenizer), skips what does not fit, renders oldest first with dates and sources", () => {
    const long = "word ".repeat(200).trim();
    const ranked = [
      item("1", "2024-05-02T00:00:00Z", "Ana adopted a dog named Pepper."),
      item("2", "2024-05-01T00:00:00Z", long),
      item("3", "2023-01-01T00:00:00Z", "Ana started pottery classes."),
    ];
    const packed = packContext(ranked, 80);
    assert.ok(packed.tokens <= 80);
    assert.equal(packed.tokens, countTokens(packed.context));
    assert.deepEqual(
      packed.items.map((i) => i.id),
      ["1", "3"],
    );
    const lines = packed.context.split("\n");
    // All from one conversation: named once, in the context header, not in each dated header.
    assert.equal(lines[0], CONTEXT_HEADER.replace("Memories", "Memories of c1"));
    // Each item under its dated header, with its source turns.
    assert.equal(lines[1], "2023-01-01:");
    assert.equal(lines[2], "Ana started pottery classes. [D1:3]");
    assert.equal(lines[3], "2024-05-02:");
    assert.match(lines[4] ?? "", /^Ana adopted a dog named Pepper\. \[D1:1\]$/);
  });

  const turn = (id: string, at: string, speaker: string, text: string, session = "s1"): PackInput => ({
    kind: "turn",
    id: `turn:${id}`,
    text,
    date: at,
    conversation: "c1",
    turnIds: [id],
    speakers: [speaker],
    routes: [],
    fusedScore: 0,
    session,
    saidAt: at,
  });

  const ofC1 = CONTEXT_HEADER.replace("Memories", "Memories of c1");

  it("groups items by session and day under one header, one speaker label per run of turns", () => {
    const packed = packContext(
      [
        turn("D1:2", "2023-05-08T10:01:00Z", "Ana", "Pottery is my thing."),
        turn("D2:1", "2023-06-01T09:00:00Z", "Ben", "I moved to Oslo.", "s2"),
        turn("D1:1", "2023-05-08T10:00:00Z", "Ana", "I started a class."),
        turn("D1:3", "2023-05-08T10:02:00Z", "Ben", "Nice!"),
        {
          ...item("r1", "2023-05-01T00:00:00Z", "Ana signed up for pottery the week before."),
          dateTo: "2023-05-07T23:59:59.999Z",
          turnIds: ["D1:9"],
          session: "s1",
          saidAt: "2023-05-08T10:03:00Z",
        },
      ],
      500,
    );
    assert.deepEqual(packed.context.split("\n"), [
      ofC1,
      // Four lines pay for the header's "(D1:…)": each then cites only its number.
      "2023-05-08 (D1:…):",
      "Ana: I started a class. […1]",
      "  Pottery is my thing. […2]",
      "Ben: Nice! […3]",
      "(the week of 2023-05-01) Ana signed up for pottery the week before. […9]",
      // One line does not: its id stays whole (and says the session the header does not name).
      "2023-06-01:",
      "Ben: I moved to Oslo. [D2:1]",
    ]);
    assert.equal(packed.tokens, countTokens(packed.context));
    assert.ok(
      packed.items.every((i) => !("session" in i) && !("saidAt" in i)),
      "pack-only fields stay internal",
    );
  });

  it("never packs a record and the raw turn it came from: the first-ranked stands for the evidence", () => {
    const record = { ...item("r1", "2023-05-08T10:00:00Z", "Ana started a pottery class."), turnIds: ["D1:1"] };
    const raw = turn("D1:1", "2023-05-08T10:00:00Z", "Ana", "I started a class, pottery!");
    const other = turn("D1:2", "2023-05-08T10:01:00Z", "Ben", "Cool.");
    assert.deepEqual(
      packContext([record, raw, other], 500).items.map((i) => i.id),
      ["r1", "turn:D1:2"],
    );
    assert.deepEqual(
      packContext([raw, record, other], 500).items.map((i) => i.id),
      ["turn:D1:1", "turn:D1:2"],
    );
  });

  it("leaves a record's prefix day out under the header that gives it, and keeps any other day", () => {
    const said = "2023-05-08T10:00:00Z";
    const record = (id: string, text: string, date = said): PackInput => ({
      ...item(id, date, text),
      turnIds: [`D1:${id}`],
      session: "s1",
      saidAt: said,
    });
    const packed = packContext(
      [
        record("1", 'Ana (2023-05-08), asked by Ben "Where did Ana go?": Ana went to Oslo.'),
        record("2", "Ana (2023-05-08): Ana signed up for pottery the week before.", "2023-05-01T00:00:00Z"),
        record("3", "Ana (2023-05-07): Ana said this the day before."),
      ],
      500,
    );
    assert.deepEqual(packed.context.split("\n"), [
      // One group: naming the conversation in the context header would cost more than in its header.
      CONTEXT_HEADER,
      "2023-05-08 c1 (D1:…):",
      // The statement opens with its speaker's name: no label before it.
      "(2023-05-01) Ana signed up for pottery the week before. […2]",
      // A short answer keeps the question it answers.
      'Ana, asked by Ben "Where did Ana go?": Ana went to Oslo. […1]',
      "Ana (2023-05-07): Ana said this the day before. […3]",
    ]);
    assert.equal(packed.tokens, countTokens(packed.context));
    assert.equal(
      packed.items[0]?.text,
      'Ana (2023-05-08), asked by Ben "Where did Ana go?": Ana went to Oslo.',
      "items keep the stored text",
    );
  });

  it("writes ids with no shared prefix whole, and names each conversation where there are two", () => {
    const uuids = ["3f2b1c9e-8d7a-4e5f-9a1b-2c3d4e5f6a7b", "9c0d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f"];
    const at = "2023-05-08T10:00:00Z";
    const packed = packContext(
      [
        turn(uuids[0] as string, at, "Ana", "I started a class."),
        turn(uuids[1] as string, "2023-05-08T10:01:00Z", "Ben", "Nice!"),
        {
          ...item("r1", at, "Cy greeted Dee."),
          conversation: "c2",
          turnIds: ["D1:1", "D1:2"],
          session: "s1",
          saidAt: at,
        },
      ],
      500,
    );
    assert.deepEqual(packed.context.split("\n"), [
      CONTEXT_HEADER,
      "2023-05-08 c2:",
      "Cy greeted Dee. [D1:1-2]",
      "2023-05-08 c1:",
      `Ana: I started a class. [${uuids[0]}]`,
      `Ben: Nice! [${uuids[1]}]`,
    ]);
    assert.deepEqual(packed.items.at(-1)?.turnIds, ["D1:1", "D1:2"], "items keep every source id");
  });

  it("packs what whole ids would, the tokens compact sources free only adding items", () => {
    const said = "2023-05-08T10:00:00Z";
    const record = (n: number, text: string): PackInput => ({
      ...item(String(n), said, text),
      turnIds: [`D1:${n}`],
      session: "s1",
      saidAt: said,
    });
    const small = [1, 2, 3, 4].map((n) => record(n, `Ana likes tea number ${n}.`));
    const last = record(5, "Ana likes coffee.");
    // The budget that whole ids need for the small items and the last one: exactly full.
    const plainLine = (r: PackInput) => countTokens(`${r.text} [${r.turnIds.join(",")}]\n`);
    const budget =
      countTokens(`${CONTEXT_HEADER}\n`) +
      countTokens("2023-05-08 c1:\n") +
      [...small, last].reduce((n, r) => n + plainLine(r), 0);
    // A larger item ranked before the last one that does not fit at whole-id prices, and the
    // largest that fits in the room the compact form frees: in the last one's place, no room left.
    let big: PackInput | undefined;
    for (let words = 40; words >= 1 && big === undefined; words--) {
      const candidate = record(6, `Ana ${"really ".repeat(words)}likes cake.`);
      if (packContext([...small, candidate], budget).items.some((i) => i.id === "6")) big = candidate;
    }
    assert.ok(big && plainLine(big) > plainLine(last), "a larger item that only the compact form makes room for");
    const packed = packContext([...small, big, last], budget);
    assert.deepEqual(
      packed.items.map((i) => i.id),
      ["1", "2", "3", "4", "5"],
    );
    assert.ok(packed.tokens < budget, "the compact form leaves room that nothing ranked fills");
  });

  it("counts an item's tokens as its line with every source id whole, however the text ends", () => {
    const at = "2023-05-08T10:00:00Z";
    const texts = [
      "Ends in a word",
      "Ends in punctuation!?",
      "Ends in a number 2023",
      "Ends in a space ",
      "Ends in emoji 🎉",
      "[bracketed]",
    ];
    const ranked = texts.map((text, i) => ({
      ...turn(`D1:${i + 1}`, at, "Ana", text),
      turnIds: [`D1:${i + 1}`, `D1:${i + 2}`],
    }));
    const packed = packContext(ranked, 2000);
    assert.deepEqual(
      packed.items.map((i) => i.tokens),
      ranked.map((r) => countTokens(`Ana: ${r.text} [${r.turnIds.join(",")}]\n`)),
    );
  });

  it("returns an empty context when nothing fits", () => {
    assert.deepEqual(packContext([item("1", "2024-01-01", "x ".repeat(300))], 20), {
      context: "",
      tokens: 0,
      items: [],
    });
  });
});

describe("deterministic planner", () => {
  const now = new Date("2024-07-01T00:00:00Z");
  it("finds known entities, question type and an explicit time window", () => {
    const plan = planQuery({
      question: "What did Ana do in May 2024 with Pepper?",
      knownEntities: ["Ana", "Pepper", "Ben"],
      knownTopics: ["pottery"],
      now,
    });
    assert.deepEqual(plan.entities, ["Ana", "Pepper"]);
    assert.equal(plan.timeWindow?.from, "2024-05-01T00:00:00.000Z");
    assert.equal(plan.timeWindow?.to, "2024-05-31T23:59:59.999Z");
    assert.ok(plan.routes.includes("time") && plan.routes.includes("entity"));
  });

  it("types questions by pattern", () => {
    const type = (q: string) => planQuery({ question: q, knownEntities: ["Ben"], knownTopics: [], now }).questionType;
    assert.equal(type("When did Ben get promoted?"), "temporal");
    assert.equal(type("What do Ana and Ben both like?"), "multi-hop");
    assert.equal(type("Would Ben likely enjoy hiking?"), "open");
    assert.equal(type("What is the name of Ben's dog?"), "single-hop");
  });

  const windowOf = (question: string, at: Date) =>
    planQuery({ question, knownEntities: [], knownTopics: [], now: at }).timeWindow;

  it("puts a month or day without a year at the latest one that began by now", () => {
    const october = new Date("2023-10-20T14:00:00Z");
    // chrono's nearest December is the coming one; the question asks about the past.
    assert.deepEqual(windowOf("What did Ana do in December?", october), {
      from: "2022-12-01T00:00:00.000Z",
      to: "2022-12-31T23:59:59.999Z",
    });
    assert.deepEqual(windowOf("What did Ana do in June?", october), {
      from: "2023-06-01T00:00:00.000Z",
      to: "2023-06-30T23:59:59.999Z",
    });
    // The current month and today have begun: they stay.
    assert.equal(windowOf("What did Ana do in October?", october)?.from, "2023-10-01T00:00:00.000Z");
    assert.equal(windowOf("What did Ana do on October 20?", october)?.from, "2023-10-20T00:00:00.000Z");
    assert.equal(windowOf("What did Ana do on November 2?", october)?.from, "2022-11-02T00:00:00.000Z");
    // A year given is kept as given, also ahead of now.
    assert.equal(windowOf("What will Ana do in December 2023?", october)?.from, "2023-12-01T00:00:00.000Z");
    // Relative expressions resolve against now.
    assert.equal(windowOf("What did Ana do last year?", october)?.from, "2022-01-01T00:00:00.000Z");
    assert.equal(windowOf("Where did Ana live 4 years ago?", october)?.from, "2019-01-01T00:00:00.000Z");
  });

  it("takes no time window from a time of day alone", () => {
    const plan = planQuery({
      question: "How does Ben feel about the opening night of his studio?",
      knownEntities: ["Ben"],
      knownTopics: [],
      now,
    });
    assert.equal(plan.timeWindow, undefined);
    assert.ok(!plan.routes.includes("time"));
    // A date later in the question is the window.
    assert.equal(windowOf("What did Ben do at night after the party on May 3?", now)?.from, "2024-05-03T00:00:00.000Z");
  });

  it("matches possessives and topics, and adds no time route without a time expression", () => {
    const plan = planQuery({
      question: "What is Ben's favourite pottery technique?",
      knownEntities: ["Ben"],
      knownTopics: ["pottery", "technique"],
      now,
    });
    assert.deepEqual(plan.entities, ["Ben"]);
    assert.deepEqual(plan.topics.sort(), ["pottery", "technique"]);
    assert.equal(plan.timeWindow, undefined);
  });
});
