/**
 * Contract suite every GraphStore implementation must pass (the SQLite store is the reference).
 * Tenant names carry an optional prefix, so runs against a shared server do not meet; the suite
 * deletes its tenants at the end.
 */

import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { applyConsolidation } from "../../services/consolidator/apply.ts";
import { eraseConversation, eraseTenant } from "../../services/consolidator/erasure.ts";
import { CursorCodec } from "../../services/core/cursor.ts";
import { ValidationError } from "../../services/core/errors.ts";
import { recordId, turnRowId } from "../../services/core/ids.ts";
import { lexicalText, queryTerms, rankBm25 } from "../../services/core/lexical.ts";
import { type GraphStore, type IndexBatch, OPEN_SEGMENT_ID, type RecordQuery } from "../../services/core/ports.ts";
import { entityKeys, isoSpan, topicKeys } from "../../services/core/record-index.ts";
import { getTurnsByRowIds } from "../../services/core/turn-order.ts";
import type {
  DeadLetter,
  Entity,
  MemoryRecord,
  RecordType,
  Segment,
  SegmentTurn,
  TimeRange,
  UpdateCandidate,
} from "../../services/core/types.ts";
import { walkVersionGraph } from "../../services/core/version-graph.ts";

export interface GraphStoreFixture {
  store: GraphStore;
  /**
   * What the store holds for a tenant, per kind of row or node (table, label, relationship type):
   * the idempotency and erasure checks compare these.
   */
  counts: (tenant: string) => Promise<Record<string, number>>;
  cleanup: () => Promise<void>;
}

export interface GraphStoreContractOptions {
  /** A reason to skip the whole suite, or false/undefined to run it. */
  skip?: string | false;
  /** Prefix of every tenant name the suite uses (unique per run on a shared server). */
  tenantPrefix?: string;
  /** Timeout of the whole suite in ms (default 5 minutes). */
  timeout?: number;
}

// ---------------------------------------------------------------------------------------------
// Test data factory

export interface RecordSpec {
  text: string;
  type: RecordType;
  entities: (string | Entity)[];
  topics: string[];
  time?: TimeRange;
  saidAt: string;
  turnIds: string[];
}

const entity = (e: string | Entity): Entity => (typeof e === "string" ? { name: e, kind: "other", aliases: [] } : e);

