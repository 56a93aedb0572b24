import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { encodeCursor } from "../../services/core/adapters/sqlite/cursor.ts";
import { openSqlite, type SqliteDatabase, schemaVersion } from "../../services/core/adapters/sqlite/db.ts";
import { buildFtsQuery } from "../../services/core/adapters/sqlite/fts-query.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { isoSpan } from "../../services/core/adapters/sqlite/record-index.ts";
import { recordId, turnRowId } from "../../services/core/ids.ts";
import type { IndexBatch } from "../../services/core/ports.ts";
import type { Entity, MemoryRecord, RecordType, Segment, SegmentTurn, TimeRange } from "../../services/core/types.ts";

// ---------------------------------------------------------------------------------------------
// Test data factory

interface RecordSpec {
  text: string;
  type: RecordType;
  entities: (string | Entity)[];
  topics: string[];
  time?: TimeRange;
  saidAt: string;
  turnIds: string[];
}

const entity = (e: string | Entity): Entity => (typeof e === "string" ? { name: e, kind: "other", aliases: [] } : e);

const makeRecord = (tenant: string, conversation: string, segmentId: string, s: RecordSpec): MemoryRecord => ({
  id: recordId(tenant, s.text),
  type: s.type,
  text: s.text,
  entities: s.entities.map(entity),
  topics: s.topics,
  time: s.time ?? {},
  source: {
    tenant,
    conversation,
    segmentId,
    turnIds: s.turnIds,
    speakers: ["Caroline"],
    sessionId: "s1",
    saidAt: s.saidAt,
  },
  valid: { from: s.saidAt },
});

const makeTurn = (turnId: string, text: string, timestamp: string): SegmentTurn => ({
  turnId,
  speaker: "Caroline",
  role: "user",
  text,
  compressed: text.toLowerCase(),
  timestamp,
  sessionId: "s1",
});

const makeSegment = (tenant: string, conversation: string, id: string, turns: SegmentTurn[]): Segment => ({
  id,
  tenant,
  conversation,
  sessionId: "s1",
  turns,
  start: (turns[0] as SegmentTurn).timestamp,
  end: (turns[turns.length - 1] as SegmentTurn).timestamp,
  tokens: 42,
  closedBy: "gate",
  decisions: [],
});

const CAROLINE: Entity = { name: "Caroline", kind: "person", aliases: ["Caro"] };

/** Two batches per tenant with the same content (ids differ by tenant), plus one record only B has. */
const batchesFor = (tenant: string): IndexBatch[] => {
  const s1 = makeSegment(tenant, "c1", "seg-1", [
    makeTurn("t1", "I moved to Paris last month!", "2023-06-01T10:00:00.000Z"),
    makeTurn("t2", "Melanie painted a sunrise yesterday.", "2023-05-08T09:00:00.000Z"),
    makeTurn("t3", "I really prefer tea, never coffee.", "2023-05-08T09:01:00.000Z"),
  ]);
  const r1 = makeRecord(tenant, "c1", "seg-1", {
    text: "Caroline moved to Paris in May 2023.",
    type: "fact",
    entities: [CAROLINE, { name: "Paris", kind: "place", aliases: [] }],
    topics: ["moving", "Travel"],
    time: { at: "2023-05" },
    saidAt: "2023-06-01T10:00:00.000Z",
    turnIds: ["t1"],
  });
  const r2 = makeRecord(tenant, "c1", "seg-1", {
    text: "Melanie painted a sunrise on 2023-05-07.",
    type: "event",
    entities: ["Melanie"],
    topics: ["painting"],
    time: { at: "2023-05-07" },
    saidAt: "2023-05-08T09:00:00.000Z",
    turnIds: ["t2"],
  });
  const r3 = makeRecord(tenant, "c1", "seg-1", {
    text: "Caroline prefers tea over coffee.",
    type: "preference",
    entities: [CAROLINE],
    topics: ["drinks"],
    saidAt: "2023-05-08T09:01:00.000Z",
    turnIds: ["t3"],
  });
  const s2 = makeSegment(tenant, "c2", "seg-2", [
    makeTurn("t1", "Melanie is planning a trip to Paris in July.", "2023-06-10T12:00:00.000Z"),
  ]);
  const r4 = makeRecord(tenant, "c2", "seg-2", {
    text: "Melanie plans a trip to Paris from 2023-07-01 to 2023-07-14.",
    type: "plan",
    entities: ["Melanie", "Paris"],
    topics: ["travel"],
    time: { from: "2023-07-01", to: "2023-07-14" },
    saidAt: "2023-06-10T12:00:00.000Z",
    turnIds: ["t1"],
  });
  const batches: IndexBatch[] = [
    {
      tenant,
      conversation: "c1",
      segment: s1,
      records: [r1, r2, r3],
      eventFrames: [
        { id: "f1", recordIds: [r2.id, r3.id], turnIds: ["t2", "t3"] },
        { id: "f2", recordIds: [r1.id, r2.id], turnIds: ["t1", "t2"] },
        { id: "f3", recordIds: [r1.id, r2.id, r3.id], turnIds: ["t1", "t2", "t3"] },
      ],
    },
    {
      tenant,
      conversation: "c2",
      segment: s2,
      records: [r4],
      eventFrames: [{ id: "f4", recordIds: [r4.id], turnIds: ["t1"] }],
    },
  ];
  if (tenant === "B") {
    const s3 = makeSegment(tenant, "c3", "seg-3", [
      makeTurn("t9", "Bob started at Zyxcorp.", "2023-06-11T08:00:00.000Z"),
    ]);
    const r5 = makeRecord(tenant, "c3", "seg-3", {
      text: "Bob works at Zyxcorp.",
      type: "fact",
      entities: ["Bob", "Zyxcorp"],
      topics: ["work"],
      saidAt: "2023-06-11T08:00:00.000Z",
      turnIds: ["t9"],
    });
    batches.push({ tenant, conversation: "c3", segment: s3, records: [r5], eventFrames: [] });
  }
  return batches;
};

