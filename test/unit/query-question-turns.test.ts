import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type PackInput, packContext } from "../../services/query/pack.ts";
import { asksOnly, questionTurnsLast } from "../../services/query/question-turns.ts";

const turn = (id: string, text: string): PackInput => ({
  kind: "turn",
  id: `c1::D1:${id}`,
  text,
  date: `2023-05-08T13:0${id}:00Z`,
  conversation: "c1",
  turnIds: [`D1:${id}`],
  speakers: ["Melanie"],
  routes: [],
  fusedScore: 0,
});

const record = (id: string, text: string): PackInput => ({ ...turn(id, text), kind: "record", id: `r${id}` });

describe("turns that only ask", () => {
  it("are the turns whose every sentence, short exclamations set aside, is a question", () => {
    assert.equal(asksOnly("Wow, Caroline! What kinda jobs are you thinkin' of? Anything that stands out?"), true);
    assert.equal(asksOnly("Cool! What type of music do you play?"), true);
    // A shared photo's caption says something: the turn does not only ask.
    assert.equal(asksOnly("Wow! Did you see that band? [shared a photo: a band on a stage. It was loud]"), false);
    // A statement beside the question: the turn says something.
    assert.equal(asksOnly("I went camping with my kids last week. Have you been?"), false);
    assert.equal(asksOnly("That's great news, Caroline! Love seeing your dedication. Any plans?"), false);
    // Exclamations alone, or a photo alone, ask nothing.
    assert.equal(asksOnly("Wow! Thanks!"), false);
    assert.equal(asksOnly("[shared a photo: a dog]"), false);
    assert.equal(asksOnly(""), false);
  });

  it("go last, each part keeping its order; records holding a question stay where they rank", () => {
    const ranked = [
      turn("1", "What type of music do you play?"),
      record("2", 'Melanie (2023-05-08), asked by Caroline "Do you paint?": Melanie paints sunsets.'),
      turn("3", "Melanie: I signed up for a pottery class yesterday."),
      turn("4", "Hey! Any fun plans for the summer?"),
      turn("5", "We went camping with the kids."),
    ];
    assert.deepEqual(
      questionTurnsLast(ranked).map((r) => r.id),
      ["r2", "c1::D1:3", "c1::D1:5", "c1::D1:1", "c1::D1:4"],
    );
    const plain = [ranked[1], ranked[2]] as PackInput[];
    assert.deepEqual(questionTurnsLast(plain), plain);
  });

  it("let a tight budget go to the turns that state something", () => {
    const ranked = [
      turn("1", "Cool! What type of music do you play? Any favourite bands you would recommend to a friend?"),
      turn("2", "I signed up for a pottery class yesterday, and we went camping with the kids."),
    ];
    const first = packContext(ranked, 50);
    assert.deepEqual(
      first.items.map((i) => i.id),
      ["c1::D1:1"],
    );
    const reordered = packContext(questionTurnsLast(ranked), 50);
    assert.deepEqual(
      reordered.items.map((i) => i.id),
      ["c1::D1:2"],
    );
  });
});
