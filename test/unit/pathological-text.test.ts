import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { lexicalText, queryTerms } from "../../services/core/lexical.ts";
import { turnEmbeddingText } from "../../services/core/turn-text.ts";
import type { Segment } from "../../services/core/types.ts";
import { encodeSegment } from "../../services/encoder/encode-segment.ts";
import { boundSentence, extractPhotos, MAX_SENTENCE_CHARS, splitSentences } from "../../services/encoder/sentences.ts";
import { packContext } from "../../services/query/pack.ts";
import { questionWindow } from "../../services/query/question-time.ts";
import {
  defaultSegmenterConfig,
  initialSegmenterState,
  segmenterStep,
} from "../../services/segmenter/segment-state.ts";
import { StatisticalCompressor } from "../../services/sensory/statistical-compressor.ts";

/** 100,000-character turns (the API's largest) of the shapes that made a pass super-linear. */
const N = 100_000;
const INPUTS: Record<string, string> = {
  "x run": "x".repeat(N),
  "CJK run": Array.from({ length: N }, (_, i) => String.fromCodePoint(0x4e00 + ((i * 7919) % 20_000))).join(""),
  emoji: "😀".repeat(N / 2),
  "control chars": Array.from({ length: N }, (_, i) => String.fromCharCode(i % 32)).join(""),
  "one sentence of words": "hello World, I went to Paris on May 5th 2023 with Mel ".repeat(N / 54),
  "unclosed photo tags": "[shared a photo: ".repeat(N / 17),
  "dates without a sentence end": "on May 5 ".repeat(N / 9),
  "vocatives without a sentence end": "Hey Mel, ".repeat(N / 9),
  // chrono runs each parser's pattern on what is left after each match: the season, holiday and
  // week parsers are quadratic on a sentence of nothing but their matches, which the bound on a
  // sentence's length keeps small.
  "seasons and holidays without a sentence end": "last Christmas and during the summer the week before last ".repeat(
    N / 58,
  ), // The dates counted from the story, next to a holiday (one more parse of chrono's merged result
  // each) and counted back.
  "relative dates without a sentence end":
    "the day after Thanksgiving two days later a few days ago two weekends ago ".repeat(N / 74),
};
const AT = "2023-05-08T13:56:00Z";

describe("every stage's pure text pass finishes on 100,000-character pathological turns", () => {
  for (const [name, text] of Object.entries(INPUTS)) {
    it(name, { timeout: 120_000 }, async () => {
      const compressed = await new StatisticalCompressor().compress(text, 0.5);
      assert.ok(compressed.text.length <= text.length);
      const sentences = splitSentences(extractPhotos(text).body);
      for (const s of sentences) assert.ok(s.length <= MAX_SENTENCE_CHARS);
      lexicalText(text);
      assert.ok(queryTerms(text).length <= 32);
      turnEmbeddingText("Mel", text);
      const turn = {
        turnId: "t1",
        speaker: "Mel",
        role: "user" as const,
        text,
        compressed: compressed.text,
        timestamp: AT,
        sessionId: "s",
      };
      const step = segmenterStep(
        initialSegmenterState("t", "c"),
        {
          kind: "turn",
          turn: { ...turn, tenant: "t", conversation: "c", keptRatio: compressed.keptRatio },
          embedding: new Float32Array(384).fill(0.05),
          nowMs: 0,
        },
        defaultSegmenterConfig(),
      );
      assert.ok(step.state);
      const segment: Segment = {
        id: "s1",
        tenant: "t",
        conversation: "c",
        sessionId: "s",
        turns: [turn],
        start: AT,
        end: AT,
        tokens: 10,
        closedBy: "flush",
        decisions: [],
      };
      const { records } = encodeSegment(segment, undefined);
      const packed = packContext(
        records.map((r) => ({
          kind: "record" as const,
          id: r.id,
          text: r.text,
          date: AT,
          conversation: "c",
          turnIds: ["t1"],
          speakers: ["Mel"],
          routes: [],
          fusedScore: 1,
        })),
        2000,
      );
      assert.ok(packed.tokens <= 2000);
    });
  }

  it("reads the dates of a question of the largest size (4,000 characters) of nothing but dates", () => {
    for (const unit of [
      "last Christmas ",
      "during the summer ",
      "the week before last ",
      "early 2023 ",
      "on May 5 ",
      "the day after Thanksgiving ",
      "the weekend before Christmas ",
      "two weekends ago ",
    ]) {
      const question = unit.repeat(Math.floor(4000 / unit.length));
      assert.ok(questionWindow(question, new Date(AT)), unit);
    }
  });

  it("cuts an overlong sentence at the last space before the bound, or hard without one", () => {
    assert.deepEqual(boundSentence("aaa bbb ccc", 8), ["aaa bbb", "ccc"]);
    assert.deepEqual(boundSentence("abcdefghij", 4), ["abcd", "efgh", "ij"]);
    assert.deepEqual(boundSentence("short", 8), ["short"]);
  });

  it("leaves unclosed photo tags as text and still finds a closed one", () => {
    assert.deepEqual(extractPhotos("look [shared a photo: no end"), {
      body: "look [shared a photo: no end",
      captions: [],
    });
    assert.deepEqual(extractPhotos("look [shared a photo: a dog on a beach] nice"), {
      body: "look nice",
      captions: ["a dog on a beach"],
    });
  });
});
