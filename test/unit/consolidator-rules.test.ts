import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { partitionCandidates } from "../../services/consolidator/consolidator.ts";
import { buildHistory } from "../../services/consolidator/history.ts";
import { decidePair, orderPair, RuleDecider, timesCompatible } from "../../services/consolidator/rules.ts";
import { trigramDice } from "../../services/consolidator/similarity.ts";
import { recordId } from "../../services/core/ids.ts";
import type { RecordRelation } from "../../services/core/ports.ts";
import { stem } from "../../services/core/text/normalise.ts";
import { statementText } from "../../services/core/text/record-text.ts";
import { analyse } from "../../services/core/text/statement.ts";
import type { Entity, MemoryRecord, RecordType, TimeRange, UpdateCandidate } from "../../services/core/types.ts";
import { selectCandidates } from "../../services/indexer/candidates.ts";

const PLACES = new Set(["Boston", "Denver", "Tokyo", "Kyoto", "Paris", "Lisbon"]);
const ORGS = new Set(["Google", "Microsoft", "Acme", "Initech"]);

/** A record as the extractor writes it: "<Speaker> (<day>): <statement>", entities by capitalised names. */
const rec = (
  statement: string,
  day: string,
  opts: { type?: RecordType; speaker?: string; time?: TimeRange; tenant?: string; conversation?: string } = {},
): MemoryRecord => {
  const speaker = opts.speaker ?? "Ana";
  const tenant = opts.tenant ?? "t1";
  const text = `${speaker} (${day}): ${statement}`;
  const names = new Set([speaker, ...(statement.match(/\b[A-Z][a-z]+\b/g) ?? [])]);
  const entities: Entity[] = [...names]
    .filter((n) => n === speaker || PLACES.has(n) || ORGS.has(n) || /^(Ben|Cleo|Luna|Max|Coldplay)$/.test(n))
    .map((name) => ({
      name,
      kind: PLACES.has(name) ? "place" : ORGS.has(name) ? "organisation" : name === speaker ? "person" : "other",
      aliases: [],
    }));
  return {
    id: recordId(tenant, text),
    type: opts.type ?? "fact",
    text,
    entities,
    topics: [],
    time: opts.time ?? {},
    source: {
      tenant,
      conversation: opts.conversation ?? "c1",
      segmentId: `seg-${day}`,
      turnIds: [`turn-${day}`],
      speakers: [speaker],
      sessionId: "s1",
      saidAt: `${day}T10:00:00.000Z`,
    },
    valid: { from: `${day}T10:00:00.000Z` },
  };
};

const decide = (older: MemoryRecord, newer: MemoryRecord, similarity = 0.5) => decidePair(newer, older, similarity);

describe("consolidation rules: statements", () => {
  it("strips the speaker/date prefix, including a folded question", () => {
    assert.equal(statementText("Ana (2024-01-02): Ana lives in Boston."), "Ana lives in Boston.");
    assert.equal(
      statementText('Jon (2023-01-20), asked by Gina "What business is Jon thinking of?": Jon is opening a studio.'),
      "Jon is opening a studio.",
    );
  });

  it("stems inflections together and measures text similarity", () => {
    assert.equal(stem("lives"), stem("living"));
    assert.equal(stem("planning"), stem("plans"));
    assert.equal(trigramDice("abc", "abc"), 1);
    assert.ok(trigramDice("favorite band coldplay", "favorite band is coldplay") > 0.8);
  });

  it("finds subject, negation and attribute slots with general lexicons", () => {
    const a = analyse(rec("Ana moved to Denver in December 2023.", "2024-01-20", { type: "event" }));
    assert.equal(a.subject, "ana");
    assert.deepEqual(
      a.slots.map((s) => [s.kind, s.value.join(" "), s.polarity, s.current]),
      [["location", "denver", 1, true]],
    );
    const b = analyse(rec("Ana doesn't like sushi anymore.", "2024-01-20", { type: "preference" }));
    assert.equal(b.negated, true);
    assert.deepEqual(
      b.slots.map((s) => [s.kind, s.value.join(" "), s.polarity]),
      [["preference", "sushi", -1]],
    );
    const c = analyse(rec("Ana lived in Paris as a student.", "2024-01-20"));
    assert.equal(c.slots[0]?.current, false, "a past residence is history, not a current claim");
    const d = analyse(rec("Lately, Ana has been into pottery.", "2024-01-20"));
    assert.equal(d.subject, "ana", "the person named first when the statement does not start with a name");
    const e = analyse(rec("Ana would like to visit Lisbon.", "2024-01-20"));
    assert.equal(
      e.slots.some((s) => s.kind === "preference"),
      false,
      '"would like to" is a wish, not a preference',
    );
  });
});

