import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { daySpanWording } from "../../services/core/text/day-span.ts";

describe("a span of days in words", () => {
  it("words a day, a month, a year, a week and a weekend as the encoder resolves them", () => {
    assert.equal(daySpanWording("2023-05-07", "2023-05-07"), "2023-05-07");
    assert.equal(daySpanWording("2023-06-01", "2023-06-30"), "June 2023");
    assert.equal(daySpanWording("2024-02-01", "2024-02-29"), "February 2024");
    assert.equal(daySpanWording("2022-01-01", "2022-12-31"), "2022");
    assert.equal(daySpanWording("2023-02-20", "2023-02-26"), "the week of 2023-02-20");
    assert.equal(daySpanWording("2023-02-25", "2023-02-26"), "the weekend of 2023-02-25");
  });

  it("gives any other span both ends, and leaves what is not a span of days as its first day", () => {
    assert.equal(daySpanWording("2023-02-01", "2023-02-28"), "February 2023");
    assert.equal(daySpanWording("2023-02-02", "2023-02-28"), "2023-02-02 to 2023-02-28");
    assert.equal(daySpanWording("2022-01-01", "2023-05-31"), "2022-01-01 to 2023-05-31");
    // A week that does not start on a Monday, two days that are not a weekend.
    assert.equal(daySpanWording("2023-02-21", "2023-02-27"), "2023-02-21 to 2023-02-27");
    assert.equal(daySpanWording("2023-02-20", "2023-02-21"), "2023-02-20 to 2023-02-21");
    assert.equal(daySpanWording("2023-05-09", "2023-05-01"), "2023-05-09");
    assert.equal(daySpanWording("2023-05-09", "soon"), "2023-05-09");
  });
});
