import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { disguiseConversation, locomoDisguise, shiftedByYears } from "../../services/bench/locomo-disguise.ts";
import type { LocomoConversation } from "../../services/core/datasets/locomo.ts";

const conversation: LocomoConversation = {
  id: "conv-x",
  speakers: ["Melanie", "Jon"],
  turns: [
    {
      turnId: "D1:1",
      speaker: "Melanie",
      role: "user",
      text: "Hey Jon! I just got back from Paris, it was lovely. We met in 2019.",
      timestamp: "2023-05-08T13:56:00.000Z",
      sessionId: "1",
    },
    {
      turnId: "D1:2",
      speaker: "Jon",
      role: "user",
      text: "Welcome back, Mel! Melodies from Boston are calling me.",
      timestamp: "2024-02-29T09:00:00.000Z",
      sessionId: "1",
    },
  ],
  questions: [
    {
      question: "Where did Mel travel on May 8, 2023?",
      answer: "Melanie went to Paris on 8 May 2023",
      category: 4,
      evidence: ["D1:1"],
    },
  ],
};

describe("bench locomo --disguise: disguiseConversation", () => {
  const copy = 2;
  const d = locomoDisguise(conversation, copy);
  const mel = d.names.get("Melanie") as string;
  const jon = d.names.get("Jon") as string;
  const paris = d.places.get("Paris") as string;
  const out = disguiseConversation(conversation, copy);

  it("renames the speakers everywhere, their short forms too, and leaves other words that share a prefix", () => {
    assert.notEqual(mel, "Melanie");
    assert.deepEqual(out.speakers, [mel, jon]);
    assert.deepEqual(
      out.turns.map((t) => t.speaker),
      [mel, jon],
    );
    assert.equal(out.turns[0]?.text, `Hey ${jon}! I just got back from ${paris}, it was lovely. We met in 2017.`);
    // "Mel" is Melanie's short form; "Melodies" is another word.
    assert.equal(out.turns[1]?.text, `Welcome back, ${mel}! Melodies from ${d.places.get("Boston")} are calling me.`);
  });

  it("moves every date, written or a timestamp, the copy's whole years back, so written dates stay true", () => {
    assert.equal(d.shiftYears, -2);
    assert.equal(out.turns[0]?.timestamp, "2021-05-08T13:56:00.000Z");
    assert.equal(out.turns[1]?.timestamp, "2022-03-01T09:00:00.000Z");
    assert.equal(out.questions[0]?.question, `Where did ${mel} travel on May 8, 2021?`);
    assert.equal(out.questions[0]?.answer, `${mel} went to ${paris} on 8 May 2021`);
    assert.equal(shiftedByYears(new Date("2023-10-13T00:00:00.000Z"), 1).toISOString(), "2024-10-13T00:00:00.000Z");
  });

  it("leaves ids, categories and evidence as they were; copy 0 is the conversation itself; a copy is deterministic", () => {
    assert.deepEqual(
      out.turns.map((t) => t.turnId),
      conversation.turns.map((t) => t.turnId),
    );
    assert.equal(out.id, conversation.id);
    assert.deepEqual(out.questions[0]?.evidence, ["D1:1"]);
    assert.equal(out.questions[0]?.category, 4);
    assert.equal(disguiseConversation(conversation, 0), conversation);
    assert.deepEqual(disguiseConversation(conversation, copy), out);
  });
});
