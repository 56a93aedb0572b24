// Misspelling tolerance and place containment (issue 15): the pure parts (edit budget, candidate
// choice, region names, containment, the weighted merge); the stores' reads: test/contract/lexical-vocabulary.test.ts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { lexicalTerms } from "../../services/core/lexical.ts";
import type { ScoredId } from "../../services/core/ports.ts";
import type { QueryPlan } from "../../services/core/query-types.ts";
import {
  candidatePrefixes,
  correctionWeight,
  editBudget,
  editDistance,
  FUZZY_MAX_LENGTH,
  isFamiliarWord,
  isFuzzable,
  MAX_CHECKED_TERMS,
  MAX_FUZZED_TERMS,
  misspellingCandidates,
  nearestPresent,
  neighboursWithin,
  prefixEnd,
} from "../../services/core/text/fuzzy-terms.ts";
import { cityIndex, placesWithin, regionsNamed } from "../../services/core/text/places.ts";
import type { MemoryRecord } from "../../services/core/types.ts";
import {
  closestName,
  correctedQuestion,
  findNearMatches,
  mergeWeighted,
  type NearMatchStore,
  NO_NEAR_MATCHES,
  searchWithNearMatches,
  withNearMatches,
} from "../../services/query/near-matches.ts";

describe("fuzzy terms: which terms, how far, which candidates", () => {
  it("fuzzes Latin words of 5 to 24 letters: 1 edit up to 7 letters, 2 from 8", () => {
    assert.equal(editBudget("seat"), 0);
    assert.equal(editBudget("carol"), 1);
    assert.equal(editBudget("carolyn"), 1);
    assert.equal(editBudget("washington"), 2);
    assert.equal(editBudget("a".repeat(FUZZY_MAX_LENGTH)), 2);
    assert.equal(editBudget("a".repeat(FUZZY_MAX_LENGTH + 1)), 0, "very long words are not fuzzed");
    assert.ok(isFuzzable("carolyn"));
    assert.ok(!isFuzzable("20230"), "digits are never corrected (dates, numbers)");
    assert.ok(!isFuzzable("東京都庁舎前"), "CJK is never corrected");
    assert.ok(!isFuzzable("abc12x"));
    assert.ok(!isFuzzable("about"), "stop words are not");
  });

  it("takes real words the scope does not use for real words, not for misspellings", () => {
    for (const word of ["considered", "political", "regarding", "whose", "common", "writing"])
      assert.ok(isFamiliarWord(word), word);
    for (const word of ["Carolyn", "seatle", "volunterring", "neckalce", "comunity"])
      assert.ok(!isFamiliarWord(word), word);
    assert.deepEqual(misspellingCandidates("Would Carolyn consider the comunity of Seatle? 2023 東京都庁舎前 🎉"), [
      "carolyn",
      "comun",
      "seatl",
    ]);
    assert.deepEqual(
      misspellingCandidates(`${"q".repeat(100_000)} grandmothr`),
      ["grandmothr"],
      "giant words are skipped",
    );
  });

  it("counts a swap of two adjacent letters as one edit", () => {
    assert.equal(editDistance("caorlin", "carolin"), 1);
    assert.equal(editDistance("carolin", "carolin"), 0);
    assert.equal(editDistance("carolni", "carolin"), 1);
    assert.equal(editDistance("craloin", "carolin"), 3, "not a single swap: Levenshtein");
    assert.deepEqual(neighboursWithin("caorlin", ["carolin"], 1), [{ term: "carolin", distance: 1 }]);
  });

  it("reads the buckets of the first and the second letter", () => {
    assert.deepEqual(candidatePrefixes("carolyn"), ["c", "a"]);
    assert.deepEqual(candidatePrefixes("aaron"), ["a"]);
    assert.equal(prefixEnd("c"), "d");
    assert.equal(prefixEnd("é"), "ê");
  });

  it("keeps candidates within the budget, closest first, and only stems that stem to themselves", () => {
    const stem = lexicalTerms("Caroline")[0] as string;
    assert.equal(stem, "carolin");
    const found = neighboursWithin("carolyn", ["carolin", "carol", "caroling", "karolyn", "carolyn", "zzzzzzz"], 1);
    assert.deepEqual(found, [
      { term: "carolin", distance: 1 },
      { term: "karolyn", distance: 1 },
      { term: "carol", distance: 1, ending: true },
    ]);
    assert.deepEqual(neighboursWithin("carolyn", ["carolin"], 0), [], "no budget, no candidates");
    // "caring" stems to "care": it could not stand in a query text as itself.
    assert.deepEqual(neighboursWithin("carinh", ["caring"], 1), []);
  });

  it("matches a stem to the start of a misspelt word whose ending the stemmer could not strip", () => {
    assert.deepEqual(lexicalTerms("paintng"), ["paintng"], "a misspelt word keeps its ending");
    assert.deepEqual(neighboursWithin("paintng", ["paint", "pain", "print"], 1), [
      { term: "paint", distance: 1, ending: true },
    ]);
    assert.deepEqual(neighboursWithin("accdient", ["accid"], 2), [{ term: "accid", distance: 2, ending: true }]);
    assert.deepEqual(neighboursWithin("paintingsxyzw", ["paint"], 2), [], "at most 4 letters of ending");
  });

  it("corrects to the closest candidates the scope holds, at the smallest distance present", async () => {
    const neighbours = [
      { term: "alpha", distance: 1 },
      { term: "alpho", distance: 1 },
      { term: "alphas", distance: 2 },
      { term: "alphax", distance: 2 },
    ];
    assert.deepEqual(await nearestPresent(neighbours, async () => ["alphas", "alphax"]), neighbours.slice(2));
    assert.deepEqual(await nearestPresent(neighbours, async () => ["alphax", "alpho"]), [neighbours[1]]);
    assert.deepEqual(await nearestPresent(neighbours, async () => []), []);
    const endings = [
      { term: "carolin", distance: 1 },
      { term: "carol", distance: 1, ending: true as const },
    ];
    assert.deepEqual(await nearestPresent(endings, async (t) => t), [endings[0]], "a whole match first");
    assert.deepEqual(await nearestPresent(endings, async () => ["carol"]), [endings[1]]);
    assert.ok(correctionWeight(1) > correctionWeight(2) && correctionWeight(2) > 0);
  });
});

