import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { recordId } from "../../services/core/ids.ts";
import { countTokens } from "../../services/core/tokens.ts";
import {
  type DisambiguationContext,
  DisambiguationContextSchema,
  type MemoryRecord,
  MemoryRecordSchema,
  type Segment,
} from "../../services/core/types.ts";
import { encoderStateKey, encodeSegment, initialEncoderState } from "../../services/encoder/encode-segment.ts";
import { emptyContext, extractRecords } from "../../services/encoder/extractor.ts";

const DAY = "2023-01-20T16:04:00.000Z";

/** A small segment factory: [speaker, text] pairs, one turn each, ids t1, t2, ... */
const seg = (
  turns: readonly (readonly [string, string])[],
  opts: { timestamp?: string; firstTurn?: number; tenant?: string; id?: string } = {},
): Segment => {
  const ts = opts.timestamp ?? DAY;
  const first = opts.firstTurn ?? 1;
  return {
    id: opts.id ?? `seg-${first}`,
    tenant: opts.tenant ?? "acme",
    conversation: "conv-1",
    sessionId: "session-1",
    turns: turns.map(([speaker, text], i) => ({
      turnId: `t${first + i}`,
      speaker,
      role: "user" as const,
      text,
      compressed: text,
      timestamp: ts,
      sessionId: "session-1",
    })),
    start: ts,
    end: ts,
    tokens: 0,
    closedBy: "gate",
    decisions: [],
  };
};

const run = (s: Segment, ctx: DisambiguationContext = emptyContext()) => extractRecords(s, ctx);
const textOf = (records: readonly MemoryRecord[], turnId: string): string =>
  records
    .filter((r) => r.source.turnIds.includes(turnId))
    .map((r) => r.text)
    .join(" | ");