describe("consolidation rules: decisions", () => {
  it("contradiction: a move to another city supersedes where someone lived", () => {
    const d = decide(
      rec("Ana lives in Boston with two cats.", "2024-01-01"),
      rec("Ana moved to Denver last month.", "2024-03-01", { type: "event" }),
    );
    assert.equal(d.kind, "contradiction");
    assert.match(d.reason, /location/);
  });

  it("contradiction: a new employer, or a job that ended", () => {
    assert.equal(
      decide(rec("Ana works at Google as a designer.", "2024-01-01"), rec("Ana now works at Microsoft.", "2024-05-01"))
        .kind,
      "contradiction",
    );
    assert.equal(
      decide(
        rec("Ana works at Acme.", "2024-01-01"),
        rec("Ana lost her job last week.", "2024-05-01", { type: "event" }),
      ).kind,
      "contradiction",
    );
    assert.equal(
      decide(rec("Ana works at Acme.", "2024-01-01"), rec("Ana left Initech in May.", "2024-05-01", { type: "event" }))
        .kind,
      "unrelated",
      "leaving another employer says nothing about this one",
    );
  });

  it("contradiction: a reversed preference, either way", () => {
    const loves = rec("Ana loves sushi.", "2024-01-01", { type: "preference" });
    const over = rec("Ana doesn't like sushi anymore.", "2024-06-01", { type: "preference" });
    assert.equal(decide(loves, over).kind, "contradiction");
    assert.equal(
      decide(over, rec("Ana loves sushi again.", "2024-09-01", { type: "preference" })).kind,
      "contradiction",
    );
    assert.equal(
      decide(loves, rec("Ana doesn't like horror movies.", "2024-06-01", { type: "preference" })).kind,
      "unrelated",
      "a dislike of something else is no contradiction",
    );
  });

  it("contradiction: a changed favourite", () => {
    assert.equal(
      decide(
        rec("Ana's favourite band is Coldplay.", "2024-01-01", { type: "preference" }),
        rec("Ana's favorite band is Muse now.", "2024-04-01", { type: "preference" }),
      ).kind,
      "contradiction",
    );
  });

  it("the newer statement wins, whichever side of the pair it is on", () => {
    const older = rec("Ana lives in Boston.", "2024-01-01");
    const newer = rec("Ana moved to Denver.", "2024-02-01", { type: "event" });
    const a = decidePair(newer, older, 0.5);
    const b = decidePair(older, newer, 0.5);
    assert.equal(a.newer, newer.id);
    assert.equal(b.newer, newer.id);
    assert.equal(a.kind, b.kind);
    assert.equal(orderPair(older, newer).newer.id, newer.id);
  });

  it("a claim belongs to whoever it is said of", () => {
    const both = rec("Ana lives in Boston and Ben lives in Denver.", "2024-01-01");
    assert.deepEqual(
      analyse(both).slots.map((x) => x.value.join(" ")),
      ["boston"],
      "Ben's home is not Ana's",
    );
    assert.equal(decide(both, rec("Ana moved to Denver.", "2024-02-01", { type: "event" })).kind, "contradiction");
    const sister = rec("Ana's sister Cleo works at Acme.", "2024-02-01");
    assert.equal(analyse(sister).subject, "ana's sister cleo");
    assert.equal(decide(rec("Ana works at Google.", "2024-01-01"), sister).kind, "unrelated");
    assert.equal(
      decide(sister, rec("Ana's sister Cleo now works at Initech.", "2024-05-01")).kind,
      "contradiction",
      "the sister's job changed",
    );
  });

  it("different subjects never interact", () => {
    assert.equal(
      decide(rec("Ana lives in Boston.", "2024-01-01"), rec("Ben lives in Denver.", "2024-02-01", { speaker: "Ben" }))
        .kind,
      "unrelated",
    );
  });

  it("duplicate: an exact restatement and a near-identical one", () => {
    const first = rec("Ana's favourite band is Coldplay.", "2024-01-01", { type: "preference" });
    assert.equal(
      decide(first, rec("Ana's favorite band is Coldplay!", "2024-03-01", { type: "preference" })).kind,
      "duplicate",
    );
    const cats = rec("Ana has two cats named Luna and Max.", "2024-01-01");
    assert.equal(decide(cats, rec("Ana has two cats named Luna and Max.", "2024-04-01")).kind, "duplicate");
    assert.equal(decide(cats, rec("Ana has two cats, named Luna and Max.", "2024-04-01")).kind, "duplicate");
  });

  it("not a duplicate: other numbers, other names, a negation, another occurrence", () => {
    const cats = rec("Ana has two cats named Luna and Max.", "2024-01-01");
    assert.notEqual(decide(cats, rec("Ana has three cats named Luna and Max.", "2024-04-01")).kind, "duplicate");
    assert.notEqual(decide(cats, rec("Ana has two cats named Luna and Cleo.", "2024-04-01")).kind, "duplicate");
    assert.notEqual(
      decide(rec("Ana likes jazz.", "2024-01-01"), rec("Ana does not like jazz.", "2024-04-01")).kind,
      "duplicate",
    );
    const hike = (day: string, end = ".") => rec(`Ana went hiking with Ben${end}`, day, { type: "event" });
    assert.equal(
      decide(hike("2024-01-01"), hike("2024-01-01", " today.")).kind,
      "duplicate",
      "the same event, told twice a day",
    );
    assert.equal(decide(hike("2024-01-01"), hike("2024-03-01")).kind, "unrelated", "two hikes, told on two days");
  });

  it("two different trips are never merged: both stay current", () => {
    const tokyo = rec("Ana is planning a trip to Tokyo in April 2024.", "2024-03-01", {
      type: "plan",
      time: { from: "2024-04-01", to: "2024-04-30" },
    });
    const kyoto = rec("Ana wants to take the bullet train to Kyoto during Ana's trip.", "2024-03-20", { type: "plan" });
    const d = decide(tokyo, kyoto, 0.7);
    assert.ok(d.kind === "unrelated" || d.kind === "refinement", d.kind);
    const paris = rec("Ana is planning a trip to Paris in May 2024.", "2024-03-25", {
      type: "plan",
      time: { from: "2024-05-01", to: "2024-05-31" },
    });
    assert.equal(decide(tokyo, paris, 0.9).kind, "unrelated", "another destination at another time");
  });

  it("refinement: the newer adds detail to the same thing", () => {
    const d = decide(
      rec("Ana works at Google as a designer.", "2024-01-01"),
      rec("Ana works at Google as a senior designer on the Maps team.", "2024-02-01"),
    );
    assert.equal(d.kind, "refinement");
  });

  it("times: events of different days are apart, plans without a date are not", () => {
    const e1 = rec("Ana ran a race.", "2024-01-01", { type: "event" });
    const e2 = rec("Ana ran a race.", "2024-02-01", { type: "event" });
    assert.equal(timesCompatible(e1, e2), false);
    const p1 = rec("Ana will run a race.", "2024-01-01", { type: "plan" });
    assert.equal(timesCompatible(p1, rec("Ana will run a race.", "2024-02-01", { type: "plan" })), true);
  });

  it("the rule decider answers every candidate, at no LLM cost", async () => {
    const r = rec("Ana moved to Denver.", "2024-03-01", { type: "event" });
    const c1 = rec("Ana lives in Boston.", "2024-01-01");
    const c2 = rec("Ana likes tea.", "2024-01-02", { type: "preference" });
    const cand = (c: MemoryRecord): UpdateCandidate => ({
      recordId: r.id,
      candidateId: c.id,
      tenant: "t1",
      similarity: 0.5,
      sharedEntities: ["ana"],
      sharedTopics: [],
      reason: "entity-attribute",
    });
    const out = await new RuleDecider().decide(r, [
      { record: c1, candidate: cand(c1) },
      { record: c2, candidate: cand(c2) },
    ]);
    assert.deepEqual(
      out.decisions.map((d) => d.kind),
      ["contradiction", "unrelated"],
    );
    assert.deepEqual(out.cost, { llmCalls: 0, inputTokens: 0, outputTokens: 0 });
  });
});