const rid = (tenant: string, text: string): string => recordId(tenant, text);
const R1 = (t: string) => rid(t, "Caroline moved to Paris in May 2023.");
const R2 = (t: string) => rid(t, "Melanie painted a sunrise on 2023-05-07.");
const R3 = (t: string) => rid(t, "Caroline prefers tea over coffee.");
const R4 = (t: string) => rid(t, "Melanie plans a trip to Paris from 2023-07-01 to 2023-07-14.");
const R5 = (t: string) => rid(t, "Bob works at Zyxcorp.");

const TABLES = [
  "records",
  "record_entities",
  "record_topics",
  "record_days",
  "event_frames",
  "segments",
  "turns",
  "records_fts",
  "turns_fts",
  "update_candidates",
  "dead_letters",
];

const tableCounts = (db: SqliteDatabase, tenant?: string): Record<string, number> =>
  Object.fromEntries(
    TABLES.map((t) => {
      const row = tenant
        ? (db.prepare(`SELECT COUNT(*) AS n FROM ${t} WHERE tenant = ?`).get(tenant) as { n: number })
        : (db.prepare(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number });
      return [t, row.n];
    }),
  );

const ids = (xs: readonly { id: string }[]): string[] => xs.map((x) => x.id);

// ---------------------------------------------------------------------------------------------

