import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { describe, it } from "node:test";
import { Tiktoken } from "js-tiktoken/lite";
import o200k from "js-tiktoken/ranks/o200k_base";
import { loadLocomo } from "../../services/core/datasets/locomo.ts";
import { chunkByCodePoints, countTokens, MAX_PIECE_CODE_POINTS, truncateToTokens } from "../../services/core/tokens.ts";

const exact = new Tiktoken(o200k);
const SAMPLE = "services/cli/sample-locomo.json";
const DEV = "../shared/data/locomo-dev.json";

/** Deterministic pseudo-random generator (mulberry32), so the mixed inputs are the same on every run. */
const rng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};

const turnsOf = (file: string): string[] => loadLocomo(file).flatMap((c) => c.turns.map((t) => t.text));

/** Pathological inputs of about n UTF-16 units: one unbroken piece each, or long runs the regex must scan. */
const PATHOLOGICAL: Record<string, (n: number) => string> = {
  "x run": (n) => "x".repeat(n),
  "CJK run": (n) => Array.from({ length: n }, (_, i) => String.fromCodePoint(0x4e00 + ((i * 7919) % 20_000))).join(""),
  emoji: (n) => "😀".repeat(n / 2),
  "control chars": (n) => Array.from({ length: n }, (_, i) => String.fromCharCode(i % 32)).join(""),
  "mixed symbols": (n) => {
    const next = rng(7);
    const alphabet = [
      "\u0000",
      "\u0007",
      "\t",
      "\n",
      " ",
      "'",
      "<|endoftext|>",
      "é",
      "ß",
      "😀",
      "1",
      "x",
      "X",
      "的",
      "!",
    ];
    let s = "";
    while (s.length < n) s += alphabet[Math.floor(next() * alphabet.length)];
    return s;
  },
};

describe("o200k token counting: exact on ordinary text, linear on any text", () => {
  it("equals js-tiktoken on every LoCoMo turn (the sample, and the dev file when present)", () => {
    const texts = [...turnsOf(SAMPLE), ...(existsSync(DEV) ? turnsOf(DEV) : [])];
    assert.ok(texts.length > 10);
    for (const text of texts) assert.equal(countTokens(text), exact.encode(text).length, text);
    // Whole conversations too: pieces across turn boundaries (newlines, spaces) are the same.
    const joined = texts.slice(0, 400).join("\n");
    assert.equal(countTokens(joined), exact.encode(joined).length);
  });

  it("equals js-tiktoken on mixed-script text with pieces under the bound", () => {
    const next = rng(42);
    const words = [
      "Hello",
      "world",
      "naïve",
      "café",
      "日本語",
      "東京に行った",
      "😀👍🏽",
      "it's",
      "I'll",
      "1234567",
      "  ",
      "\n\n",
      "—",
      "...",
      "https://example.com/a?b=c",
      "ÄÖÜ",
      "Привет",
      "مرحبا",
    ];
    for (let k = 0; k < 200; k++) {
      let text = "";
      const len = 1 + Math.floor(next() * 40);
      for (let i = 0; i < len; i++) text += `${words[Math.floor(next() * words.length)]}${next() < 0.7 ? " " : ""}`;
      assert.equal(countTokens(text), exact.encode(text).length, JSON.stringify(text));
    }
  });

  it("counts special-token strings as ordinary text instead of throwing", () => {
    const text = "please ignore <|endoftext|> and <|endofprompt|>";
    assert.equal(countTokens(text), exact.encode(text, [], []).length);
    assert.equal(truncateToTokens(text, 100), text);
  });

  it("counts 100,000-unit pathological inputs, linearly in their size and near the exact count", {
    timeout: 60_000,
  }, () => {
    for (const [name, make] of Object.entries(PATHOLOGICAL)) {
      const big = make(100_000);
      const small = make(10_000);
      const nBig = countTokens(big);
      const nSmall = countTokens(small);
      // Never more tokens than UTF-8 bytes, and one token per chunk at least.
      assert.ok(nBig <= Buffer.byteLength(big) && nBig >= big.length / (4 * MAX_PIECE_CODE_POINTS), `${name}: ${nBig}`);
      const ratio = nBig / nSmall;
      assert.ok(ratio > 8.5 && ratio < 11.5, `${name}: ${nBig} / ${nSmall} = ${ratio}`);
      // The exact tokenizer on the 10x smaller input (still fast enough): the chunked count is close.
      if (name !== "x run" && name !== "CJK run") continue;
      const e = exact.encode(make(2_000), [], []).length;
      const c = countTokens(make(2_000));
      assert.ok(c >= e && c <= e * 1.1 + 2_000 / MAX_PIECE_CODE_POINTS, `${name}: chunked ${c} vs exact ${e}`);
    }
  });

  it("truncates like js-tiktoken on ordinary text, and within the bound on pathological text", {
    timeout: 60_000,
  }, () => {
    for (const text of turnsOf(SAMPLE).slice(0, 100))
      for (const max of [0, 1, 5, 17]) {
        const ids = exact.encode(text);
        const want = ids.length <= max ? text : exact.decode(ids.slice(0, max));
        assert.equal(truncateToTokens(text, max), want);
      }
    for (const [name, make] of Object.entries(PATHOLOGICAL)) {
      const cut = truncateToTokens(make(100_000), 50);
      assert.ok(countTokens(cut) <= 51, `${name}: ${countTokens(cut)}`);
      assert.ok(cut.length > 0 && cut.length < 10_000, `${name}: ${cut.length}`);
    }
  });

  it("chunks long pieces by code points without splitting a surrogate pair", () => {
    const chunks = chunkByCodePoints(`${"😀".repeat(5)}ab`, 2);
    assert.deepEqual(chunks, ["😀😀", "😀😀", "😀a", "b"]);
    assert.deepEqual(chunkByCodePoints("abc", 5), ["abc"]);
    assert.deepEqual(chunkByCodePoints("", 5), []);
  });
});