describe("places: regions named and places inside them", () => {
  it("finds countries, states and common aliases written as proper nouns", () => {
    const names = (q: string) => regionsNamed(q).map((r) => `${r.kind}:${r.countryCode}:${r.stateCode ?? ""}`);
    assert.deepEqual(names("What did Carolyn do in Washington?"), ["state:US:WA"]);
    assert.deepEqual(names("Did Jon travel to New South Wales?"), ["state:AU:NSW"], "the longest name, not Wales too");
    assert.deepEqual(names("Is she from the USA?"), ["country:US:"]);
    assert.deepEqual(names("what did they do in washington"), [], "lower-case words are not proper nouns");
    assert.deepEqual(names("What did Us do in the North?"), [], "no pronoun alias, no compass-word region");
  });

  it("keeps only the given names that lie inside a named region", () => {
    const washington = regionsNamed("in Washington");
    assert.deepEqual(placesWithin(washington, ["Seattle", "Caroline", "Portland", "Spokane", "Washington"]), [
      "Seattle",
      "Spokane",
    ]);
    assert.deepEqual(placesWithin(regionsNamed("in the United States"), ["Texas", "Seattle", "Sweden"]), [
      "Texas",
      "Seattle",
    ]);
    assert.deepEqual(placesWithin([], ["Seattle"]), []);
  });

  it("contains cities in states only where GeoNames' admin1 codes are the region codes", () => {
    const { statesComparable } = cityIndex();
    assert.ok(statesComparable.has("US") && statesComparable.has("CH"), "letter codes that agree (WA, ZH)");
    assert.ok(!statesComparable.has("CA"), "Canada: GeoNames 01, region code AB");
    assert.ok(!statesComparable.has("JP"), "Japan: numbered in another order (Akita is 05 in ISO, 02 in GeoNames)");
    assert.deepEqual(placesWithin(regionsNamed("in Zurich"), ["Winterthur", "Geneva"]), ["Winterthur"]);
    assert.deepEqual(placesWithin(regionsNamed("in Alberta"), ["Calgary"]), [], "a state of Canada expands to nothing");
    assert.deepEqual(placesWithin(regionsNamed("in Canada"), ["Calgary", "Alberta", "Seattle"]), [
      "Calgary",
      "Alberta",
    ]);
    assert.deepEqual(
      regionsNamed("from South Korea or Russia")
        .map((r) => r.countryCode)
        .sort(),
      ["KR", "RU"],
      "common names of countries the gazetteer spells otherwise",
    );
  });
});