describe("SqliteGraphStore", () => {
  let dir: string;
  let db: SqliteDatabase;
  let store: SqliteGraphStore;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "graph-store-"));
    db = openSqlite(dir);
    store = new SqliteGraphStore(db);
    for (const t of ["A", "B"]) for (const b of batchesFor(t)) await store.writeBatch(b);
  });

  after(async () => {
    await store.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("opens with WAL, foreign keys and a schema version", () => {
    assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
    assert.equal(db.pragma("foreign_keys", { simple: true }), 1);
    assert.equal(schemaVersion(db, "graph"), 1);
  });

  it("writeBatch is idempotent: writing every batch again changes no count", async () => {
    const before = tableCounts(db);
    assert.equal(before.records, 9);
    assert.equal(before.turns, 9);
    for (const t of ["A", "B"]) for (const b of batchesFor(t)) await store.writeBatch(b);
    assert.deepEqual(tableCounts(db), before);
    assert.equal(await store.countRecords("A"), 4);
    assert.equal(await store.countSegments("A"), 2);
  });

  it("a replay does not clobber consolidation (superseded stays superseded)", async () => {
    await store.writeBatch({
      tenant: "A",
      conversation: "c9",
      segment: makeSegment("A", "c9", "seg-9", [
        makeTurn("t1", "Old news about the moon.", "2023-01-01T00:00:00.000Z"),
      ]),
      records: [
        makeRecord("A", "c9", "seg-9", {
          text: "Old news about the moon.",
          type: "fact",
          entities: ["Moon"],
          topics: ["space"],
          saidAt: "2023-01-01T00:00:00.000Z",
          turnIds: ["t1"],
        }),
      ],
      eventFrames: [],
    });
    const oldId = rid("A", "Old news about the moon.");
    assert.equal(await store.supersede("A", oldId, "newer-id", "2023-02-01T00:00:00.000Z"), true);
    assert.equal(await store.supersede("B", oldId, "newer-id"), false);
    const replay = batchesFor("A")[0] as IndexBatch;
    await store.writeBatch(replay);
    const [rec] = await store.getRecords("A", [oldId]);
    assert.equal(rec?.valid.supersededBy, "newer-id");
    assert.equal(rec?.valid.to, "2023-02-01T00:00:00.000Z");
    // Current-only reads skip it; includeSuperseded lists it.
    const current = await store.listRecords("A", { conversation: "c9", limit: 10 });
    assert.deepEqual(current.records, []);
    const all = await store.listRecords("A", { conversation: "c9", limit: 10, includeSuperseded: true });
    assert.deepEqual(ids(all.records), [oldId]);
    assert.deepEqual(await store.searchRecordsLexical("A", "moon news", 5), []);
    assert.deepEqual(await store.recordsByEntities("A", ["moon"], 5), []);
    assert.equal(await store.countRecords("A", "c9"), 1);
  });

  it("refuses a batch whose records or segment belong to another tenant", async () => {
    const b = batchesFor("A")[1] as IndexBatch;
    await assert.rejects(store.writeBatch({ ...b, tenant: "B" }), /tenant/);
  });

  it("getRecords returns the order asked, skipping unknown and other tenants' ids", async () => {
    const got = await store.getRecords("A", [R3("A"), "nope", R1("B"), R1("A"), R3("A")]);
    assert.deepEqual(ids(got), [R3("A"), R1("A")]);
    assert.equal(got[1]?.text, "Caroline moved to Paris in May 2023.");
    assert.deepEqual(got[1]?.entities[0], CAROLINE);
    assert.deepEqual(await store.getRecords("A", []), []);
  });

  it("listRecords filters by conversation, entity (name or alias), type and time", async () => {
    const page = async (q: Parameters<SqliteGraphStore["listRecords"]>[1]) =>
      ids((await store.listRecords("A", q)).records);
    // Stable order: said_at, then id.
    assert.deepEqual(await page({ limit: 10 }), [R2("A"), R3("A"), R1("A"), R4("A")]);
    assert.deepEqual(await page({ conversation: "c2", limit: 10 }), [R4("A")]);
    assert.deepEqual(await page({ entity: "caroline", limit: 10 }), [R3("A"), R1("A")]);
    assert.deepEqual(await page({ entity: "CARO", limit: 10 }), [R3("A"), R1("A")]);
    assert.deepEqual(await page({ entity: "paris", limit: 10 }), [R1("A"), R4("A")]);
    assert.deepEqual(await page({ type: "plan", limit: 10 }), [R4("A")]);
    // May 2023 (r1's month) overlaps 2023-05-07 (r2's day); r3 has no time: said 2023-05-08.
    const may7 = isoSpan("2023-05-07");
    assert.deepEqual(await page({ timeFrom: may7.from, timeTo: may7.to, limit: 10 }), [R2("A"), R1("A")]);
    const may8 = isoSpan("2023-05-08");
    assert.deepEqual(await page({ timeFrom: may8.from, timeTo: may8.to, limit: 10 }), [R3("A"), R1("A")]);
    const july = isoSpan("2023-07-10");
    assert.deepEqual(await page({ timeFrom: july.from, limit: 10 }), [R4("A")]);
    assert.deepEqual(await page({ timeTo: isoSpan("2023-04").to, limit: 10 }), []);
    assert.deepEqual(await page({ limit: 0 }), []);
  });

  it("listRecords pages with an opaque cursor", async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const p = await store.listRecords("B", { limit: 2, ...(cursor ? { cursor } : {}) });
      seen.push(...ids(p.records));
      cursor = p.nextCursor;
      pages++;
      assert.ok(pages < 10);
    } while (cursor);
    assert.equal(pages, 3);
    assert.deepEqual(seen, [R2("B"), R3("B"), R1("B"), R4("B"), R5("B")]);
    assert.match(encodeCursor({ saidAt: 1, id: "x" }), /^[A-Za-z0-9_-]+$/);
    await assert.rejects(store.listRecords("B", { limit: 2, cursor: "!!not-a-cursor" }), /invalid cursor/);
    // A cursor past the end gives an empty last page without a next cursor.
    const end = await store.listRecords("B", { limit: 2, cursor: encodeCursor({ saidAt: Date.now(), id: "" }) });
    assert.deepEqual(end, { records: [] });
  });

  it("searchRecordsLexical ranks by bm25 with a safe query", async () => {
    const hits = await store.searchRecordsLexical("A", "Where did Caroline move to?", 5);
    assert.equal(hits[0]?.id, R1("A"));
    assert.ok((hits[0]?.score ?? 0) > 0);
    for (let i = 1; i < hits.length; i++) assert.ok((hits[i - 1]?.score ?? 0) >= (hits[i]?.score ?? 0));
    // Porter stemming: "painting" finds "painted".
    assert.deepEqual(ids(await store.searchRecordsLexical("A", "painting", 5)), [R2("A")]);
    assert.deepEqual(ids(await store.searchRecordsLexical("A", "paris", 5, "c2")), [R4("A")]);
    // FTS syntax in user text neither throws nor leaks.
    assert.ok((await store.searchRecordsLexical("A", 'paris" OR NEAR(tea* AND) -coffee ^:', 5)).length > 0);
    assert.deepEqual(await store.searchRecordsLexical("A", "what did she do?", 5), []);
    assert.deepEqual(await store.searchRecordsLexical("A", "", 5), []);
    assert.equal(buildFtsQuery('Où est "Zoë"? AND'), '"où" OR "est" OR "zoë"');
  });

  it("searchTurnsLexical returns turn row ids", async () => {
    const hits = await store.searchTurnsLexical("A", "sunrise painted", 5);
    assert.deepEqual(ids(hits), [turnRowId("c1", "t2")]);
    const paris = await store.searchTurnsLexical("A", "Paris", 5);
    assert.deepEqual(ids(paris).sort(), [turnRowId("c1", "t1"), turnRowId("c2", "t1")].sort());
    assert.deepEqual(ids(await store.searchTurnsLexical("A", "Paris", 5, "c2")), [turnRowId("c2", "t1")]);
  });

  it("recordsByEntities and recordsByTopics score by distinct matches", async () => {
    const e = await store.recordsByEntities("A", ["caroline", "PARIS", "Caro"], 10);
    assert.deepEqual(e[0], { id: R1("A"), score: 2 });
    // Ties (score 1) broken by newer said_at: r4 (06-10) then r3 (05-08).
    assert.deepEqual(ids(e.slice(1)), [R4("A"), R3("A")]);
    assert.deepEqual(ids(await store.recordsByEntities("A", ["paris"], 10, "c2")), [R4("A")]);
    assert.deepEqual(await store.recordsByEntities("A", [], 10), []);
    const t = await store.recordsByTopics("A", ["TRAVEL", "moving"], 10);
    assert.deepEqual(t, [
      { id: R1("A"), score: 2 },
      { id: R4("A"), score: 1 },
    ]);
  });

  it("recordsInTime returns overlapping records, tighter spans first", async () => {
    const may7 = isoSpan("2023-05-07");
    const hits = await store.recordsInTime("A", may7, 10);
    assert.deepEqual(ids(hits), [R2("A"), R1("A")]);
    assert.ok((hits[0]?.score ?? 0) > (hits[1]?.score ?? 0));
    const june = isoSpan("2023-06");
    assert.deepEqual(ids(await store.recordsInTime("A", june, 10)), []);
    const summer = { from: isoSpan("2023-05").from, to: isoSpan("2023-07").to };
    assert.deepEqual(ids(await store.recordsInTime("A", summer, 10, "c2")), [R4("A")]);
    assert.deepEqual(await store.recordsInTime("A", { from: 10, to: 5 }, 10), []);
  });

  it("eventFrameNeighbours scores by shared frames, excluding the given records", async () => {
    assert.deepEqual(await store.eventFrameNeighbours("A", [R1("A")], 10), [
      { id: R2("A"), score: 2 },
      { id: R3("A"), score: 1 },
    ]);
    assert.deepEqual(ids(await store.eventFrameNeighbours("A", [R1("A"), R2("A")], 10)), [R3("A")]);
    assert.deepEqual(await store.eventFrameNeighbours("A", [R4("A")], 10), []);
  });

  it("getTurns and getTurnsByRowIds return stored turns in the order asked", async () => {
    const turns = await store.getTurns("A", [
      { conversation: "c2", turnId: "t1" },
      { conversation: "c1", turnId: "t3" },
      { conversation: "c1", turnId: "zz" },
    ]);
    assert.deepEqual(
      turns.map((t) => [t.conversation, t.turnId, t.segmentId, t.tenant]),
      [
        ["c2", "t1", "seg-2", "A"],
        ["c1", "t3", "seg-1", "A"],
      ],
    );
    assert.equal(turns[1]?.text, "I really prefer tea, never coffee.");
    assert.equal(turns[1]?.compressed, "i really prefer tea, never coffee.");
    assert.equal(turns[1]?.role, "user");
    const byRow = await store.getTurnsByRowIds("A", [turnRowId("c1", "t2"), "garbage", turnRowId("c1", "t1")]);
    assert.deepEqual(
      byRow.map((t) => t.turnId),
      ["t2", "t1"],
    );
  });

  it("knownEntities / knownTopics list distinct display names", async () => {
    assert.deepEqual(await store.knownEntities("A"), ["Caroline", "Melanie", "Moon", "Paris"]);
    assert.deepEqual(await store.knownEntities("A", "c2"), ["Melanie", "Paris"]);
    assert.deepEqual(await store.knownTopics("A", "c1"), ["Travel", "drinks", "moving", "painting"]);
  });

  it("counts records and segments per tenant and conversation", async () => {
    assert.equal(await store.countRecords("B"), 5);
    assert.equal(await store.countRecords("B", "c1"), 3);
    assert.equal(await store.countSegments("B"), 3);
    assert.equal(await store.countSegments("B", "c3"), 1);
    assert.equal(await store.countRecords("nobody"), 0);
  });

  it("update candidates and dead letters are idempotent", async () => {
    const c = {
      tenant: "A",
      recordId: R1("A"),
      candidateId: R4("A"),
      similarity: 0.8,
      sharedEntities: ["Paris"],
      sharedTopics: ["travel"],
      reason: "similarity" as const,
    };
    await store.putUpdateCandidates([c, { ...c, candidateId: R3("A") }]);
    await store.putUpdateCandidates([c]);
    assert.equal((await store.listUpdateCandidates("A")).length, 2);
    assert.deepEqual(await store.listUpdateCandidates("B"), []);
    const letter = { stage: "encoder", key: "A/c1", error: "boom", payload: "{}", at: "2024-01-01T00:00:00.000Z" };
    await store.putDeadLetter(letter);
    await store.putDeadLetter(letter);
    await store.putDeadLetter({ ...letter, key: "B/c1", at: "2024-01-02T00:00:00.000Z" });
    const letters = await store.listDeadLetters(10);
    assert.deepEqual(
      letters.map((l) => l.key),
      ["B/c1", "A/c1"],
    );
    assert.deepEqual(letters[1], letter);
    assert.equal((await store.listDeadLetters(1)).length, 1);
  });

  it("isolates tenants on every read method", async () => {
    const bOnly = new Set([R1("B"), R2("B"), R3("B"), R4("B"), R5("B")]);
    const notB = (xs: readonly { id: string }[]) =>
      assert.ok(
        xs.every((x) => !bOnly.has(x.id)),
        JSON.stringify(xs),
      );
    notB(await store.getRecords("A", [...bOnly]));
    assert.deepEqual(await store.getRecords("A", [...bOnly]), []);
    notB((await store.listRecords("A", { limit: 100, includeSuperseded: true })).records);
    assert.deepEqual((await store.listRecords("A", { conversation: "c3", limit: 100 })).records, []);
    notB(await store.searchRecordsLexical("A", "Caroline Melanie Paris tea sunrise Bob Zyxcorp", 100));
    assert.deepEqual(await store.searchRecordsLexical("A", "Zyxcorp", 10), []);
    assert.deepEqual(await store.searchTurnsLexical("A", "Zyxcorp", 10), []);
    const turnHitsB = await store.searchTurnsLexical("B", "Zyxcorp", 10);
    assert.deepEqual(ids(turnHitsB), [turnRowId("c3", "t9")]);
    assert.deepEqual(await store.getTurnsByRowIds("A", [turnRowId("c3", "t9")]), []);
    assert.ok((await store.getTurns("A", [{ conversation: "c1", turnId: "t1" }])).every((t) => t.tenant === "A"));
    notB(await store.recordsByEntities("A", ["Caroline", "Melanie", "Paris", "Bob"], 100));
    assert.deepEqual(await store.recordsByEntities("A", ["Bob"], 10), []);
    notB(await store.recordsByTopics("A", ["travel", "moving", "painting", "drinks", "work"], 100));
    notB(await store.recordsInTime("A", { from: 0, to: Date.UTC(2030, 0, 1) }, 100));
    assert.deepEqual(await store.eventFrameNeighbours("A", [R1("B")], 10), []);
    notB(await store.eventFrameNeighbours("A", [R1("A")], 10));
    assert.ok(!(await store.knownEntities("A")).includes("Bob"));
    assert.ok(!(await store.knownTopics("A")).includes("work"));
    assert.equal(await store.countRecords("A", "c3"), 0);
    assert.equal(await store.countSegments("A", "c3"), 0);
  });

  it("deleteTenant removes every row of that tenant (FTS included) and nothing else", async () => {
    const aBefore = tableCounts(db, "A");
    await store.deleteTenant("B");
    assert.deepEqual(tableCounts(db, "B"), Object.fromEntries(TABLES.map((t) => [t, 0])));
    assert.deepEqual(tableCounts(db, "A"), aBefore);
    assert.equal(await store.countRecords("B"), 0);
    assert.deepEqual(await store.searchTurnsLexical("B", "Zyxcorp", 10), []);
    assert.deepEqual(
      (await store.listDeadLetters(10)).map((l) => l.key),
      ["A/c1"],
    );
    assert.equal(await store.countRecords("A"), 5);
    // The tenant can write again afterwards.
    for (const b of batchesFor("B")) await store.writeBatch(b);
    assert.equal(await store.countRecords("B"), 5);
    assert.deepEqual(ids(await store.searchTurnsLexical("B", "Zyxcorp", 10)), [turnRowId("c3", "t9")]);
  });
});

