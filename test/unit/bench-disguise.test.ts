import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { disguiseConversation, disguiseOf } from "../../services/bench/scale-data.ts";
import type { LocomoConversation } from "../../services/core/datasets/locomo.ts";

const conversation: LocomoConversation = {
  id: "conv-x",
  speakers: ["Melanie", "Jon"],
  turns: [
    {
      turnId: "D1:1",
      speaker: "Melanie",
      role: "user",
      text: "Hey Jon! I just got back from Paris, it was lovely.",
      timestamp: "2023-05-08T13:56:00.000Z",
      sessionId: "1",
    },
    {
      turnId: "D1:2",
      speaker: "Jon",
      role: "user",
      text: "Welcome back, Mel! Melodies from Boston are calling me.",
      timestamp: "2023-05-08T13:57:00.000Z",
      sessionId: "1",
    },
  ],
  questions: [
    { question: "Where did Mel travel in May 2023?", answer: "Melanie went to Paris", category: 4, evidence: ["D1:1"] },
  ],
};

describe("bench locomo --disguise: disguiseConversation", () => {
  const copy = 2;
  const d = disguiseOf(conversation, copy);
  const mel = d.names.get("Melanie") as string;
  const jon = d.names.get("Jon") as string;
  const out = disguiseConversation(conversation, copy);

  it("renames the speakers everywhere, their short forms included, and keeps other words that share a prefix", () => {
    assert.deepEqual(out.speakers, [mel, jon]);
    assert.deepEqual(
      out.turns.map((t) => t.speaker),
      [mel, jon],
    );
    assert.equal(out.turns[0]?.text, `Hey ${jon}! I just got back from ${d.places.get("Paris")}, it was lovely.`);
    // "Mel" is Melanie's short form; "Melodies" is another word.
    assert.equal(out.turns[1]?.text, `Welcome back, ${mel}! Melodies from ${d.places.get("Boston")} are calling me.`);
    assert.equal(out.questions[0]?.question, `Where did ${mel} travel in May 2023?`);
    assert.equal(out.questions[0]?.answer, `${mel} went to ${d.places.get("Paris")}`);
  });

  it("shifts every timestamp by the copy's whole days and leaves ids, categories and evidence as they were", () => {
    assert.notEqual(d.shiftDays, 0);
    out.turns.forEach((t, i) => {
      const before = conversation.turns[i];
      assert.equal(t.turnId, before?.turnId);
      assert.equal(Date.parse(t.timestamp) - Date.parse(before?.timestamp ?? ""), d.shiftDays * 86_400_000);
    });
    assert.equal(out.id, conversation.id);
    assert.deepEqual(out.questions[0]?.evidence, ["D1:1"]);
    assert.equal(out.questions[0]?.category, 4);
  });

  it("is the identity for copy 0 and deterministic for a copy", () => {
    assert.deepEqual(disguiseConversation(conversation, 0), conversation);
    assert.deepEqual(disguiseConversation(conversation, copy), out);
  });
});