describe("near matches: merge and guards", () => {
  const plan: QueryPlan = {
    questionType: "single-hop",
    entities: ["Melanie"],
    topics: [],
    routes: ["dense", "lexical"],
    rewrites: [],
  };

  it("with no near matches the plan is the same object and the search is the exact one, run once", async () => {
    assert.equal(withNearMatches(plan, NO_NEAR_MATCHES), plan);
    const texts: string[] = [];
    const exact: ScoredId[] = [{ id: "a", score: 2 }];
    const out = await searchWithNearMatches(
      async (text) => {
        texts.push(text);
        return exact;
      },
      "painting",
      [],
      10,
    );
    assert.equal(out, exact);
    assert.deepEqual(texts, ["painting"]);
  });

  it("adds the weighted BM25 of the corrections to the exact scores", () => {
    const merged = mergeWeighted(
      [
        { id: "a", score: 3 },
        { id: "b", score: 1 },
      ],
      [
        {
          hits: [
            { id: "b", score: 6 },
            { id: "c", score: 2 },
          ],
          weight: 0.5,
        },
      ],
      3,
    );
    assert.deepEqual(merged, [
      { id: "b", score: 4 },
      { id: "a", score: 3 },
      { id: "c", score: 1 },
    ]);
    assert.equal(mergeWeighted([{ id: "a", score: 1 }], [{ hits: [{ id: "c", score: 9 }], weight: 1 }], 1)[0]?.id, "c");
  });

  it("embeds a question with a corrected name as the key spells it, and no other question differently", () => {
    const near = { names: [{ asked: "Carolyn", known: "Caroline" }], places: [], lexical: [] };
    assert.equal(correctedQuestion("What did Carolyn's friend say?", near), "What did Caroline's friend say?");
    assert.equal(correctedQuestion("Who is Carolynne?", near), "Who is Carolynne?", "whole words only");
    assert.equal(correctedQuestion("Who is Carolyn?", NO_NEAR_MATCHES), "Who is Carolyn?");
  });

  it("corrects a name only to a single closest single-word key", () => {
    assert.equal(closestName("Carolyn", ["Caroline", "Melanie", "Seattle"]), "Caroline");
    assert.equal(closestName("Melanie", ["Caroline"]), undefined);
    assert.equal(closestName("Jonn", ["Jon"]), undefined, "too short to correct");
    assert.equal(closestName("Marla", ["Carla", "Maria"]), undefined, "a tie is no evidence");
  });

  /**
   * A store with a fixed term list that counts its vocabulary reads, and one record per entity
   * typed as `kinds` says (a place by default).
   */
  const fakeVocabulary = (terms: readonly string[], kinds: Record<string, "person" | "place"> = {}) => {
    const reads = { present: 0, neighbours: [] as string[] };
    const vocabulary: NearMatchStore = {
      async lexicalTermsPresent(_tenant, asked) {
        reads.present++;
        return asked.filter((t) => terms.includes(t));
      },
      async lexicalNeighbours(_tenant, term, maxDistance) {
        reads.neighbours.push(term);
        return nearestPresent(neighboursWithin(term, terms, maxDistance), async (ts) =>
          ts.filter((t) => terms.includes(t)),
        );
      },
      async recordsByEntities(_tenant, entities) {
        return entities.map((e) => ({ id: e, score: 1 }));
      },
      async getRecords(_tenant, ids) {
        return ids.map(
          (id) =>
            ({ id, entities: [{ name: id, kind: kinds[id] ?? "place", aliases: [] }] }) as unknown as MemoryRecord,
        );
      },
    };
    return { vocabulary, reads };
  };

  it("does nothing for a question whose terms and names are all known", async () => {
    const { vocabulary, reads } = fakeVocabulary(["melani", "paint", "sunris"]);
    const near = await findNearMatches(vocabulary, {
      tenant: "t",
      question: "When did Melanie paint a sunrise?",
      lexicalText: "When did Melanie paint a sunrise?",
      planned: ["Melanie"],
      knownEntities: ["Melanie", "Caroline"],
    });
    assert.equal(near, NO_NEAR_MATCHES);
    assert.deepEqual(reads.neighbours, [], "no candidate read");
  });

  it("corrects a misspelled name and term and expands a region into the known places inside it", async () => {
    const { vocabulary } = fakeVocabulary(["carolin", "seattl", "went"]);
    const question = "What did Carolyn do in Washington?";
    const near = await findNearMatches(vocabulary, {
      tenant: "t",
      question,
      lexicalText: question,
      planned: [],
      knownEntities: ["Caroline", "Seattle", "Sweden"],
    });
    assert.deepEqual(near.names, [{ asked: "Carolyn", known: "Caroline" }]);
    assert.deepEqual(near.places, ["Seattle"]);
    assert.deepEqual(near.lexical, [
      { text: "carolin", weight: 0.5 },
      { text: "Seattle", weight: 0.5 },
    ]);
    assert.deepEqual(withNearMatches({ ...plan, entities: [] }, near).entities, ["Caroline", "Seattle"]);
    assert.ok(withNearMatches({ ...plan, entities: [] }, near).routes.includes("entity"));
  });

  it("leaves out a name inside the region that the records type as a person", async () => {
    const { vocabulary } = fakeVocabulary([], { Charlotte: "person" });
    const question = "What did Jon do in North Carolina?";
    const near = await findNearMatches(vocabulary, {
      tenant: "t",
      question,
      lexicalText: question,
      planned: ["Jon"],
      knownEntities: ["Jon", "Charlotte", "Raleigh"],
    });
    assert.deepEqual(near.places, ["Raleigh"]);
  });

  it("bounds the work on pathological questions: many unknown words, very long words, CJK, emoji", async () => {
    const { vocabulary, reads } = fakeVocabulary(["alpha"]);
    const many = Array.from(
      { length: 60 },
      (_, i) => `zq${String.fromCharCode(97 + (i % 26))}${"x".repeat(3 + (i % 5))}${i}`,
    );
    const unknown = Array.from(
      { length: 60 },
      (_, i) => `quuxq${"abcdefghijklmnopqrstuvwxyz"[i % 26]}${"w".repeat(i % 7)}`,
    );
    const question = `${unknown.join(" ")} ${"y".repeat(5000)} 東京都庁舎前で 🎉🎉 ${many.join(" ")}`;
    const started = performance.now();
    const near = await findNearMatches(vocabulary, {
      tenant: "t",
      question,
      lexicalText: question,
      planned: [],
      knownEntities: ["Alpha"],
    });
    assert.ok(reads.present <= 1);
    assert.ok(reads.neighbours.length <= MAX_FUZZED_TERMS, `fuzzed ${reads.neighbours.length}`);
    assert.ok(reads.neighbours.every((t) => t.length <= FUZZY_MAX_LENGTH));
    assert.ok(MAX_CHECKED_TERMS >= MAX_FUZZED_TERMS);
    assert.deepEqual(near, NO_NEAR_MATCHES);
    assert.ok(performance.now() - started < 2_000);
  });
});
