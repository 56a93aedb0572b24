/**
 * Generators shared by the fuzz tests (HTTP, gRPC, Kafka values): strings that break naive
 * handling, huge and pathological texts, JSON of the wrong shape, and objects with mutated fields.
 * Everything is drawn by fast-check from a fixed seed in the tests, so a failure replays exactly.
 */
import fc from "fast-check";

/** Short strings that trip parsers, routers, stores and loggers. */
export const NASTY_STRINGS: readonly string[] = [
  "",
  " ",
  "   ",
  "\u0000",
  "a\u0000b",
  "..",
  "../..",
  "/",
  "a/b",
  "a::b",
  "%",
  "%00",
  "%zz",
  "%2F",
  "?",
  "#",
  "&",
  "=",
  "\\",
  "\r\n",
  "\t",
  "\u0007",
  "\u001b[31m",
  "\u202e",
  "\ufeff",
  "\ud800",
  "\udc00x",
  "😀",
  "👩‍👩‍👧‍👦",
  "汉字",
  "مرحبا",
  "Ω≈ç√",
  "null",
  "undefined",
  "true",
  "0",
  "-1",
  "NaN",
  "1e309",
  "__proto__",
  "constructor",
  "toString",
  "<script>alert(1)</script>",
  "' OR 1=1 --",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal template placeholder is the point
  "${x}",
  "MATCH (n) DETACH DELETE n",
  '"',
  "`",
];

/** Pathological texts, by name (the name goes into failure reports instead of the text). */
export const HUGE_STRINGS: Readonly<Record<string, string>> = {
  "100k unbroken x": "x".repeat(100_000),
  "100k CJK": "汉字".repeat(50_000),
  "50k emoji": "😀".repeat(50_000),
  "3k CJK turn": "我们今天去公园散步然后吃了午饭".repeat(200),
  "20k control chars": "\u0001\u0002\u0003\u0008\u000b\u001f\u007f".repeat(3000),
  "1 MB of words": "lorem ipsum dolor ".repeat(58_255),
  "100k digits": "7".repeat(100_000),
  "100k zero-width joiners": "a\u200d".repeat(50_000),
};

export const hugeStringName = (): fc.Arbitrary<string> => fc.constantFrom(...Object.keys(HUGE_STRINGS));

/**
 * A string from the nasty list, or generated: any code unit, graphemes, ASCII, or a run of one
 * character of up to `maxRun` (the huge runs of HUGE_STRINGS have their own tests).
 */
export const nastyString = (maxLength = 48, maxRun = 300): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...NASTY_STRINGS) },
    { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength }) },
    { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength }) },
    { weight: 1, arbitrary: fc.string({ unit: "grapheme-ascii", maxLength }) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.constantFrom("x", "汉", "😀", "\u0001", "ab ", "%", "/"),
          fc.integer({ min: Math.min(100, maxRun), max: maxRun }),
        )
        .map(([c, n]) => c.repeat(n)),
    },
  );

/** A value of the wrong JSON type (or a nasty string). */
export const wrongValue = (): fc.Arbitrary<unknown> =>
  fc.oneof(
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.constant([]),
    fc.constant({}),
    fc.array(fc.string({ maxLength: 8 }), { maxLength: 3 }),
    fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
    nastyString(),
  );

/** ISO timestamps of sane dates (valid under any reasonable timestamp rule). */
export const isoTimestamp = (): fc.Arbitrary<string> =>
  fc
    .date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2030-12-31T00:00:00Z"), noInvalidDate: true })
    .map((d) => d.toISOString());

/** A few plain words (valid text everywhere). */
export const words = (): fc.Arbitrary<string> =>
  fc
    .array(fc.constantFrom("Ana", "adopted", "a", "dog", "called", "Pepper", "on", "Saturday", "we", "met", "Paris"), {
      minLength: 1,
      maxLength: 12,
    })
    .map((w) => w.join(" "));

export interface Mutated<T> {
  value: T;
  /** The fields changed (omitted or replaced), for reports and oracles. */
  fields: string[];
}

/**
 * `base` with up to `maxFields` of `fields` omitted or replaced by a value from `replacement`.
 * A field that is not in `base` may be added.
 */
export const mutateFields = <T extends Record<string, unknown>>(
  base: fc.Arbitrary<T>,
  fields: readonly string[],
  replacement: fc.Arbitrary<unknown>,
  maxFields = 2,
): fc.Arbitrary<Mutated<Record<string, unknown>>> =>
  fc
    .tuple(
      base,
      fc.uniqueArray(fc.constantFrom(...fields), { minLength: 1, maxLength: maxFields }),
      fc.array(fc.option(replacement, { nil: undefined, freq: 4 }), { minLength: maxFields, maxLength: maxFields }),
    )
    .map(([b, chosen, values]) => {
      const value: Record<string, unknown> = { ...b };
      chosen.forEach((f, i) => {
        const v = values[i];
        if (v === undefined) delete value[f];
        else value[f] = v;
      });
      return { value, fields: chosen };
    });

/** Percent-encodes every byte of the UTF-8 of `s` except unreserved characters (lone surrogates become U+FFFD). */
export const encodeAll = (s: string): string =>
  [...Buffer.from(s, "utf8")]
    .map((b) =>
      /[A-Za-z0-9\-._~]/.test(String.fromCharCode(b))
        ? String.fromCharCode(b)
        : `%${b.toString(16).toUpperCase().padStart(2, "0")}`,
    )
    .join("");

/**
 * Percent-encodes only what may not appear raw in a request line (controls, space, non-ASCII), so
 * `/`, `%`, `?`, `#`, `..` reach the server as they are.
 */
export const encodeMinimal = (s: string): string =>
  [...Buffer.from(s, "utf8")]
    .map((b) => (b > 0x20 && b < 0x7f ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, "0")}`))
    .join("");
