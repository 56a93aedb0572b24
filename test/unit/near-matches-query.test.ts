// Issue 15 through the whole read side (embedded runtime, real embedder): a misspelled name and a
// region named instead of the place the turn names still reach the turn through the lexical and
// entity routes, and a question whose words are all known is searched exactly as before.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite, type SqliteDatabase } from "../../services/core/adapters/sqlite-db.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { QueryResult } from "../../services/core/query-types.ts";
import type { TurnInput } from "../../services/core/requests.ts";
import { type OpenedEngine, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { FAMILY_WEIGHT, findNearMatches, NO_NEAR_MATCHES } from "../../services/query/near-matches.ts";
import { planQuery } from "../../services/query/planner.ts";

const MODEL = "models/all-MiniLM-L6-v2/model.onnx";
const TENANT = "fuzzy";
const CONVERSATION = "trip";

const LINES: [string, string][] = [
  ["Melanie", "Hey Caroline, how was your week? I spent most of it painting in the garden."],
  ["Caroline", "Busy! I finished the counseling course and started volunteering at the shelter."],
  ["Melanie", "That is wonderful. The kids and I baked bread on Sunday and it came out great."],
  ["Caroline", "Caroline went to Seattle for the pride parade with her friends."],
  ["Melanie", "My son has a swimming competition next month, he trains every morning."],
  ["Caroline", "I am reading a book about adoption agencies, it is really moving."],
  ["Melanie", "We are thinking about a camping trip to the mountains in the summer."],
  ["Caroline", "My grandmother gave me a necklace from home, it means a lot to me."],
  ["Melanie", "I got mentored by a great painter last month, it was so inspiring."],
];

const turns: TurnInput[] = LINES.map(([speaker, text], i) => ({
  turnId: `d${i + 1}`,
  speaker,
  text,
  timestamp: new Date(Date.UTC(2024, 4, 6, 10, i)).toISOString(),
  sessionId: "s1",
  role: "user",
}));

const seattleTurn = "d4";
const mentorTurn = "d9";
const routeHits = (r: QueryResult, route: string): string[] =>
  (r.explain?.routes ?? []).filter((l) => l.route === route).flatMap((l) => l.hits.map((h) => h.id));

describe("near matches in a query (embedded runtime, real embedder)", {
  skip: existsSync(MODEL) ? false : "model missing: run node scripts/setup.mjs",
}, () => {
  let dir: string;
  let opened: OpenedEngine;
  let db: SqliteDatabase;
  let graph: SqliteGraphStore;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "memory-near-"));
    opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }));
    await opened.engine.ingest(TENANT, CONVERSATION, turns);
    await opened.engine.flush(TENANT, CONVERSATION);
    await opened.engine.drain();
    db = openSqlite(dir);
    graph = new SqliteGraphStore(db);
  });
  after(async () => {
    await graph?.close();
    db?.close();
    await opened?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The near matches of a question, planned as the query service plans it. */
  const nearMatchesOf = async (question: string) => {
    const knownEntities = await graph.knownEntities(TENANT);
    return findNearMatches(graph, {
      tenant: TENANT,
      question,
      lexicalText: question,
      planned: planQuery({ question, knownEntities, knownTopics: [], now: new Date() }).entities,
      knownEntities,
    });
  };

  it("finds the Seattle turn for a misspelled name and the state it lies in", async () => {
    const known = await graph.knownEntities(TENANT);
    assert.ok(known.includes("Seattle") && known.includes("Caroline"), `entities: ${known.join(", ")}`);
    const question = "What did Carolyn do in Washington?";
    // Exactly, the lexical routes find nothing: no record or turn holds "carolyn" or "washington".
    assert.deepEqual(await graph.searchTurnsLexical(TENANT, question, 10), []);

    const result = await opened.engine.query(TENANT, { question, budget: 300, explain: true });
    assert.ok(result.plan.entities.includes("Caroline"), `plan entities: ${result.plan.entities.join(", ")}`);
    assert.ok(result.plan.entities.includes("Seattle"));
    assert.ok(result.plan.routes.includes("entity"));
    const seattleRow = routeHits(result, "raw-lexical")[0];
    assert.ok(seattleRow?.endsWith(seattleTurn), `raw-lexical hits: ${routeHits(result, "raw-lexical").join(", ")}`);
    const found = result.items.filter((i) => i.turnIds.includes(seattleTurn));
    assert.ok(found.length > 0, "the Seattle turn (or a record of it) is packed");
    assert.ok(found.some((i) => i.routes.some((r) => ["lexical", "raw-lexical", "entity"].includes(r.route))));
  });

  it("finds the turn of a plain word for a question that names it by a derived one", async () => {
    const question = "When did Melanie receive mentorship?";
    const near = await nearMatchesOf(question);
    // "mentorship" is in no record or turn; "mentored" is, as the term "mentor".
    assert.deepEqual(near.lexical, [{ text: "mentor", weight: FAMILY_WEIGHT }]);
    const result = await opened.engine.query(TENANT, { question, budget: 300, explain: true });
    const raw = routeHits(result, "raw-lexical");
    assert.ok(raw[0]?.endsWith(mentorTurn), `raw-lexical hits: ${raw.join(", ")}`);
  });

  it("leaves a question whose words are all known to the exact search", async () => {
    const question = "When did Caroline go to the pride parade in Seattle?";
    const knownEntities = await graph.knownEntities(TENANT);
    const near = await nearMatchesOf(question);
    assert.equal(near, NO_NEAR_MATCHES);
    const result = await opened.engine.query(TENANT, { question, explain: true });
    const plan = planQuery({
      question,
      knownEntities,
      knownTopics: await graph.knownTopics(TENANT),
      now: new Date(),
    });
    assert.deepEqual({ ...result.plan, timeWindow: undefined }, { ...plan, timeWindow: undefined });
    const exactTurns = await graph.searchTurnsLexical(TENANT, [question, ...plan.rewrites].join(" "), 10);
    assert.deepEqual(
      routeHits(result, "raw-lexical"),
      exactTurns.map((h) => h.id),
    );
  });
});