describe("encoder extractor: pronouns", () => {
  it("resolves first person to the speaker and dates to absolute ones", () => {
    const { records } = run(
      seg([
        ["Gina", "Hey Jon! Good to see you. What's up?"],
        ["Jon", "I lost my job as a banker yesterday, so I'm going to start my own business."],
      ]),
    );
    const t = textOf(records, "t2");
    assert.match(t, /^Jon \(2023-01-20\)/);
    assert.match(t, /Jon lost Jon's job as a banker on 2023-01-19/);
    assert.match(t, /Jon is going to start Jon's own business/);
    assert.doesNotMatch(t, /\b(?:I|my|I'm)\b/);
  });

  it("resolves second person to the other speaker, with verb agreement", () => {
    const { records } = run(
      seg([
        ["Jon", "I finally signed the lease for the dance studio downtown."],
        ["Gina", "Your studio will be amazing, you deserve it. You're so brave and you work so hard."],
      ]),
    );
    const t = textOf(records, "t2");
    assert.match(t, /Jon's studio will be amazing/);
    assert.match(t, /Jon is so brave/);
    assert.doesNotMatch(t, /\b(?:you|your|you're)\b/i);
  });

  it("takes she/he from the context's referents", () => {
    const ctx: DisambiguationContext = {
      ...emptyContext(),
      referents: { she: "Anna", he: "Mark" },
      speakers: ["Jon", "Gina"],
    };
    const { records } = run(seg([["Jon", "She bought a red bicycle and he helped her fix the brakes."]]), ctx);
    const t = textOf(records, "t1");
    assert.match(t, /Anna bought a red bicycle and Mark helped Anna fix the brakes/);
  });

  it("learns who she/he is from a named or kinship mention, and keeps it in the context", () => {
    const { records, context } = run(
      seg([
        ["Jon", "My sister Anna visited me last weekend. She brought her famous lemon cake."],
        ["Gina", "That sounds lovely!"],
        ["Jon", "My dad called too. He is retiring next month."],
      ]),
    );
    assert.match(textOf(records, "t1"), /Anna brought Anna's famous lemon cake/);
    assert.match(textOf(records, "t3"), /Jon's dad is retiring in February 2023/);
    assert.equal(context.referents.she, "Anna");
    assert.equal(context.referents.he, "Jon's dad");
    assert.equal(context.referents["Jon's sister"], "Anna");
  });

  it("names the group that 'they' starts a turn with, from the last turns", () => {
    const { records } = run(
      seg([
        ["Mel", "I took the kids to the museum yesterday."],
        ["Gina", "What did they enjoy at the museum?"],
        ["Mel", "They were stoked for the dinosaur exhibit! They love learning about animals."],
        ["Gina", "My friends are coming over tonight."],
        ["Mel", "Lovely! I'm lucky to have our kids; they keep me busy."],
      ]),
    );
    assert.match(textOf(records, "t2"), /asked by Gina "What did the kids enjoy at the museum\?"/);
    assert.match(textOf(records, "t3"), /The kids were stoked for the dinosaur exhibit! The kids love learning/);
    assert.match(textOf(records, "t5"), /our kids; Mel's kids keep Mel busy/);
  });

  it("leaves 'they' alone when something nearer may be meant", () => {
    const { records } = run(
      seg([
        ["Mel", "My kids painted all afternoon."],
        ["Gina", "Nice. Find a good agency or a lawyer first. They will help with the papers."],
        ["Mel", "I saw the old trees in the park; they were huge."],
        ["Gina", "I love my husband and kids; they keep me going."],
      ]),
    );
    assert.match(textOf(records, "t2"), /They will help with the papers/);
    assert.match(textOf(records, "t3"), /the old trees in the park; they were huge/);
    assert.match(textOf(records, "t4"), /Gina's husband and kids; they keep Gina going/);
  });

  it("'we' answering a question about the speaker and others is not the two speakers", () => {
    const { records } = run(
      seg([
        ["Mel", "I took the kids to a pottery workshop yesterday."],
        ["Caroline", "Fun! What else do you do with them?"],
        ["Mel", "We love painting together lately."],
        ["Caroline", "What do you do with your friends?"],
        ["Mel", "We go hiking together."],
        ["Caroline", "Cool. What do you do with your weekends?"],
        ["Mel", "We paint together after class."],
        ["Caroline", "Shall we paint together sometime?"],
        ["Mel", "Yes, we should paint together soon!"],
      ]),
    );
    // The others are the group of the last turns: one named earlier, or the question's own.
    assert.match(textOf(records, "t3"), /Mel and the kids love painting together lately/);
    assert.match(textOf(records, "t5"), /Mel and Mel's friends go hiking together/);
    // No group named in the last turns: "we" is left as it is.
    assert.match(textOf(records, "t7"), /We paint together after class/);
    assert.match(textOf(records, "t9"), /Mel and Caroline should paint together soon/);
  });

  it("leaves a pronoun alone when there is no clear candidate", () => {
    const { records } = run(seg([["Jon", "She said the concert was sold out."]]));
    assert.match(textOf(records, "t1"), /She said the concert was sold out/);
  });
});

describe("encoder extractor: phatic, questions, photos", () => {
  it("drops purely phatic sentences and turns", () => {
    const { records } = run(
      seg([
        ["Gina", "Hey Jon! How are you?"],
        ["Jon", "Wow! Haha. That's great! Thanks, Gina!"],
        ["Gina", "Awesome, so cool! I adopted a rescue greyhound named Biscuit."],
      ]),
    );
    assert.equal(textOf(records, "t1"), "");
    assert.equal(textOf(records, "t2"), "");
    const t = textOf(records, "t3");
    assert.match(t, /Gina adopted a rescue greyhound named Biscuit/);
    assert.doesNotMatch(t, /Awesome|cool/);
  });

  it("folds a question into the answer of the other speaker", () => {
    const { records } = run(
      seg([
        ["Gina", "I lost my job too. What business are you thinking of?"],
        ["Jon", "I'm opening a dance studio."],
      ]),
    );
    const answer = records.find((r) => r.source.turnIds.includes("t2"));
    assert.ok(answer);
    assert.equal(
      answer.text,
      'Jon (2023-01-20), asked by Gina "What business is Jon thinking of?": Jon is opening a dance studio.',
    );
    assert.deepEqual(answer.source.turnIds, ["t1", "t2"]);
    assert.deepEqual(answer.source.speakers, ["Gina", "Jon"]);
    // The question does not also appear in Gina's own record.
    const own = records.find((r) => r.source.turnIds.length === 1 && r.source.turnIds[0] === "t1");
    assert.ok(own);
    assert.doesNotMatch(own.text, /\?/);
  });

  it("keeps a yes/no answer with the question that carries the content", () => {
    const { records } = run(
      seg([
        ["Gina", "Did you go to the jazz festival last Saturday?"],
        ["Jon", "Yes!"],
      ]),
    );
    assert.equal(records.length, 1);
    assert.equal(
      records[0]!.text,
      'Jon (2023-01-20), asked by Gina "Did Jon go to the jazz festival on 2023-01-14?": Yes!',
    );
    assert.deepEqual(records[0]!.time, { at: "2023-01-14T00:00:00.000Z" });
  });

  it("treats a shared photo as content", () => {
    const { records } = run(seg([["Jon", "Look at this! [shared a photo: a photo of a dog running on a beach]"]]));
    assert.equal(records.length, 1);
    assert.equal(records[0]!.text, "Jon (2023-01-20): Jon shared a photo of a dog running on a beach.");
    assert.equal(records[0]!.type, "other");
  });
});

describe("encoder extractor: sources, ids, determinism", () => {
  const conversation = seg(
    [
      ["Gina", "Hi Jon! I lost my job at Door Dash this month."],
      ["Jon", "Sorry to hear that! I'm starting a dance studio because I'm passionate about dancing."],
      ["Gina", "I love contemporary dance. It helps me with stress."],
      ["Jon", "Next Friday I will show you my new routine at the studio."],
    ],
    { firstTurn: 11, id: "segment-xyz" },
  );

  it("every record cites turns inside the segment, its speakers and the turn time", () => {
    const { records } = run(conversation);
    assert.ok(records.length >= 4);
    const byId = new Map(conversation.turns.map((t) => [t.turnId, t]));
    for (const r of records) {
      MemoryRecordSchema.parse(r);
      assert.equal(r.source.segmentId, "segment-xyz");
      assert.equal(r.source.tenant, "acme");
      assert.equal(r.source.conversation, "conv-1");
      assert.equal(r.source.sessionId, "session-1");
      assert.ok(r.source.turnIds.length >= 1);
      for (const id of r.source.turnIds) assert.ok(byId.has(id), `turn ${id} not in segment`);
      const last = byId.get(r.source.turnIds[r.source.turnIds.length - 1]!)!;
      assert.equal(r.source.saidAt, last.timestamp);
      assert.deepEqual(
        [...r.source.speakers].sort(),
        [...new Set(r.source.turnIds.map((id) => byId.get(id)!.speaker))].sort(),
      );
      assert.deepEqual(r.valid, { from: r.source.saidAt });
      assert.equal(r.id, recordId("acme", r.text));
    }
  });

  it("same input twice gives the same output, ids included", () => {
    const a = run(conversation);
    const b = run(conversation);
    assert.deepEqual(a, b);
    const c = encodeSegment(conversation, undefined);
    assert.deepEqual(
      c.records.map((r) => r.id),
      a.records.map((r) => r.id),
    );
  });

  it("ids depend on the tenant", () => {
    const other = run({ ...conversation, tenant: "globex" });
    const mine = run(conversation);
    assert.notEqual(other.records[0]!.id, mine.records[0]!.id);
  });
});

describe("encoder extractor: entities, topics, types", () => {
  it("finds speakers, names, places and organisations, with aliases", () => {
    const { records, context } = run(
      seg([
        ["Melanie", "I work at Acme Corp and I moved to Portland last year."],
        ["Caroline", "That's a big change, Mel! I visited Portland in 2019 with my friend Sarah."],
      ]),
    );
    const r1 = records.find((r) => r.source.turnIds.includes("t1"))!;
    const kinds = new Map(r1.entities.map((e) => [e.name, e.kind]));
    assert.equal(kinds.get("Melanie"), "person");
    assert.equal(kinds.get("Acme Corp"), "organisation");
    assert.equal(kinds.get("Portland"), "place");
    const r2 = records.find((r) => r.source.turnIds.includes("t2"))!;
    const names2 = new Map(r2.entities.map((e) => [e.name, e]));
    assert.equal(names2.get("Sarah")?.kind, "person");
    assert.equal(names2.get("Portland")?.kind, "place");
    assert.equal(context.aliases.Mel, "Melanie");
    const mel = records.flatMap((r) => r.entities).find((e) => e.name === "Melanie");
    assert.deepEqual(mel?.aliases, ["Mel"]);
  });

  it("gives 1-3 lower-case topics from content words, not names", () => {
    const { records } = run(seg([["Jon", "I bought a vintage guitar and a small amplifier for my garage band."]]));
    const topics = records[0]!.topics;
    assert.ok(topics.length >= 1 && topics.length <= 3, JSON.stringify(topics));
    for (const t of topics) {
      assert.equal(t, t.toLowerCase());
      assert.notEqual(t, "jon");
    }
    assert.ok(
      topics.some((t) => ["guitar", "amplifier", "garage", "band", "vintage"].includes(t)),
      JSON.stringify(topics),
    );
  });

  it("types records", () => {
    const typeOf = (text: string): string => run(seg([["Jon", text]])).records[0]!.type;
    assert.equal(typeOf("I love hiking in the mountains."), "preference");
    assert.equal(typeOf("I'm going to open a bakery next month."), "plan");
    assert.equal(typeOf("I adopted a puppy from the shelter last week."), "event");
    assert.equal(typeOf("My brother and his wife have two kids."), "relation");
    assert.equal(typeOf("The bakery sells sourdough bread."), "fact");
  });
});

describe("encoder extractor: context", () => {
  it("carries referents and speakers to the next segment of the conversation", () => {
    const first = encodeSegment(
      seg([
        ["Jon", "My mom Linda is visiting from Ohio."],
        ["Gina", "That's nice!"],
      ]),
      initialEncoderState(),
    );
    assert.equal(first.state.referents.she, "Linda");
    assert.deepEqual(first.state.speakers, ["Jon", "Gina"]);
    assert.equal(first.event.tenant, "acme");
    assert.equal(encoderStateKey(first.event.segment), "acme/conv-1");
    const second = encodeSegment(
      seg([["Jon", "She cooked dinner for us yesterday."]], { firstTurn: 3, id: "seg-3" }),
      first.state,
    );
    assert.match(second.records[0]!.text, /Linda cooked dinner/);
    assert.match(second.records[0]!.text, /on 2023-01-19/);
  });

  it("one-speaker segment: 'you' is the other speaker from the context", () => {
    const ctx: DisambiguationContext = { ...emptyContext(), speakers: ["Gina", "Jon"] };
    const { records } = run(seg([["Jon", "I made you a playlist of your favorite songs."]]), ctx);
    assert.match(records[0]!.text, /Jon made Gina a playlist of Gina's favorite songs/);
  });

  it("keeps the last N records and stays under the token cap in a long conversation", () => {
    let ctx = emptyContext();
    const people = ["Anna", "Bella", "Clara", "Diego", "Ethan", "Farah", "Gustav", "Hiroshi", "Ingrid", "Jamal"];
    for (let i = 0; i < 40; i++) {
      const friend = people[i % people.length]!;
      const s = seg(
        [
          [
            "Jon",
            `My friend ${friend} Lindqvist-${i} told me about a long hiking trip through the Dolomites in Italy last week.`,
          ],
          ["Gina", `Jon, I heard ${friend} also climbed Mount Kilimanjaro with the Explorers Club ${i} in 2019.`],
          ["Jon", `I plan to join ${friend} on a kayaking tour around Lake Tahoe next month with my cousins.`],
        ],
        { firstTurn: i * 3 + 1, id: `seg-${i}` },
      );
      const r = extractRecords(s, ctx);
      ctx = r.context;
      DisambiguationContextSchema.parse(ctx);
      assert.ok(countTokens(JSON.stringify(ctx)) <= 300, `segment ${i}: ${countTokens(JSON.stringify(ctx))} tokens`);
      assert.ok(ctx.recentRecords.length <= 5);
      assert.ok(ctx.speakers.length <= 2);
    }
    // A tighter cap still holds.
    const tight = extractRecords(seg([["Jon", "I bought a new camera for my trip to Iceland next month."]]), ctx, {
      contextTokenCap: 60,
      recentRecords: 2,
    });
    assert.ok(countTokens(JSON.stringify(tight.context)) <= 60);
    assert.ok(tight.context.recentRecords.length <= 2);
  });

  it("recentRecords holds the texts of the latest records", () => {
    const { records, context } = extractRecords(
      seg([
        ["Jon", "I bought a red kayak."],
        ["Gina", "I planted tomatoes in the garden."],
        ["Jon", "I repaired the old fence behind the barn."],
      ]),
      emptyContext(),
      { recentRecords: 2 },
    );
    assert.deepEqual(
      context.recentRecords,
      records.slice(-2).map((r) => r.text),
    );
  });
});