export const makeRecord = (tenant: string, conversation: string, segmentId: string, s: RecordSpec): MemoryRecord => ({
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

export const makeTurn = (turnId: string, text: string, timestamp: string): SegmentTurn => ({
  turnId,
  speaker: "Caroline",
  role: "user",
  text,
  compressed: text.toLowerCase(),
  timestamp,
  sessionId: "s1",
});

export const makeSegment = (tenant: string, conversation: string, id: string, turns: SegmentTurn[]): Segment => ({
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

export const CAROLINE: Entity = { name: "Caroline", kind: "person", aliases: ["Caro"] };

/** Two batches per tenant with the same content (ids differ by tenant), plus one record only `withExtra` has. */
export const batchesFor = (tenant: string, withExtra = false): IndexBatch[] => {
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
  if (withExtra) {
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

/** A one-segment batch: one turn per record (turn ids t1, t2, ...), no event frames. */
const simpleBatch = (tenant: string, conversation: string, specs: Omit<RecordSpec, "turnIds">[]): IndexBatch => {
  const segId = `seg-${conversation}`;
  const turns = specs.map((s, i) => makeTurn(`t${i + 1}`, s.text, s.saidAt));
  return {
    tenant,
    conversation,
    segment: makeSegment(tenant, conversation, segId, turns),
    records: specs.map((s, i) => makeRecord(tenant, conversation, segId, { ...s, turnIds: [`t${i + 1}`] })),
    eventFrames: [],
  };
};

const rid = (tenant: string, text: string): string => recordId(tenant, text);
const R1 = (t: string) => rid(t, "Caroline moved to Paris in May 2023.");
const R2 = (t: string) => rid(t, "Melanie painted a sunrise on 2023-05-07.");
const R3 = (t: string) => rid(t, "Caroline prefers tea over coffee.");
const R4 = (t: string) => rid(t, "Melanie plans a trip to Paris from 2023-07-01 to 2023-07-14.");
const R5 = (t: string) => rid(t, "Bob works at Zyxcorp.");

const ids = (xs: readonly { id: string }[]): string[] => xs.map((x) => x.id);
const allZero = (counts: Record<string, number>): boolean => Object.values(counts).every((n) => n === 0);

// ---------------------------------------------------------------------------------------------

/**
 * What a store may keep counted with its writes (SQLite: scope-counts.ts) must answer exactly as a
 * read of the rows would: each key's capped count equals what recordsBy* returns for it (current
 * records, tenant-wide and per conversation), and each lexical search equals the exhaustive BM25
 * over the scope's current records / raw turns. Checked after every consolidation and erasure step.
 */
const assertCountsAgreeWithRows = async (
  store: GraphStore,
  tenant: string,
  conversations: readonly string[],
  questions: readonly string[],
): Promise<void> => {
  const all = (await store.listRecords(tenant, { limit: 1000, includeSuperseded: true })).records;
  const keys = {
    entity: [...new Set(all.flatMap((r) => entityKeys(r).map((e) => e.key)))],
    topic: [...new Set(all.flatMap((r) => topicKeys(r).map((t) => t.key)))],
  };
  for (const conversation of [undefined, ...conversations]) {
    for (const [index, find] of [
      ["entity", store.recordsByEntities.bind(store)],
      ["topic", store.recordsByTopics.bind(store)],
    ] as const)
      for (const key of keys[index])
        for (const cap of [1, 2, 100])
          assert.equal(
            await store.countRecordsByKey(tenant, index, key, cap, conversation),
            (await find(tenant, [key], cap, conversation)).length,
            `${index} ${key} ${conversation} cap ${cap}`,
          );
    const current = (
      await store.listRecords(tenant, { limit: 1000, ...(conversation ? { conversation } : {}) })
    ).records.map((r) => ({ id: r.id, time: Date.parse(r.source.saidAt), ...lexicalText(r.text) }));
    const turns: { id: string; time: number; lex: string; length: number }[] = [];
    for (const c of conversation ? [conversation] : conversations)
      for (const seg of await store.listSegments(tenant, c, 1000))
        for (const t of seg.turns)
          turns.push({ id: turnRowId(c, t.turnId), time: Date.parse(t.timestamp), ...lexicalText(t.text) });
    for (const question of questions) {
      const terms = queryTerms(question);
      for (const [items, search] of [
        [current, store.searchRecordsLexical.bind(store)],
        [turns, store.searchTurnsLexical.bind(store)],
      ] as const) {
        const hits = items.filter((r) => r.lex.split(" ").some((w) => terms.includes(w)));
        const scope = { items: items.length, totalLength: items.reduce((n, r) => n + r.length, 0) };
        for (const k of [1, 3, 10])
          assert.deepEqual(
            await search(tenant, question, k, conversation),
            rankBm25(terms, hits, scope, k),
            `${question} ${conversation} k ${k}`,
          );
      }
    }
  }
};

export const runGraphStoreContract = (
  name: string,
  make: () => Promise<GraphStoreFixture>,
  opts: GraphStoreContractOptions = {},
): void => {
  const skip = opts.skip || false;
  const prefix = opts.tenantPrefix ?? "";
  const A = `${prefix}A`;
  const B = `${prefix}B`;
  const C = `${prefix}C`;
  const NOBODY = `${prefix}nobody`;
  const timeout = opts.timeout ?? 300_000;

  describe(`GraphStore contract: ${name}`, { skip, timeout }, () => {
    let fx: GraphStoreFixture;
    let store: GraphStore;
    /** Dead letters of this run only (the listing is global; a shared server may hold others). */
    const ours = async (limit = 1000): Promise<DeadLetter[]> =>
      (await store.listDeadLetters(limit)).filter((l) => [A, B, C].some((t) => l.key.startsWith(`${t}/`)));

    before(async () => {
      fx = await make();
      store = fx.store;
      for (const t of [A, B, C]) await store.deleteTenant(t);
      for (const b of batchesFor(A)) await store.writeBatch(b);
      for (const b of batchesFor(B, true)) await store.writeBatch(b);
    });

    after(async () => {
      if (!fx) return;
      for (const t of [A, B, C]) await store.deleteTenant(t).catch(() => undefined);
      await fx.cleanup();
    });

    it("writeBatch is idempotent: writing every batch again changes no count", async () => {
      const beforeA = await fx.counts(A);
      const beforeB = await fx.counts(B);
      assert.ok(!allZero(beforeA));
      for (const b of batchesFor(A)) await store.writeBatch(b);
      for (const b of batchesFor(B, true)) await store.writeBatch(b);
      assert.deepEqual(await fx.counts(A), beforeA);
      assert.deepEqual(await fx.counts(B), beforeB);
      assert.equal(await store.countRecords(A), 4);
      assert.equal(await store.countRecords(B), 5);
      assert.equal(await store.countSegments(A), 2);
    });

    it("counts a store keeps answer like its rows, after replays", async () => {
      const questions = ["Where did Caroline move to? Paris!", "painting sunrise tea", "coffee plans trip work"];
      await assertCountsAgreeWithRows(store, A, ["c1", "c2"], questions);
      await assertCountsAgreeWithRows(store, B, ["c1", "c2", "c3"], questions);
    });

    it("lists a tenant's conversations and segments in time order, with keyset pages, and the records of segments (explorer)", async () => {
      assert.deepEqual(await store.listConversations(A, 10), [
        {
          conversation: "c1",
          segments: 1,
          turns: 3,
          firstAt: "2023-06-01T10:00:00.000Z",
          lastAt: "2023-05-08T09:01:00.000Z",
        },
        {
          conversation: "c2",
          segments: 1,
          turns: 1,
          firstAt: "2023-06-10T12:00:00.000Z",
          lastAt: "2023-06-10T12:00:00.000Z",
        },
      ]);
      assert.deepEqual(
        (await store.listConversations(B, 10)).map((c) => c.conversation),
        ["c1", "c2", "c3"],
      );
      assert.deepEqual(
        (await store.listConversations(B, 1, "c1")).map((c) => c.conversation),
        ["c2"],
      );
      assert.deepEqual(await store.listConversations(NOBODY, 10), []);

      const [seg] = await store.listSegments(A, "c1", 10);
      assert.equal(seg?.id, "seg-1");
      assert.deepEqual(
        seg?.turns.map((t) => t.turnId),
        ["t1", "t2", "t3"],
      );
      assert.deepEqual(await store.listSegments(A, "c3", 10), [], "c3 is tenant B's conversation");
      assert.deepEqual(new Set(ids(await store.recordsOfSegments(A, ["seg-1"]))), new Set([R1(A), R2(A), R3(A)]));
      assert.deepEqual(ids(await store.recordsOfSegments(B, ["seg-3"])), [R5(B)]);
      assert.deepEqual(await store.recordsOfSegments(A, ["seg-3"]), [], "seg-3 is tenant B's segment");
      assert.deepEqual(await store.recordsOfSegments(NOBODY, ["seg-1", "seg-2"]), []);

      // Time order: segment start, then id; a page continues after the last (start, id) it had.
      const timed = (id: string, at: string) => ({
        tenant: C,
        conversation: "tl",
        segment: makeSegment(C, "tl", id, [makeTurn(`${id}-t`, `turn of ${id}`, at)]),
        records: [],
        eventFrames: [],
      });
      try {
        await store.writeBatch(timed("seg-b", "2023-01-02T00:00:00.000Z"));
        await store.writeBatch(timed("seg-a", "2023-01-02T00:00:00.000Z"));
        await store.writeBatch(timed("seg-c", "2023-01-01T00:00:00.000Z"));
        assert.deepEqual(ids(await store.listSegments(C, "tl", 10)), ["seg-c", "seg-a", "seg-b"]);
        assert.deepEqual(ids(await store.listSegments(C, "tl", 2)), ["seg-c", "seg-a"]);
        assert.deepEqual(
          ids(await store.listSegments(C, "tl", 2, { start: "2023-01-02T00:00:00.000Z", id: "seg-a" })),
          ["seg-b"],
        );
      } finally {
        await store.deleteTenant(C);
      }
    });

    it("a replay does not clobber consolidation (superseded stays superseded)", async () => {
      const moon = simpleBatch(C, "c9", [
        {
          text: "Old news about the moon.",
          type: "fact",
          entities: ["Moon"],
          topics: ["space"],
          saidAt: "2023-01-01T00:00:00.000Z",
        },
        {
          text: "New moon landing.",
          type: "event",
          entities: ["Moon"],
          topics: ["space"],
          saidAt: "2023-02-01T00:00:00.000Z",
        },
      ]);
      await store.writeBatch(moon);
      const oldId = rid(C, "Old news about the moon.");
      const newId = rid(C, "New moon landing.");
      const op = { kind: "supersede" as const, older: oldId, newer: newId, validTo: "2023-02-01T00:00:00.000Z" };
      assert.deepEqual(await applyConsolidation(store, { tenant: C, ops: [op], settled: [] }), {
        superseded: 1,
        merged: 0,
        linked: 0,
        skipped: 0,
      });
      // Another tenant's consolidation cannot touch these records.
      assert.equal((await applyConsolidation(store, { tenant: A, ops: [op], settled: [] })).skipped, 1);
      await store.writeBatch(moon);
      const [rec] = await store.getRecords(C, [oldId]);
      assert.equal(rec?.valid.supersededBy, newId);
      assert.equal(rec?.valid.to, "2023-02-01T00:00:00.000Z");
      // Current-only reads skip it; includeSuperseded lists it.
      const current = await store.listRecords(C, { conversation: "c9", limit: 10 });
      assert.deepEqual(ids(current.records), [newId]);
      const all = await store.listRecords(C, { conversation: "c9", limit: 10, includeSuperseded: true });
      assert.deepEqual(ids(all.records), [oldId, newId]);
      assert.deepEqual(ids(await store.searchRecordsLexical(C, "moon news", 5)), [newId]);
      assert.deepEqual(ids(await store.recordsByEntities(C, ["moon"], 5)), [newId]);
      assert.deepEqual(ids(await store.recordsByTopics(C, ["space"], 5)), [newId]);
      // Counted like the routes read: the current version only, or the one valid as of a moment.
      assert.equal(await store.countRecordsByKey(C, "entity", "moon", 5), 1);
      assert.equal(await store.countRecordsByKey(C, "topic", "space", 5, "c9"), 1);
      const january = Date.parse("2023-01-15T00:00:00.000Z");
      assert.deepEqual(ids(await store.recordsByEntities(C, ["moon"], 5, undefined, january)), [oldId]);
      assert.equal(await store.countRecordsByKey(C, "entity", "moon", 5, undefined, january), 1);
      assert.equal(await store.countRecordsByKey(C, "topic", "space", 5, "c9", Date.parse("2022-12-01")), 0);
      assert.equal(await store.countRecords(C, "c9"), 2);
      await store.deleteTenant(C);
      assert.equal(await store.countRecords(C), 0);
    });

    it("refuses a batch whose records or segment belong to another tenant", async () => {
      const b = batchesFor(A)[1] as IndexBatch;
      await assert.rejects(store.writeBatch({ ...b, tenant: B }), /tenant/);
      const wrongSegment = { ...b, segment: { ...b.segment, tenant: B } };
      await assert.rejects(store.writeBatch(wrongSegment), /tenant/);
    });

    it("getRecords returns the order asked, skipping unknown and other tenants' ids", async () => {
      const got = await store.getRecords(A, [R3(A), "nope", R1(B), R1(A), R3(A)]);
      assert.deepEqual(ids(got), [R3(A), R1(A)]);
      assert.equal(got[1]?.text, "Caroline moved to Paris in May 2023.");
      assert.deepEqual(got[1]?.entities[0], CAROLINE);
      assert.deepEqual(got[1], (batchesFor(A)[0] as IndexBatch).records[0]);
      assert.deepEqual(await store.getRecords(A, []), []);
    });

    it("listRecords filters by conversation, entity (name or alias), type and time", async () => {
      const page = async (q: RecordQuery) => ids((await store.listRecords(A, q)).records);
      // Stable order: said_at, then id.
      assert.deepEqual(await page({ limit: 10 }), [R2(A), R3(A), R1(A), R4(A)]);
      assert.deepEqual(await page({ conversation: "c2", limit: 10 }), [R4(A)]);
      assert.deepEqual(await page({ entity: "caroline", limit: 10 }), [R3(A), R1(A)]);
      assert.deepEqual(await page({ entity: "CARO", limit: 10 }), [R3(A), R1(A)]);
      assert.deepEqual(await page({ entity: "paris", limit: 10 }), [R1(A), R4(A)]);
      assert.deepEqual(await page({ type: "plan", limit: 10 }), [R4(A)]);
      // May 2023 (r1's month) overlaps 2023-05-07 (r2's day); r3 has no time: said 2023-05-08.
      const may7 = isoSpan("2023-05-07");
      assert.deepEqual(await page({ timeFrom: may7.from, timeTo: may7.to, limit: 10 }), [R2(A), R1(A)]);
      const may8 = isoSpan("2023-05-08");
      assert.deepEqual(await page({ timeFrom: may8.from, timeTo: may8.to, limit: 10 }), [R3(A), R1(A)]);
      const july = isoSpan("2023-07-10");
      assert.deepEqual(await page({ timeFrom: july.from, limit: 10 }), [R4(A)]);
      assert.deepEqual(await page({ timeTo: isoSpan("2023-04").to, limit: 10 }), []);
      assert.deepEqual(await page({ limit: 0 }), []);
    });

    it("listRecords pages with an opaque cursor", async () => {
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const p = await store.listRecords(B, { limit: 2, ...(cursor ? { cursor } : {}) });
        seen.push(...ids(p.records));
        cursor = p.nextCursor;
        pages++;
        assert.ok(pages < 10);
      } while (cursor);
      assert.equal(pages, 3);
      assert.deepEqual(seen, [R2(B), R3(B), R1(B), R4(B), R5(B)]);
      // The cursor is the reference shape: (said_at, id) of the last row, signed for the tenant
      // (the contract's stores are built without a secret: the codec's default one).
      const codec = new CursorCodec();
      const first = await store.listRecords(B, { limit: 2 });
      assert.equal(first.nextCursor, codec.encode(B, { saidAt: Date.parse("2023-05-08T09:01:00.000Z"), id: R3(B) }));
      // Forged, tampered or another tenant's cursors are a ValidationError naming `cursor` (400, not 500).
      const forged = codec.encode(B, { saidAt: 0, id: "" }).replace(/\.[^.]*$/, ".AAAAAAAAAAAAAAAAAAAAAA");
      const otherTenant = codec.encode(A, { saidAt: 0, id: "" });
      for (const cursor of ["!!not-a-cursor", "e30", forged, otherTenant, `${first.nextCursor}x`]) {
        await assert.rejects(
          store.listRecords(B, { limit: 2, cursor }),
          (err: unknown) => err instanceof ValidationError && err.issues[0]?.path === "cursor",
          cursor,
        );
      }
      // A cursor past the end gives an empty last page without a next cursor.
      const end = await store.listRecords(B, { limit: 2, cursor: codec.encode(B, { saidAt: Date.now(), id: "" }) });
      assert.deepEqual(end, { records: [] });
    });

    it("searchRecordsLexical ranks by relevance with a safe query", async () => {
      const hits = await store.searchRecordsLexical(A, "Where did Caroline move to?", 5);
      assert.equal(hits[0]?.id, R1(A));
      assert.ok((hits[0]?.score ?? 0) > 0);
      for (let i = 1; i < hits.length; i++) assert.ok((hits[i - 1]?.score ?? 0) >= (hits[i]?.score ?? 0));
      // Stemming: "painting" finds "painted".
      assert.deepEqual(ids(await store.searchRecordsLexical(A, "painting", 5)), [R2(A)]);
      assert.deepEqual(ids(await store.searchRecordsLexical(A, "paris", 5, "c2")), [R4(A)]);
      assert.deepEqual(ids(await store.searchRecordsLexical(A, "paris", 1)).length, 1);
      // Query syntax in user text neither throws nor leaks.
      assert.ok((await store.searchRecordsLexical(A, 'paris" OR NEAR(tea* AND) -coffee ^:', 5)).length > 0);
      assert.ok((await store.searchRecordsLexical(A, "tea~ coffee\\ title:x [a TO z] {b} || && !", 5)).length > 0);
      assert.deepEqual(await store.searchRecordsLexical(A, "what did she do?", 5), []);
      assert.deepEqual(await store.searchRecordsLexical(A, "", 5), []);
      assert.deepEqual(await store.searchRecordsLexical(A, "paris", 0), []);
    });

    it("lexical scores are the shared BM25 over the scope's current records, in every store", async () => {
      const current = (await store.listRecords(A, { limit: 200 })).records.filter((r) => !r.valid.supersededBy);
      const lex = current.map((r) => ({ id: r.id, time: Date.parse(r.source.saidAt), ...lexicalText(r.text) }));
      const scope = { items: lex.length, totalLength: lex.reduce((n, r) => n + r.length, 0) };
      for (const question of ["Where did Caroline move to? Paris!", "painting sunrise tea", "coffee plans trip"]) {
        const terms = queryTerms(question);
        const hits = lex.filter((r) => r.lex.split(" ").some((w) => terms.includes(w)));
        assert.deepEqual(await store.searchRecordsLexical(A, question, 10), rankBm25(terms, hits, scope, 10), question);
      }
    });

    it("searchTurnsLexical returns turn row ids", async () => {
      const hits = await store.searchTurnsLexical(A, "sunrise painted", 5);
      assert.deepEqual(ids(hits), [turnRowId("c1", "t2")]);
      const paris = await store.searchTurnsLexical(A, "Paris", 5);
      assert.deepEqual(ids(paris).sort(), [turnRowId("c1", "t1"), turnRowId("c2", "t1")].sort());
      assert.deepEqual(ids(await store.searchTurnsLexical(A, "Paris", 5, "c2")), [turnRowId("c2", "t1")]);
    });

    it("recordsByEntities and recordsByTopics score by distinct matches", async () => {
      const e = await store.recordsByEntities(A, ["caroline", "PARIS", "Caro"], 10);
      assert.deepEqual(e[0], { id: R1(A), score: 2 });
      // Ties (score 1) broken by newer said_at: r4 (06-10) then r3 (05-08).
      assert.deepEqual(ids(e.slice(1)), [R4(A), R3(A)]);
      assert.deepEqual(ids(await store.recordsByEntities(A, ["paris"], 10, "c2")), [R4(A)]);
      assert.deepEqual(await store.recordsByEntities(A, [], 10), []);
      const t = await store.recordsByTopics(A, ["TRAVEL", "moving"], 10);
      assert.deepEqual(t, [
        { id: R1(A), score: 2 },
        { id: R4(A), score: 1 },
      ]);
      // "Travel" (r1) and "travel" (r4) are one topic key; the tie goes to the newer r4.
      assert.deepEqual(ids(await store.recordsByTopics(A, ["travel"], 1)), [R4(A)]);
    });

    it("recordsBy* cut at k: a frequent key's newest current records (ties by id), several keys first", async () => {
      // 12 records share the topic "daily" and the entity Jon, said in pairs on the same day (ties);
      // the two oldest also hold the topic "rare" and the entity Oslo. The newest one is superseded.
      const specs = Array.from({ length: 12 }, (_, i) => ({
        text: `Daily note number ${i}.`,
        type: "fact" as const,
        entities: i < 2 ? ["Jon", "Oslo"] : ["Jon"],
        topics: i < 2 ? ["daily", "rare"] : ["daily"],
        saidAt: `2023-03-${String(10 + Math.floor(i / 2)).padStart(2, "0")}T10:00:00.000Z`,
      }));
      await store.writeBatch(simpleBatch(C, "c7", specs));
      const order = specs
        .map((s) => ({ id: rid(C, s.text), saidAt: s.saidAt }))
        .sort((a, b) => b.saidAt.localeCompare(a.saidAt) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        .map((r) => r.id);
      const [newest, ...current] = order as [string, ...string[]];
      const op = {
        kind: "supersede" as const,
        older: newest,
        newer: current[0] as string,
        validTo: "2023-04-01T00:00:00.000Z",
      };
      assert.equal((await applyConsolidation(store, { tenant: C, ops: [op], settled: [] })).superseded, 1);
      const both = [rid(C, "Daily note number 0."), rid(C, "Daily note number 1.")].sort();
      for (const k of [1, 2, 3, 5, 20]) {
        const one = current.slice(0, k).map((id) => ({ id, score: 1 }));
        assert.deepEqual(await store.recordsByTopics(C, ["daily"], k), one, `topic k ${k}`);
        assert.deepEqual(await store.recordsByEntities(C, ["jon"], k), one, `entity k ${k}`);
        // Records matching both keys rank first however old; then the newest single matches.
        const two = [
          ...both.map((id) => ({ id, score: 2 })),
          ...current.filter((id) => !both.includes(id)).map((id) => ({ id, score: 1 })),
        ].slice(0, k);
        assert.deepEqual(await store.recordsByTopics(C, ["daily", "RARE"], k), two, `topics k ${k}`);
        assert.deepEqual(await store.recordsByEntities(C, ["Oslo", "Jon"], k), two, `entities k ${k}`);
      }
      // A batch of lookups (recordsByTopicsMany, where the store has it) answers each one as
      // recordsByTopics does: the cut at each k, ties, superseded versions left out, no keys.
      if (store.recordsByTopicsMany) {
        const lookups = [
          ...[1, 2, 3, 5, 20].map((k) => ({ topics: ["daily"], k })),
          ...[1, 3, 20].map((k) => ({ topics: ["daily", "RARE"], k })),
          { topics: ["nothing-like-it"], k: 5 },
          { topics: [], k: 5 },
          { topics: ["daily"], k: 0 },
        ];
        const expected = await Promise.all(lookups.map((l) => store.recordsByTopics(C, l.topics, l.k)));
        assert.deepEqual(await store.recordsByTopicsMany(C, lookups), expected);
        assert.deepEqual(await store.recordsByTopicsMany(C, []), []);
      }
      // As of a moment before the supersede, the newest version is the first again.
      const march = Date.parse("2023-03-20T00:00:00.000Z");
      assert.deepEqual(ids(await store.recordsByTopics(C, ["daily"], 2, undefined, march)), order.slice(0, 2));
      assert.deepEqual(ids(await store.recordsByEntities(C, ["Jon"], 2, "c7", march)), order.slice(0, 2));
      await store.deleteTenant(C);
    });

    it("countRecordsByKey counts one key's records up to the cap, as many as recordsBy* returns", async () => {
      assert.equal(await store.countRecordsByKey(A, "entity", "CAROLINE", 10), 2);
      assert.equal(await store.countRecordsByKey(A, "entity", "caro", 10), 2);
      assert.equal(await store.countRecordsByKey(A, "entity", "Paris", 10, "c2"), 1);
      assert.equal(await store.countRecordsByKey(A, "topic", "Travel", 10), 2);
      assert.equal(await store.countRecordsByKey(A, "topic", "travel", 1), 1);
      assert.equal(await store.countRecordsByKey(A, "topic", "work", 10), 0);
      assert.equal(await store.countRecordsByKey(B, "topic", "work", 10), 1);
      assert.equal(await store.countRecordsByKey(A, "entity", "  ", 10), 0);
      assert.equal(await store.countRecordsByKey(A, "entity", "caroline", 0), 0);
      const keys = { entity: ["Caroline", "Caro", "Paris", "Melanie", "Bob"], topic: ["travel", "moving", "painting"] };
      for (const [index, find] of [
        ["entity", store.recordsByEntities.bind(store)],
        ["topic", store.recordsByTopics.bind(store)],
      ] as const)
        for (const key of keys[index])
          for (const conversation of [undefined, "c1", "c2"])
            for (const cap of [1, 2, 3])
              assert.equal(
                await store.countRecordsByKey(A, index, key, cap, conversation),
                (await find(A, [key], cap, conversation)).length,
                `${index} ${key} ${conversation} cap ${cap}`,
              );
    });

    it("recordsInTime returns overlapping records, tighter spans first", async () => {
      const may7 = isoSpan("2023-05-07");
      const hits = await store.recordsInTime(A, may7, 10);
      assert.deepEqual(ids(hits), [R2(A), R1(A)]);
      assert.ok((hits[0]?.score ?? 0) > (hits[1]?.score ?? 0));
      // score = 1 / (1 + span in days) for a record's own time.
      assert.ok(Math.abs((hits[0]?.score ?? 0) - 1 / (1 + (may7.to - may7.from) / 86_400_000)) < 1e-9);
      const june = isoSpan("2023-06");
      assert.deepEqual(ids(await store.recordsInTime(A, june, 10)), []);
      const summer = { from: isoSpan("2023-05").from, to: isoSpan("2023-07").to };
      assert.deepEqual(ids(await store.recordsInTime(A, summer, 10, "c2")), [R4(A)]);
      assert.deepEqual(await store.recordsInTime(A, { from: 10, to: 5 }, 10), []);
      // r3 has no time of its own: it is found by its said-at, at half weight.
      const may8 = isoSpan("2023-05-08");
      const said = await store.recordsInTime(A, may8, 10);
      assert.deepEqual(ids(said), [R3(A), R1(A)]);
    });

    it("eventFrameNeighbours scores by shared frames, excluding the given records", async () => {
      assert.deepEqual(await store.eventFrameNeighbours(A, [R1(A)], 10), [
        { id: R2(A), score: 2 },
        { id: R3(A), score: 1 },
      ]);
      assert.deepEqual(ids(await store.eventFrameNeighbours(A, [R1(A), R2(A)], 10)), [R3(A)]);
      assert.deepEqual(await store.eventFrameNeighbours(A, [R4(A)], 10), []);
      assert.deepEqual(await store.eventFrameNeighbours(A, [], 10), []);
    });

    it("getTurns and getTurnsByRowIds return stored turns in the order asked", async () => {
      const turns = await store.getTurns(A, [
        { conversation: "c2", turnId: "t1" },
        { conversation: "c1", turnId: "t3" },
        { conversation: "c1", turnId: "zz" },
        { conversation: "c2", turnId: "t1" },
      ]);
      assert.deepEqual(
        turns.map((t) => [t.conversation, t.turnId, t.segmentId, t.tenant]),
        [
          ["c2", "t1", "seg-2", A],
          ["c1", "t3", "seg-1", A],
        ],
      );
      assert.deepEqual(turns[1], {
        tenant: A,
        conversation: "c1",
        segmentId: "seg-1",
        turnId: "t3",
        speaker: "Caroline",
        role: "user",
        text: "I really prefer tea, never coffee.",
        compressed: "i really prefer tea, never coffee.",
        timestamp: "2023-05-08T09:01:00.000Z",
        sessionId: "s1",
      });
      const byRow = await getTurnsByRowIds(store, A, [turnRowId("c1", "t2"), "garbage", turnRowId("c1", "t1")]);
      assert.deepEqual(
        byRow.map((t) => t.turnId),
        ["t2", "t1"],
      );
    });

    it("writeTurns stores raw turns ahead of their segment; the segment's writeBatch then names it", async () => {
      // Two tenants of this run: D gets the turns on arrival and then the segment, E the segment only.
      const D = `${prefix}D`;
      const E = `${prefix}E`;
      const t1 = makeTurn("t1", "Ana adopted a greyhound called Pepper.", "2023-07-01T10:00:00.000Z");
      const t2 = makeTurn("t2", "Pepper sleeps all day on the sofa.", "2023-07-01T10:01:00.000Z");
      const keys = [
        { conversation: "c1", turnId: "t1" },
        { conversation: "c1", turnId: "t2" },
      ];
      const batchOf = (tenant: string): IndexBatch => ({
        tenant,
        conversation: "c1",
        segment: makeSegment(tenant, "c1", "seg-d", [t1, t2]),
        records: [],
        eventFrames: [],
      });
      try {
        await store.writeTurns(D, "c1", [t1, t2]);
        await store.writeTurns(D, "c1", [t1]);
        assert.equal(await store.countSegments(D), 0);
        assert.deepEqual(ids(await store.searchTurnsLexical(D, "greyhound", 10)), [turnRowId("c1", "t1")]);
        assert.deepEqual(
          (await store.getTurns(D, keys)).map((t) => [t.turnId, t.segmentId, t.text]),
          [
            ["t1", OPEN_SEGMENT_ID, t1.text],
            ["t2", OPEN_SEGMENT_ID, t2.text],
          ],
        );
        await store.writeBatch(batchOf(D));
        await store.writeBatch(batchOf(E));
        assert.deepEqual(
          (await store.getTurns(D, keys)).map((t) => t.segmentId),
          ["seg-d", "seg-d"],
        );
        assert.deepEqual(await fx.counts(D), await fx.counts(E), "the same rows as a segment-only write");
        await assertCountsAgreeWithRows(store, D, ["c1"], ["greyhound Pepper", "sofa all day"]);
        assert.deepEqual(ids(await store.searchTurnsLexical(D, "greyhound", 10)), [turnRowId("c1", "t1")]);
        assert.deepEqual(
          (await eraseConversation(store, D, "c1")).turns.sort(),
          [turnRowId("c1", "t1"), turnRowId("c1", "t2")].sort(),
        );
        await eraseConversation(store, E, "c1");
        assert.deepEqual(await fx.counts(D), await fx.counts(E), "erased alike");
        assert.deepEqual(await store.getTurns(D, keys), []);
        assert.deepEqual(await store.searchTurnsLexical(D, "greyhound", 10), []);
      } finally {
        for (const t of [D, E]) await store.deleteTenant(t).catch(() => undefined);
      }
    });

    it("a tenant's share: its conversations listed, then what is left deleted only once no record is", async () => {
      const D = `${prefix}shareD`;
      try {
        for (const b of batchesFor(D, true)) await store.writeBatch(b);
        assert.deepEqual(await store.tenantConversations(D), ["c1", "c2", "c3"]);
        const before = await fx.counts(D);
        assert.equal(await store.deleteTenantIfEmpty(D), false, "it holds records");
        assert.deepEqual(await fx.counts(D), before, "nothing deleted");
        for (const c of ["c1", "c2", "c3"]) await eraseConversation(store, D, c);
        assert.deepEqual(await store.tenantConversations(D), []);
        assert.equal(await store.deleteTenantIfEmpty(D), true);
        assert.ok(allZero(await fx.counts(D)), JSON.stringify(await fx.counts(D)));
        assert.deepEqual(await store.knownEntities(D), []);
        // And the tenant can write again afterwards.
        for (const b of batchesFor(D)) await store.writeBatch(b);
        assert.equal(await store.countRecords(D), 4);
      } finally {
        await store.deleteTenant(D).catch(() => undefined);
      }
    });

    it("eraseTenant: each conversation in steps, then what is left; every deleted record named", async () => {
      const D = `${prefix}stepD`;
      const E = `${prefix}stepE`;
      try {
        for (const t of [D, E]) for (const b of batchesFor(t, true)) await store.writeBatch(b);
        // Raw turns of a conversation with no segment yet: no conversation step finds them.
        await store.writeTurns(D, "c9", [makeTurn("t1", "Ana adopted a greyhound.", "2023-07-01T10:00:00.000Z")]);
        const eBefore = await fx.counts(E);
        const named = (await store.listRecords(D, { includeSuperseded: true, limit: 1000 })).records.map((r) => r.id);
        assert.ok(named.length > 0);
        // One record or turn per transaction.
        assert.deepEqual((await eraseTenant(store, D, 1)).sort(), [...named].sort());
        assert.ok(allZero(await fx.counts(D)), JSON.stringify(await fx.counts(D)));
        assert.deepEqual(await store.knownEntities(D), []);
        assert.deepEqual(await fx.counts(E), eBefore, "the other tenant untouched");
        assert.deepEqual(await eraseTenant(store, D), [], "nothing left to erase");
      } finally {
        for (const t of [D, E]) await store.deleteTenant(t).catch(() => undefined);
      }
    });

    it("deleteRawTurns erases raw turns alone: of a conversation, then of the tenant; records stay", async () => {
      // D gets turns in c1 and c2, E the same c2 turn only: once D's c1 turns are erased, the two
      // hold the same rows and their lexical statistics (the BM25 scores) agree.
      const D = `${prefix}rawD`;
      const E = `${prefix}rawE`;
      const t1 = makeTurn("t1", "Ana adopted a greyhound called Pepper.", "2023-07-01T10:00:00.000Z");
      const t2 = makeTurn("t2", "Pepper sleeps all day on the sofa.", "2023-07-01T10:01:00.000Z");
      const t3 = makeTurn("t3", "The greyhound races on Sundays.", "2023-07-02T10:00:00.000Z");
      const records = [
        {
          text: "Ana adopted a greyhound.",
          type: "fact" as const,
          entities: ["Ana"],
          topics: ["pets"],
          saidAt: "2023-07-01T10:00:00.000Z",
        },
      ];
      try {
        for (const t of [D, E]) {
          await store.writeBatch(simpleBatch(t, "c3", records));
          await store.writeTurns(t, "c2", [t3]);
        }
        await store.writeTurns(D, "c1", [t1, t2]);
        // Read before the delete: a store that keeps a scope's statistics must see that they changed.
        assert.ok((await store.searchTurnsLexical(D, "Pepper sofa", 10)).length > 0);
        assert.equal(await store.deleteRawTurns(D, "c1"), 2);
        assert.deepEqual(await fx.counts(D), await fx.counts(E), "as if c1's turns had never been written");
        for (const q of ["greyhound", "Pepper sofa", "races"])
          assert.deepEqual(await store.searchTurnsLexical(D, q, 10), await store.searchTurnsLexical(E, q, 10), q);
        assert.deepEqual(await store.getTurns(D, [{ conversation: "c1", turnId: "t1" }]), []);
        assert.equal((await store.getTurns(D, [{ conversation: "c2", turnId: "t3" }])).length, 1, "c2's turn stays");
        assert.equal(await store.deleteRawTurns(D, "c1"), 0, "nothing left there");

        // The tenant: every raw turn, the segment's included; records and segments stay.
        assert.equal(await store.deleteRawTurns(D), 2);
        assert.equal(await store.deleteRawTurns(E), 2);
        assert.deepEqual(await fx.counts(D), await fx.counts(E), "erased alike");
        assert.deepEqual(await store.searchTurnsLexical(D, "greyhound", 10), []);
        assert.deepEqual(await store.getTurns(D, [{ conversation: "c3", turnId: "t1" }]), []);
        assert.equal(await store.countRecords(D), 1);
        assert.equal(await store.countSegments(D), 1);
        assert.deepEqual(ids(await store.searchRecordsLexical(D, "greyhound", 10)), [
          rid(D, "Ana adopted a greyhound."),
        ]);
        assert.equal(await store.deleteRawTurns(`${prefix}nobody`), 0);
      } finally {
        for (const t of [D, E]) await store.deleteTenant(t).catch(() => undefined);
      }
    });

    it("knownEntities / knownTopics list distinct display names", async () => {
      assert.deepEqual(await store.knownEntities(A), ["Caroline", "Melanie", "Paris"]);
      assert.deepEqual(await store.knownEntities(A, "c2"), ["Melanie", "Paris"]);
      assert.deepEqual(await store.knownTopics(A, "c1"), ["Travel", "drinks", "moving", "painting"]);
      assert.deepEqual(await store.knownTopics(A), ["Travel", "drinks", "moving", "painting", "travel"]);
    });

    it("counts records and segments per tenant and conversation", async () => {
      assert.equal(await store.countRecords(B), 5);
      assert.equal(await store.countRecords(B, "c1"), 3);
      assert.equal(await store.countSegments(B), 3);
      assert.equal(await store.countSegments(B, "c3"), 1);
      assert.equal(await store.countRecords(NOBODY), 0);
      assert.equal(await store.countSegments(NOBODY), 0);
    });

    it("update candidates and dead letters are idempotent", async () => {
      const c: UpdateCandidate = {
        tenant: A,
        recordId: R1(A),
        candidateId: R4(A),
        similarity: 0.8,
        sharedEntities: ["Paris"],
        sharedTopics: ["travel"],
        reason: "similarity",
      };
      await store.putUpdateCandidates([c, { ...c, candidateId: R3(A) }]);
      await store.putUpdateCandidates([c]);
      await store.putUpdateCandidates([]);
      assert.equal(await store.countPendingCandidates(A), 2);
      assert.equal(await store.countPendingCandidates(B), 0);
      assert.ok((await store.countPendingCandidates()) >= 2);
      assert.deepEqual(
        await store.pendingUpdateCandidates(A, 10),
        [{ ...c, candidateId: R3(A) }, c].sort((x, y) => (x.candidateId < y.candidateId ? -1 : 1)),
      );
      assert.deepEqual(await store.pendingUpdateCandidates(B, 10), []);
      assert.ok((await store.tenantsWithPendingCandidates()).includes(A));
      assert.ok(!(await store.tenantsWithPendingCandidates()).includes(B));
      const letter = { stage: "encoder", key: `${A}/c1`, error: "boom", payload: "{}", at: "2024-01-01T00:00:00.000Z" };
      await store.putDeadLetter(letter);
      await store.putDeadLetter(letter);
      await store.putDeadLetter({ ...letter, key: `${B}/c1`, at: "2024-01-02T00:00:00.000Z" });
      const letters = await ours();
      assert.deepEqual(
        letters.map((l) => l.key),
        [`${B}/c1`, `${A}/c1`],
      );
      assert.deepEqual(letters[1], letter);
      assert.equal((await store.listDeadLetters(1)).length, 1);
      assert.deepEqual(await store.listDeadLetters(0), []);
    });

    it("isolates tenants on every read method", async () => {
      const bOnly = new Set([R1(B), R2(B), R3(B), R4(B), R5(B)]);
      const notB = (xs: readonly { id: string }[]) =>
        assert.ok(
          xs.every((x) => !bOnly.has(x.id)),
          JSON.stringify(xs),
        );
      notB(await store.getRecords(A, [...bOnly]));
      assert.deepEqual(await store.getRecords(A, [...bOnly]), []);
      notB((await store.listRecords(A, { limit: 100, includeSuperseded: true })).records);
      assert.deepEqual((await store.listRecords(A, { conversation: "c3", limit: 100 })).records, []);
      notB(await store.searchRecordsLexical(A, "Caroline Melanie Paris tea sunrise Bob Zyxcorp", 100));
      assert.deepEqual(await store.searchRecordsLexical(A, "Zyxcorp", 10), []);
      assert.deepEqual(await store.searchTurnsLexical(A, "Zyxcorp", 10), []);
      const turnHitsB = await store.searchTurnsLexical(B, "Zyxcorp", 10);
      assert.deepEqual(ids(turnHitsB), [turnRowId("c3", "t9")]);
      assert.deepEqual(await getTurnsByRowIds(store, A, [turnRowId("c3", "t9")]), []);
      assert.ok((await store.getTurns(A, [{ conversation: "c1", turnId: "t1" }])).every((t) => t.tenant === A));
      notB(await store.recordsByEntities(A, ["Caroline", "Melanie", "Paris", "Bob"], 100));
      assert.deepEqual(await store.recordsByEntities(A, ["Bob"], 10), []);
      notB(await store.recordsByTopics(A, ["travel", "moving", "painting", "drinks", "work"], 100));
      notB(await store.recordsInTime(A, { from: 0, to: Date.UTC(2030, 0, 1) }, 100));
      assert.deepEqual(await store.eventFrameNeighbours(A, [R1(B)], 10), []);
      notB(await store.eventFrameNeighbours(A, [R1(A)], 10));
      assert.ok(!(await store.knownEntities(A)).includes("Bob"));
      assert.ok(!(await store.knownTopics(A)).includes("work"));
      assert.equal(await store.countRecords(A, "c3"), 0);
      assert.equal(await store.countSegments(A, "c3"), 0);
      assert.deepEqual(await store.relationsOf(A, [...bOnly]), []);
      assert.deepEqual(await walkVersionGraph(store, A, R1(B)), { records: [], relations: [] });
      assert.deepEqual(await store.pendingUpdateCandidates(B, 10), []);
    });

    it("deleteTenant removes everything of that tenant and nothing else", async () => {
      const aBefore = await fx.counts(A);
      const bIds = (await store.listRecords(B, { includeSuperseded: true, limit: 1000 })).records.map((r) => r.id);
      assert.ok(bIds.length > 0);
      // It names every record it deleted: the update queue's tombstones are keyed by those ids.
      assert.deepEqual((await store.deleteTenant(B)).sort(), [...bIds].sort());
      assert.ok(allZero(await fx.counts(B)), JSON.stringify(await fx.counts(B)));
      assert.deepEqual(await fx.counts(A), aBefore);
      assert.equal(await store.countRecords(B), 0);
      assert.deepEqual(await store.searchTurnsLexical(B, "Zyxcorp", 10), []);
      assert.deepEqual(await store.searchRecordsLexical(B, "Zyxcorp", 10), []);
      assert.deepEqual(
        (await ours()).map((l) => l.key),
        [`${A}/c1`],
      );
      assert.equal(await store.countRecords(A), 4);
      assert.equal(await store.countPendingCandidates(A), 2);
      // The tenant can write again afterwards.
      for (const b of batchesFor(B, true)) await store.writeBatch(b);
      assert.equal(await store.countRecords(B), 5);
      assert.deepEqual(ids(await store.searchTurnsLexical(B, "Zyxcorp", 10)), [turnRowId("c3", "t9")]);
    });

    // -------------------------------------------------------------------------------------------
    // Consolidation (tenant C): k1 holds old/new/ref/berlin, k2 a duplicate, k3 an older fact.
    // applyConsolidation and eraseConversation are the one implementation of the rules
    // (services/consolidator/apply.ts, erasure.ts), run here over each store's transact.

    describe("consolidation", () => {
      const OLD = () => rid(C, "Jon works at Acme.");
      const NEW = () => rid(C, "Jon works at Globex.");
      const REF = () => rid(C, "Jon leads the Globex data team.");
      const BERLIN = () => rid(C, "Jon lives in Berlin.");
      const DUP = () => rid(C, "Jon is employed at Globex.");
      const OSLO = () => rid(C, "Jon lives in Oslo.");
      const cand = (recordId: string, candidateId: string): UpdateCandidate => ({
        tenant: C,
        recordId,
        candidateId,
        similarity: 0.9,
        sharedEntities: ["Jon"],
        sharedTopics: ["work"],
        reason: "entity-topic",
      });
      const current = async (id: string): Promise<boolean> =>
        (await store.getRecords(C, [id]))[0]?.valid.supersededBy === undefined;

      // Whatever a store keeps counted follows every step (supersede, merge, rollback, erasure).
      afterEach(async () =>
        assertCountsAgreeWithRows(
          store,
          C,
          ["k1", "k2", "k3"],
          ["Jon works at Globex", "lives in Berlin or Oslo", "data team Acme employed", "Jon"],
        ),
      );

      before(async () => {
        await store.deleteTenant(C);
        const fact = { type: "fact" as const, topics: ["work"] };
        await store.writeBatch(
          simpleBatch(C, "k1", [
            { ...fact, text: "Jon works at Acme.", entities: ["Jon", "Acme"], saidAt: "2023-01-01T00:00:00.000Z" },
            { ...fact, text: "Jon works at Globex.", entities: ["Jon", "Globex"], saidAt: "2023-03-01T00:00:00.000Z" },
            {
              ...fact,
              text: "Jon leads the Globex data team.",
              entities: ["Jon", "Globex"],
              saidAt: "2023-03-05T00:00:00.000Z",
            },
            {
              type: "fact",
              topics: ["home"],
              text: "Jon lives in Berlin.",
              entities: ["Jon", "Berlin"],
              saidAt: "2023-03-03T00:00:00.000Z",
            },
          ]),
        );
        await store.writeBatch(
          simpleBatch(C, "k2", [
            {
              ...fact,
              text: "Jon is employed at Globex.",
              entities: ["Jon", "Globex"],
              saidAt: "2023-03-02T00:00:00.000Z",
            },
          ]),
        );
        await store.writeBatch(
          simpleBatch(C, "k3", [
            {
              type: "fact",
              topics: ["home"],
              text: "Jon lives in Oslo.",
              entities: ["Jon", "Oslo"],
              saidAt: "2023-01-05T00:00:00.000Z",
            },
          ]),
        );
        await store.putUpdateCandidates([
          cand(NEW(), OLD()),
          cand(NEW(), DUP()),
          cand(DUP(), NEW()),
          cand(REF(), NEW()),
          cand(BERLIN(), OSLO()),
        ]);
      });

      it("lists pending candidates whole records at a time, oldest record first", async () => {
        assert.equal(await store.countPendingCandidates(C), 5);
        assert.ok((await store.tenantsWithPendingCandidates()).includes(C));
        const sorted = <T>(xs: T[]): T[] => [...xs].sort();
        // Records by said-at: NEW (03-01), DUP (03-02), BERLIN (03-03), REF (03-05).
        const first = await store.pendingUpdateCandidates(C, 1);
        assert.deepEqual(
          first.map((c) => c.recordId),
          [NEW(), NEW()],
        );
        assert.deepEqual(
          first.map((c) => c.candidateId),
          sorted([OLD(), DUP()]),
        );
        assert.deepEqual(first[0], cand(NEW(), first[0]?.candidateId ?? ""));
        const all = await store.pendingUpdateCandidates(C, 10);
        assert.deepEqual(
          all.map((c) => c.recordId),
          [NEW(), NEW(), DUP(), BERLIN(), REF()],
        );
        assert.deepEqual(await store.pendingUpdateCandidates(C, 0), []);
      });

      it("rolls everything back when the change fails before commit", async () => {
        await assert.rejects(
          applyConsolidation(
            store,
            {
              tenant: C,
              ops: [{ kind: "supersede", older: OLD(), newer: NEW(), validTo: "2023-03-01T00:00:00.000Z" }],
              settled: [{ recordId: NEW(), candidateId: OLD(), decision: "contradiction" }],
            },
            {
              beforeCommit: () => {
                throw new Error("crash before commit");
              },
            },
          ),
          /crash before commit/,
        );
        assert.ok(await current(OLD()));
        assert.deepEqual(await store.relationsOf(C, [OLD()]), []);
        assert.equal(await store.countPendingCandidates(C), 5);
      });

      it("supersede: the older record gets valid.to and superseded_by, with a SUPERSEDES edge", async () => {
        const applied = await applyConsolidation(store, {
          tenant: C,
          ops: [
            { kind: "supersede", older: OLD(), newer: NEW(), validTo: "2023-03-01T00:00:00.000Z", reason: "new job" },
            { kind: "supersede", older: OSLO(), newer: BERLIN(), validTo: "2023-03-03T00:00:00.000Z" },
            { kind: "supersede", older: OLD(), newer: "unknown", validTo: "2023-03-01T00:00:00.000Z" },
            { kind: "supersede", older: NEW(), newer: NEW(), validTo: "2023-03-01T00:00:00.000Z" },
          ],
          settled: [
            { recordId: NEW(), candidateId: OLD(), decision: "contradiction" },
            { recordId: BERLIN(), candidateId: OSLO(), decision: "contradiction" },
          ],
        });
        assert.deepEqual(applied, { superseded: 2, merged: 0, linked: 0, skipped: 2 });
        const [old] = await store.getRecords(C, [OLD()]);
        assert.deepEqual(old?.valid, {
          from: "2023-01-01T00:00:00.000Z",
          to: "2023-03-01T00:00:00.000Z",
          supersededBy: NEW(),
        });
        assert.ok(await current(NEW()));
        assert.deepEqual(await store.relationsOf(C, [OLD()]), [
          { from: NEW(), to: OLD(), relation: "SUPERSEDES", at: "2023-03-01T00:00:00.000Z", reason: "new job" },
        ]);
        assert.equal(await store.countPendingCandidates(C), 3);
        const listed = ids((await store.listRecords(C, { conversation: "k1", limit: 10 })).records);
        assert.ok(!listed.includes(OLD()) && listed.includes(NEW()));
        assert.deepEqual(ids(await store.recordsByEntities(C, ["Acme"], 10)), []);
        // Already superseded: the same op again is skipped, and settling again keeps it settled.
        const again = await applyConsolidation(store, {
          tenant: C,
          ops: [{ kind: "supersede", older: OLD(), newer: NEW(), validTo: "2023-04-01T00:00:00.000Z" }],
          settled: [],
        });
        assert.deepEqual(again, { superseded: 0, merged: 0, linked: 0, skipped: 1 });
        assert.equal((await store.getRecords(C, [OLD()]))[0]?.valid.to, "2023-03-01T00:00:00.000Z");
        await store.putUpdateCandidates([cand(NEW(), OLD())]);
        assert.equal(await store.countPendingCandidates(C), 3);
      });

      it("merge: the duplicate points at the canonical record, which gains its source", async () => {
        const applied = await applyConsolidation(store, {
          tenant: C,
          // A validity end before the duplicate's own start is clamped to its start.
          ops: [{ kind: "merge", canonical: NEW(), duplicate: DUP(), validTo: "2000-01-01T00:00:00.000Z" }],
          settled: [
            { recordId: NEW(), candidateId: DUP(), decision: "duplicate" },
            { recordId: DUP(), candidateId: NEW(), decision: "duplicate" },
          ],
        });
        assert.deepEqual(applied, { superseded: 0, merged: 1, linked: 0, skipped: 0 });
        const [dup, canonical] = await store.getRecords(C, [DUP(), NEW()]);
        assert.deepEqual(dup?.valid, {
          from: "2023-03-02T00:00:00.000Z",
          to: "2023-03-02T00:00:00.000Z",
          supersededBy: NEW(),
        });
        assert.deepEqual(canonical?.mergedSources, [dup?.source]);
        assert.deepEqual(await store.relationsOf(C, [DUP()]), [
          { from: DUP(), to: NEW(), relation: "DUPLICATE_OF", at: "2023-03-02T00:00:00.000Z" },
        ]);
        assert.equal(await store.countPendingCandidates(C), 1);
      });

      it("link: a REFINES edge, both records stay current", async () => {
        const applied = await applyConsolidation(store, {
          tenant: C,
          ops: [
            {
              kind: "link",
              from: REF(),
              to: NEW(),
              relation: "REFINES",
              at: "2023-03-05T00:00:00.000Z",
              reason: "detail",
            },
            { kind: "link", from: REF(), to: REF(), relation: "REFINES", at: "2023-03-05T00:00:00.000Z" },
            { kind: "link", from: REF(), to: "unknown", relation: "REFINES", at: "2023-03-05T00:00:00.000Z" },
          ],
          settled: [{ recordId: REF(), candidateId: NEW(), decision: "refinement" }],
        });
        assert.deepEqual(applied, { superseded: 0, merged: 0, linked: 1, skipped: 2 });
        assert.ok((await current(REF())) && (await current(NEW())));
        assert.equal(await store.countPendingCandidates(C), 0);
        assert.ok(!(await store.tenantsWithPendingCandidates()).includes(C));
        assert.deepEqual(await store.pendingUpdateCandidates(C, 10), []);
      });

      it("re-applying decisions changes nothing (merge skipped, link and edges kept once)", async () => {
        const canonicalBefore = (await store.getRecords(C, [NEW()]))[0];
        const relationsBefore = await store.relationsOf(C, [NEW(), OLD(), DUP(), REF()]);
        const again = await applyConsolidation(store, {
          tenant: C,
          ops: [
            { kind: "merge", canonical: NEW(), duplicate: DUP(), validTo: "2023-03-02T00:00:00.000Z" },
            { kind: "supersede", older: OLD(), newer: NEW(), validTo: "2023-03-01T00:00:00.000Z" },
            { kind: "link", from: REF(), to: NEW(), relation: "REFINES", at: "2023-03-05T00:00:00.000Z" },
          ],
          settled: [{ recordId: REF(), candidateId: NEW(), decision: "refinement" }],
        });
        assert.deepEqual(again, { superseded: 0, merged: 0, linked: 1, skipped: 2 });
        assert.deepEqual((await store.getRecords(C, [NEW()]))[0], canonicalBefore);
        assert.deepEqual(await store.relationsOf(C, [NEW(), OLD(), DUP(), REF()]), relationsBefore);
        assert.equal(await store.countPendingCandidates(C), 0);
      });

      it("relationsOf and versionGraph follow the edges", async () => {
        assert.deepEqual(await store.relationsOf(C, [NEW()]), [
          { from: NEW(), to: OLD(), relation: "SUPERSEDES", at: "2023-03-01T00:00:00.000Z", reason: "new job" },
          { from: DUP(), to: NEW(), relation: "DUPLICATE_OF", at: "2023-03-02T00:00:00.000Z" },
          { from: REF(), to: NEW(), relation: "REFINES", at: "2023-03-05T00:00:00.000Z", reason: "detail" },
        ]);
        assert.deepEqual(await store.relationsOf(C, []), []);
        const g = await walkVersionGraph(store, C, OLD());
        assert.deepEqual(ids(g.records).sort(), [OLD(), NEW(), DUP(), REF()].sort());
        assert.deepEqual(
          g.relations.map((r) => r.relation),
          ["SUPERSEDES", "DUPLICATE_OF", "REFINES"],
        );
        const berlin = await walkVersionGraph(store, C, BERLIN());
        assert.deepEqual(ids(berlin.records).sort(), [BERLIN(), OSLO()].sort());
        assert.deepEqual(await walkVersionGraph(store, C, "unknown"), { records: [], relations: [] });
        assert.deepEqual(await walkVersionGraph(store, A, OLD()), { records: [], relations: [] });
      });

      it("deleteConversation erases a conversation and undoes its effect on others", async () => {
        await store.putDeadLetter({
          stage: "encoder",
          key: `${C}/k1`,
          error: "e",
          payload: "p",
          at: "2024-02-01T00:00:00.000Z",
        });
        await store.putDeadLetter({
          stage: "encoder",
          key: `${C}/k2`,
          error: "e",
          payload: "p",
          at: "2024-02-01T00:00:00.000Z",
        });
        // k2 held the duplicate merged into NEW: NEW loses that merged source.
        const k2 = await eraseConversation(store, C, "k2");
        assert.deepEqual(k2, { records: [DUP()], turns: [turnRowId("k2", "t1")], restored: 0 });
        const [canonical] = await store.getRecords(C, [NEW()]);
        assert.equal(canonical?.mergedSources, undefined);
        assert.ok(await current(NEW()));
        assert.deepEqual(await store.getRecords(C, [DUP()]), []);
        assert.equal(await store.countSegments(C, "k2"), 0);
        assert.deepEqual(await getTurnsByRowIds(store, C, [turnRowId("k2", "t1")]), []);
        assert.deepEqual(
          (await store.relationsOf(C, [NEW()])).map((r) => r.relation),
          ["SUPERSEDES", "REFINES"],
        );
        // k1 held BERLIN, which superseded k3's OSLO: OSLO becomes current again. In steps of one
        // record or turn per transaction (4 records, 4 turns: 9 steps), as a large conversation
        // is erased: the same end state, lexical counts included (fx.counts below).
        const k1 = await eraseConversation(store, C, "k1", 1);
        assert.deepEqual([...k1.records].sort(), [OLD(), NEW(), REF(), BERLIN()].sort());
        assert.deepEqual(
          [...k1.turns].sort(),
          ["t1", "t2", "t3", "t4"].map((t) => turnRowId("k1", t)),
        );
        assert.equal(k1.restored, 1);
        const [oslo] = await store.getRecords(C, [OSLO()]);
        assert.deepEqual(oslo?.valid, { from: "2023-01-05T00:00:00.000Z" });
        assert.deepEqual(ids(await store.recordsByEntities(C, ["Jon"], 10)), [OSLO()]);
        assert.deepEqual(await store.relationsOf(C, [OSLO()]), []);
        assert.deepEqual(await store.knownEntities(C), ["Jon", "Oslo"]);
        assert.deepEqual(await store.knownTopics(C), ["home"]);
        assert.deepEqual(await store.searchRecordsLexical(C, "Acme Globex Berlin", 10), []);
        assert.deepEqual(await store.searchTurnsLexical(C, "Acme Globex Berlin", 10), []);
        assert.deepEqual(
          await store.recordsInTime(C, { from: Date.UTC(2023, 1, 1), to: Date.UTC(2023, 11, 1) }, 10),
          [],
        );
        assert.equal(await store.countRecords(C), 1);
        assert.equal(await store.countSegments(C), 1);
        assert.equal(await store.countPendingCandidates(C), 0);
        assert.deepEqual(
          (await ours()).filter((l) => l.key.startsWith(`${C}/`)).map((l) => l.key),
          [],
        );
        // Erasing an unknown conversation is a no-op.
        assert.deepEqual(await eraseConversation(store, C, "nope"), { records: [], turns: [], restored: 0 });
        // Nothing of C is left once the last conversation goes.
        await eraseConversation(store, C, "k3");
        const left = await fx.counts(C);
        const { Tenant: _tenantNode, ...rest } = left;
        assert.ok(allZero(rest), JSON.stringify(left));
        await store.deleteTenant(C);
        assert.ok(allZero(await fx.counts(C)));
      });
    });
  });
};