describe("update candidates (pure selection)", () => {
  it("by similarity, by shared entity + topic, by same subject and attribute; never itself or another tenant", () => {
    const r = { ...rec("Ana moved to Denver.", "2024-03-01", { type: "event" }), topics: ["move"] };
    const sim = rec("Ana relocated to Denver recently.", "2024-02-01");
    const topical = { ...rec("Ana packed boxes for the move.", "2024-02-02"), topics: ["move", "box"] };
    const attribute = rec("Ana lives in Boston.", "2024-01-01");
    const unrelated = rec("Ana likes tea.", "2024-01-03");
    const other = rec("Ana moved to Denver.", "2024-03-01", { tenant: "t2" });
    const out = selectCandidates(r, [
      { record: r, similarity: 1 },
      { record: sim, similarity: 0.9 },
      { record: topical, similarity: 0.4 },
      { record: attribute, similarity: 0.3 },
      { record: unrelated, similarity: 0.2 },
      { record: other, similarity: 1 },
    ]);
    assert.deepEqual(
      out.map((c) => [c.candidateId, c.reason]),
      [
        [sim.id, "similarity"],
        [attribute.id, "entity-attribute"],
        [topical.id, "entity-topic"],
      ],
    );
    assert.deepEqual(out[2]?.sharedTopics, ["move"]);
    assert.ok(out.every((c) => c.recordId === r.id && c.tenant === "t1"));
  });
});

