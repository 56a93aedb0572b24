// The shared input rules (services/core/input-rules.ts): ISO 8601 timestamps and filters, ids, text.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  idSchema,
  MAX_ID_LENGTH,
  MAX_YEAR,
  MIN_YEAR,
  parseIsoDateOrDateTime,
  parseIsoDateTime,
  textSchema,
} from "../../services/core/input-rules.ts";
import { TurnSchema } from "../../services/core/types.ts";

describe("input rules: timestamps", () => {
  it("reads ISO 8601 date-times with Z or an offset, to the same instant as Date.parse", () => {
    const cases: [string, string][] = [
      ["2023-05-08T13:56:00Z", "2023-05-08T13:56:00.000Z"],
      ["2023-05-08T13:56Z", "2023-05-08T13:56:00.000Z"],
      ["2023-05-08T15:56:00.5+02:00", "2023-05-08T13:56:00.500Z"],
      ["2023-05-08T08:56:00.123456-05:00", "2023-05-08T13:56:00.123Z"],
      ["2024-02-29T00:00:00Z", "2024-02-29T00:00:00.000Z"],
      [`${MIN_YEAR}-01-01T00:00:00Z`, `${MIN_YEAR}-01-01T00:00:00.000Z`],
      [`${MAX_YEAR}-12-31T23:59:59Z`, `${MAX_YEAR}-12-31T23:59:59.000Z`],
    ];
    for (const [text, iso] of cases) {
      assert.equal(new Date(parseIsoDateTime(text) as number).toISOString(), iso, text);
      assert.equal(parseIsoDateTime(text), Date.parse(text), text);
    }
  });

  it("rejects what Date.parse misdates or the year range excludes", () => {
    for (const text of [
      "1",
      "May 8",
      "8 May 2023",
      "2023-05-08",
      "2023-05-08T13:56:00",
      "2023-05-08 13:56:00Z",
      "2023-05-08t13:56:00z",
      "2023-05-08T13:56:00+0200",
      "2023-02-29T00:00:00Z",
      "2023-04-31T00:00:00Z",
      "2023-13-01T00:00:00Z",
      "2023-05-08T24:00:00Z",
      "2023-05-08T23:60:00Z",
      "2023-05-08T23:59:60Z",
      "2023-05-08T10:00:00+24:00",
      "0001-01-01T00:00:00Z",
      "9999-12-31T00:00:00Z",
      "+275760-09-13T00:00:00Z",
      "-000001-01-01T00:00:00Z",
      `${MIN_YEAR - 1}-12-31T23:59:59Z`,
      `${MAX_YEAR + 1}-01-01T00:00:00Z`,
      "",
    ]) {
      assert.equal(parseIsoDateTime(text), undefined, text);
    }
  });

  it("filters also take a calendar date (midnight UTC), with the same year range", () => {
    assert.equal(parseIsoDateOrDateTime("2023-05-08"), Date.UTC(2023, 4, 8));
    assert.equal(parseIsoDateOrDateTime("2023-05-08T01:00:00+01:00"), Date.UTC(2023, 4, 8));
    for (const text of ["2023-02-30", "0001-01-01", "2023-5-8", "20230508"]) {
      assert.equal(parseIsoDateOrDateTime(text), undefined, text);
    }
  });

  it("round-trips every instant of the accepted range through toISOString (property)", () => {
    const min = new Date(Date.UTC(MIN_YEAR, 0, 1, 12));
    const max = new Date(Date.UTC(MAX_YEAR, 11, 31, 12));
    fc.assert(
      fc.property(fc.date({ min, max, noInvalidDate: true }), (d) => {
        assert.equal(parseIsoDateTime(d.toISOString()), d.getTime());
      }),
      { seed: 42, numRuns: 500 },
    );
  });
});

describe("input rules: ids and text", () => {
  it("ids: trimmed, 1..MAX_ID_LENGTH, no control characters", () => {
    const id = idSchema();
    assert.equal(id.parse("  conv-1 "), "conv-1");
    assert.equal(id.parse("é 会話 🙂"), "é 会話 🙂");
    assert.equal(id.parse("x".repeat(MAX_ID_LENGTH)).length, MAX_ID_LENGTH);
    for (const bad of [
      "",
      "   ",
      "x".repeat(MAX_ID_LENGTH + 1),
      "a\u0000b",
      "a\nb",
      "a\u001bb",
      "a\u007fb",
      "a\u0085b",
    ]) {
      assert.equal(id.safeParse(bad).success, false, JSON.stringify(bad));
    }
  });

  it("text: control characters stripped except tab, newline and carriage return; not blank", () => {
    const text = textSchema();
    assert.equal(text.parse("a\u0000b\u0007c\td\ne\rf\u009b"), "abc\td\ne\rf");
    for (const bad of ["", " \n\t", "\u0000\u0001", "x".repeat(100_001)]) {
      assert.equal(text.safeParse(bad).success, false, JSON.stringify(bad.slice(0, 10)));
    }
  });
});

describe("input rules: turns on the turns topic (TurnSchema)", () => {
  const turn = {
    tenant: "t",
    conversation: "c",
    turnId: "t1",
    speaker: "Ana",
    text: "hello",
    timestamp: "2023-05-08T10:00:00.000Z",
    sessionId: "s1",
  };
  it("applies the same rules to Kafka input as the front doors do", () => {
    assert.equal(TurnSchema.parse(turn).text, "hello");
    assert.equal(TurnSchema.parse({ ...turn, text: "he\u0000llo" }).text, "hello");
    for (const [field, value] of [
      ["timestamp", "1"],
      ["timestamp", "May 8"],
      ["timestamp", "-000001-01-01T00:00:00Z"],
      ["speaker", "A\u0000na"],
      ["conversation", "c".repeat(MAX_ID_LENGTH + 1)],
      ["turnId", "t\u001b1"],
      ["text", "  "],
    ] as const) {
      const r = TurnSchema.safeParse({ ...turn, [field]: value });
      assert.equal(r.success, false, `${field}=${JSON.stringify(value)}`);
      assert.equal(r.error?.issues[0]?.path[0], field);
    }
  });
});
