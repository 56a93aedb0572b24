import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { planQuery } from "../../services/query/planner.ts";
import { OPEN_START, questionWindow } from "../../services/query/question-time.ts";

const october = new Date("2023-10-20T14:00:00Z");
const day = (iso: string) => iso.slice(0, 10);
const windowOf = (question: string, ref = october): [string, string] | undefined => {
  const w = questionWindow(question, ref);
  return w && [day(w.from), day(w.to)];
};

describe("the dates a question names, as one window", () => {
  it("keeps a single date as the day, month or year it pins down", () => {
    assert.deepEqual(windowOf("What did Ana do in May 2023?"), ["2023-05-01", "2023-05-31"]);
    assert.deepEqual(windowOf("What did Ana say on October 13, 2023?"), ["2023-10-13", "2023-10-13"]);
    assert.deepEqual(windowOf("What did Ana do last year?"), ["2022-01-01", "2022-12-31"]);
    // Ends are inclusive to the last millisecond of the period.
    assert.equal(questionWindow("What did Ana do in May 2023?", october)?.to, "2023-05-31T23:59:59.999Z");
  });

  it("reads a year written alone after a preposition, which chrono leaves alone", () => {
    assert.deepEqual(windowOf("Where did Ana live in 2019?"), ["2019-01-01", "2019-12-31"]);
    assert.deepEqual(windowOf("What did Ana do during 2021?"), ["2021-01-01", "2021-12-31"]);
    // A part of a year is the year.
    assert.deepEqual(windowOf("What did Ana do in early 2023?"), ["2023-01-01", "2023-12-31"]);
    assert.deepEqual(windowOf("Where did Ana live in mid-2021?"), ["2021-01-01", "2021-12-31"]);
    assert.deepEqual(windowOf("What did Ana do at the end of 2021?"), ["2021-01-01", "2021-12-31"]);
    // A winter of a year is the year: people differ on which winter that is.
    assert.deepEqual(windowOf("Where was Ana in the winter of 2022?"), ["2022-01-01", "2022-12-31"]);
    // A number that is not said as a time is not a year.
    assert.equal(windowOf("How many of 2000 people came to Ana's show?"), undefined);
    assert.equal(windowOf("Did Ana sell 2019 paintings?"), undefined);
    assert.equal(windowOf("Ana ran 2020 meters"), undefined);
  });

  it("reads a season as its three months, the last one begun when nothing places it", () => {
    assert.deepEqual(windowOf("Where was Ana in the summer of 2022?"), ["2022-06-01", "2022-08-31"]);
    assert.deepEqual(windowOf("What did Ana paint in fall 2021?"), ["2021-09-01", "2021-11-30"]);
    // Asked in October 2023: last summer has ended, this autumn is under way, last winter ended in February.
    assert.deepEqual(windowOf("What did Melanie do last summer?"), ["2023-06-01", "2023-08-31"]);
    assert.deepEqual(windowOf("What did Melanie do this fall?"), ["2023-09-01", "2023-11-30"]);
    assert.deepEqual(windowOf("Where did Melanie ski last winter?"), ["2022-12-01", "2023-02-28"]);
    assert.deepEqual(windowOf("When did Caroline go to a parade during the summer?"), ["2023-06-01", "2023-08-31"]);
    // Asked in July, "during the summer" is this one and "last summer" the one before.
    const july = new Date("2023-07-20T10:00:00Z");
    assert.deepEqual(windowOf("What did Ana read during the summer?", july), ["2023-06-01", "2023-08-31"]);
    assert.deepEqual(windowOf("What did Ana read last summer?", july), ["2022-06-01", "2022-08-31"]);
    // Asked in March, "over the winter" is the one just ended, not the next.
    assert.deepEqual(windowOf("What did Ana read over the winter?", new Date("2024-03-10T10:00:00Z")), [
      "2023-12-01",
      "2024-02-29",
    ]);
    // A season that qualifies a noun, or said for a plan, names no time of the question.
    assert.equal(windowOf("What did Caroline's kids do over the summer break?"), undefined);
    assert.equal(windowOf("What are Caroline's plans for the summer?"), undefined);
    assert.equal(windowOf("What did Ana hurt in the fall?"), undefined);
    // Joined seasons are one span.
    assert.deepEqual(windowOf("Where was Ana in summer 2021 and summer 2022?"), ["2021-06-01", "2022-08-31"]);
  });

  it("reads a week and a weekend as their days, a holiday as its day", () => {
    // Asked on Friday 2023-10-20. Before, "last week" was its Sunday alone and "last weekend" the whole year.
    assert.deepEqual(windowOf("What did Ana do last week?"), ["2023-10-09", "2023-10-15"]);
    assert.deepEqual(windowOf("What did Ana do last weekend?"), ["2023-10-14", "2023-10-15"]);
    assert.deepEqual(windowOf("What did Ana do the week before last?"), ["2023-10-02", "2023-10-08"]);
    assert.deepEqual(windowOf("What did Ana do two weeks ago?"), ["2023-10-02", "2023-10-08"]);
    assert.deepEqual(windowOf("What did Ana do last Christmas?"), ["2022-12-25", "2022-12-25"]);
    assert.deepEqual(windowOf("What did Ana cook for Thanksgiving 2022?"), ["2022-11-24", "2022-11-24"]);
    // Halloween named alone, asked before it: last year's.
    assert.deepEqual(windowOf("What did Ana dress up as on Halloween?"), ["2022-10-31", "2022-10-31"]);
    assert.equal(windowOf("When did Ana go to a Christmas market?"), undefined);
    // Counts chrono leaves (before, no window): weekends and seasons back, a decade.
    assert.deepEqual(windowOf("What did Ana do two weekends ago?"), ["2023-10-07", "2023-10-08"]);
    assert.deepEqual(windowOf("Where did Ana go two summers ago?"), ["2022-06-01", "2022-08-31"]);
    assert.deepEqual(windowOf("Where did Ana live a decade ago?"), ["2013-01-01", "2013-12-31"]);
  });

  it("names no window for a date counted from another event", () => {
    // Before, "the day after the party" was the day after the question, "two days later" two days on.
    assert.equal(windowOf("What did Ana do the day after the party?"), undefined);
    assert.equal(windowOf("What happened two days later?"), undefined);
    assert.equal(windowOf("Where did Ana go the week before the wedding?"), undefined);
  });

  it("reads a time next to a holiday as its own days, not the holiday's or everything before it", () => {
    // Asked on 2023-10-20. Before, "the day after Thanksgiving" (one result to chrono, counted from
    // the nearest) was 2023-11-24, ahead of the question; "the weekend before Christmas" was
    // everything up to Christmas Eve.
    assert.deepEqual(windowOf("What did Ana do the day after Thanksgiving?"), ["2022-11-25", "2022-11-25"]);
    assert.deepEqual(windowOf("What did Ana do the weekend before Christmas?"), ["2022-12-17", "2022-12-18"]);
    assert.deepEqual(windowOf("Where did Ana go the week after Easter?"), ["2023-04-10", "2023-04-16"]);
    assert.deepEqual(windowOf("What did Ana do before Christmas?"), [day(OPEN_START), "2022-12-24"]);
  });

  it("spans dates joined into one period", () => {
    assert.deepEqual(windowOf("Where did Jon live between 2019 and 2021?"), ["2019-01-01", "2021-12-31"]);
    assert.deepEqual(windowOf("Where did Jon live from 2019 to 2021?"), ["2019-01-01", "2021-12-31"]);
    assert.deepEqual(windowOf("Where was Jon between June and August 2022?"), ["2022-06-01", "2022-08-31"]);
    // A yearless month before the joined date's month is in that year, one after it in the year before.
    assert.deepEqual(windowOf("Where was Jon between December and February 2023?"), ["2022-12-01", "2023-02-28"]);
    // A range chrono reads itself ends at the end of what its end pins down.
    assert.deepEqual(windowOf("What did Jon do from May 2022 until June 2023?"), ["2022-05-01", "2023-06-30"]);
    assert.deepEqual(windowOf("Where was Gina from May 3 to May 20?"), ["2023-05-03", "2023-05-20"]);
    assert.deepEqual(windowOf("What did Jon do since May until August?"), ["2023-05-01", "2023-08-31"]);
    // Two dates joined by "and": from one to the other, wider than asked rather than one left out.
    assert.deepEqual(windowOf("Where did Jon live in 2019 and in 2021?"), ["2019-01-01", "2021-12-31"]);
  });

  it("opens the other side of a date said with a side", () => {
    const start = day(OPEN_START);
    assert.deepEqual(windowOf("How many books had Ana read as of August 2023?"), [start, "2023-08-31"]);
    assert.deepEqual(windowOf("What had Ana painted by September 2023?"), [start, "2023-09-30"]);
    assert.deepEqual(windowOf("Where did Ana work until July?"), [start, "2023-07-31"]);
    assert.deepEqual(windowOf("Where did Ana live before 2020?"), [start, "2019-12-31"]);
    assert.deepEqual(windowOf("Where did Ana live prior to June 2023?"), [start, "2023-05-31"]);
    assert.deepEqual(windowOf("What has Ana done since May 2023?"), ["2023-05-01", "2023-10-20"]);
    assert.deepEqual(windowOf("What did Ana do after May 3?"), ["2023-05-04", "2023-10-20"]);
    assert.deepEqual(windowOf("What has Ana done since 2019?"), ["2019-01-01", "2023-10-20"]);
    assert.deepEqual(windowOf("Where did Ana live as of 2021?"), [start, "2021-12-31"]);
    assert.deepEqual(windowOf("Where did Ana work prior to 2020?"), [start, "2019-12-31"]);
    assert.deepEqual(windowOf("Where did Ana work up to 2020?"), [start, "2020-12-31"]);
    // "throughout" is during, not up to.
    assert.deepEqual(windowOf("Where did Ana work throughout 2020?"), ["2020-01-01", "2020-12-31"]);
  });

  it("takes the first date alone when the others are not joined to it", () => {
    // Old behaviour for unrelated dates: one window, not the span from one to the other.
    assert.deepEqual(windowOf("What did Ana do in June after moving in 2019?"), ["2023-06-01", "2023-06-30"]);
    // A side word that is not next to the date gives it no side.
    assert.deepEqual(windowOf("What did Ben do at night after the party on May 3?"), ["2023-05-03", "2023-05-03"]);
    assert.deepEqual(windowOf("What was painted by Ana on May 3?"), ["2023-05-03", "2023-05-03"]);
  });

  it("names no window without a date", () => {
    assert.equal(windowOf("When did Melanie go on a hike after the roadtrip?"), undefined);
    assert.equal(windowOf("How does Ben feel about the opening night of his studio?"), undefined);
    assert.equal(windowOf("Since when has Ben painted?"), undefined);
  });

  it("is the planner's time window, with the time route", () => {
    const plan = planQuery({
      question: "How many books had Ana read as of August 2023?",
      knownEntities: ["Ana"],
      knownTopics: [],
      now: october,
    });
    assert.deepEqual(plan.timeWindow, { from: OPEN_START, to: "2023-08-31T23:59:59.999Z" });
    assert.ok(plan.routes.includes("time"));
  });
});