describe("partitioning and history (pure)", () => {
  const cand = (recordId: string, candidateId: string): UpdateCandidate => ({
    recordId,
    candidateId,
    tenant: "t",
    similarity: 0.9,
    sharedEntities: [],
    sharedTopics: [],
    reason: "similarity",
  });

  it("groups connected records; existing chain edges join groups", () => {
    const rows = [cand("a", "b"), cand("c", "d"), cand("e", "b"), cand("f", "g")];
    assert.deepEqual(
      partitionCandidates(rows).map((g) => g.map((r) => `${r.recordId}${r.candidateId}`)),
      [["ab", "eb"], ["cd"], ["fg"]],
    );
    const edge: RecordRelation = { from: "d", to: "g", relation: "SUPERSEDES", at: "2024-01-01T00:00:00.000Z" };
    assert.equal(partitionCandidates(rows, [edge]).length, 2);
    const refines: RecordRelation = { ...edge, relation: "REFINES" };
    assert.equal(partitionCandidates(rows, [refines]).length, 3, "a refinement link does not chain versions");
  });

  it("builds the version chain with valid ranges and relations", () => {
    const boston = rec("Ana lives in Boston.", "2024-01-01");
    const denver = rec("Ana moved to Denver.", "2024-03-01", { type: "event" });
    const again = rec("Ana moved to Denver!", "2024-03-05", { type: "event" });
    const detail = rec("Ana moved to Denver with Ben.", "2024-03-09", { type: "event" });
    boston.valid = { ...boston.valid, to: denver.valid.from, supersededBy: denver.id };
    again.valid = { ...again.valid, to: again.valid.from, supersededBy: denver.id };
    const relations: RecordRelation[] = [
      { from: denver.id, to: boston.id, relation: "SUPERSEDES", at: denver.valid.from },
      { from: again.id, to: denver.id, relation: "DUPLICATE_OF", at: again.valid.from },
      { from: detail.id, to: denver.id, relation: "REFINES", at: detail.valid.from },
    ];
    const h = buildHistory(boston.id, { records: [detail, again, denver, boston], relations });
    assert.ok(h);
    assert.equal(h.current, denver.id);
    assert.deepEqual(
      h.versions.map((v) => [v.id, v.relation, v.current]),
      [
        [boston.id, "self", false],
        [denver.id, "later", true],
        [again.id, "later", false],
        [detail.id, "refines", true],
      ],
    );
    assert.equal(h.versions[0]?.validTo, denver.valid.from);
    const fromDenver = buildHistory(denver.id, { records: [detail, again, denver, boston], relations });
    assert.deepEqual(
      fromDenver?.versions.map((v) => v.relation),
      ["earlier", "self", "duplicate", "refines"],
    );
    assert.equal(buildHistory("nope", { records: [], relations: [] }), undefined);
  });
});