describe("SqliteGraphStore persistence", () => {
  it("keeps everything across close and reopen", async () => {
    const dir = mkdtempSync(join(tmpdir(), "graph-store-"));
    try {
      const a = SqliteGraphStore.open(dir);
      for (const b of batchesFor("A")) await a.writeBatch(b);
      await a.putDeadLetter({ stage: "x", key: "A/c", error: "e", payload: "p", at: "2024-01-01T00:00:00.000Z" });
      const expected = {
        list: await a.listRecords("A", { limit: 10 }),
        lex: await a.searchRecordsLexical("A", "Caroline Paris", 5),
        turns: await a.searchTurnsLexical("A", "tea coffee", 5),
        ents: await a.recordsByEntities("A", ["Caroline"], 5),
        frames: await a.eventFrameNeighbours("A", [R1("A")], 5),
      };
      await a.close();
      assert.equal(a.db.open, false);
      const b = SqliteGraphStore.open(dir);
      assert.deepEqual(await b.listRecords("A", { limit: 10 }), expected.list);
      assert.deepEqual(await b.searchRecordsLexical("A", "Caroline Paris", 5), expected.lex);
      assert.deepEqual(await b.searchTurnsLexical("A", "tea coffee", 5), expected.turns);
      assert.deepEqual(await b.recordsByEntities("A", ["Caroline"], 5), expected.ents);
      assert.deepEqual(await b.eventFrameNeighbours("A", [R1("A")], 5), expected.frames);
      assert.equal(await b.countSegments("A"), 2);
      assert.equal((await b.listDeadLetters(5)).length, 1);
      assert.equal(schemaVersion(b.db, "graph"), 1);
      await b.close();
      await assert.rejects(b.countRecords("A"), /closed/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
