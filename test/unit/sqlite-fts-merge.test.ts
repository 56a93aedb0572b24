// The full-text indexes' idle-time merge (SqliteGraphStore.mergeIndexSegments, fts-segments.ts):
// bounded steps that leave at most one segment per level, the same search results before and
// after, an intact index, and new work after new writes.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { FTS_TABLES, mergeIntoOne, segmentsPerLevel } from "../../services/core/adapters/sqlite/fts-segments.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import { eraseConversation } from "../../services/core/erasure.ts";
import type { IndexBatch } from "../../services/core/ports.ts";
import { makeRecord, makeSegment, makeTurn } from "../contract/graph-store.contract.ts";

const WORDS = [
  "paris",
  "painting",
  "sunrise",
  "coffee",
  "tea",
  "dance",
  "studio",
  "camping",
  "mountain",
  "guitar",
  "concert",
  "garden",
  "novel",
  "adoption",
  "support",
  "group",
  "beach",
  "museum",
  "recipe",
  "marathon",
];

/** Park-Miller: the same texts on every run. */
const seeded = (seed: number): (() => number) => {
  let s = seed;
  return () => {
    s = (s * 48271) % 2147483647;
    return s / 2147483647;
  };
};

/** Common words (the searches' terms) and rarer ones (an index of a few hundred pages). */
const sentence = (rnd: () => number): string =>
  Array.from({ length: 8 + Math.floor(rnd() * 8) }, () =>
    rnd() < 0.5 ? WORDS[Math.floor(rnd() * WORDS.length)] : `w${Math.floor(rnd() * 5000)}`,
  ).join(" ");

/** One segment of two turns and one record: each writeBatch is its own transaction, a new FTS segment. */
const batch = (tenant: string, conversation: string, i: number, rnd: () => number): IndexBatch => {
  const at = new Date(Date.UTC(2023, 0, 1) + i * 60_000).toISOString();
  const segmentId = `seg-${i}`;
  const turns = Array.from({ length: 8 }, (_, j) => makeTurn(`t${i}.${j}`, sentence(rnd), at));
  const record = makeRecord(tenant, conversation, segmentId, {
    text: `${sentence(rnd)} ${i}`,
    type: "fact",
    entities: [],
    topics: [],
    saidAt: at,
    turnIds: [`t${i}.0`],
  });
  return {
    tenant,
    conversation,
    segment: makeSegment(tenant, conversation, segmentId, turns),
    records: [record],
    eventFrames: [],
  };
};

const QUESTIONS = ["paris painting", "dance studio camping", "coffee tea novel garden", "support group marathon beach"];

describe("SqliteGraphStore.mergeIndexSegments", () => {
  it("merges the FTS segments in bounded steps with the same search results, again after new writes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fts-merge-"));
    const db = openSqlite(dir);
    const store = new SqliteGraphStore(db);
    try {
      const rnd = seeded(18);
      let i = 0;
      const write = async (n: number): Promise<void> => {
        for (const end = i + n; i < end; i++)
          await store.writeBatch(batch(i % 2 === 0 ? "a" : "b", `c${i % 3}`, i, rnd));
      };
      // FTS5's automerge would fold a test-sized store's segments as it goes; off, each write's
      // transaction leaves its own segment (crisismerge high: no forced merge at 16), as the
      // middle levels of a large store stay unmerged.
      for (const t of FTS_TABLES) {
        db.prepare(`INSERT INTO ${t} (${t}, rank) VALUES ('automerge', ?)`).run(0n);
        db.prepare(`INSERT INTO ${t} (${t}, rank) VALUES ('crisismerge', ?)`).run(1000n);
      }
      await write(120);
      const segments = (): number[] => FTS_TABLES.map((t) => segmentsPerLevel(db, t).reduce((x, y) => x + y, 0));
      const searches = async (): Promise<unknown[]> => {
        const out: unknown[] = [];
        for (const tenant of ["a", "b"])
          for (const q of QUESTIONS)
            for (const conversation of [undefined, "c0", "c1"])
              out.push(
                await store.searchRecordsLexical(tenant, q, 10, conversation),
                await store.searchTurnsLexical(tenant, q, 10, conversation),
              );
        return out;
      };
      const before = await searches();
      const many = segments();
      // 120 one-batch transactions: 120 segments.
      for (const n of many) assert.ok(n >= 100, `segments before the merge: ${many.join(", ")}`);

      let steps = 0;
      while (await store.mergeIndexSegments(2)) {
        steps++;
        assert.ok(steps < 500, "the merge ends");
      }
      assert.ok(steps > 2, `a 2-page budget takes several steps (took ${steps})`);
      for (const t of FTS_TABLES) {
        const levels = segmentsPerLevel(db, t);
        assert.ok(
          Math.max(...levels) <= 1,
          `${t}: at most one segment per level after the merge (${levels.join(",")})`,
        );
        // FTS5's own check of the index against the content: throws on any inconsistency.
        db.prepare(`INSERT INTO ${t} (${t}) VALUES ('integrity-check')`).run();
      }
      const fewer = segments();
      for (const [k, n] of fewer.entries()) assert.ok(n < (many[k] as number), `fewer segments: ${many} -> ${fewer}`);
      assert.deepEqual(await searches(), before, "same hits, scores and order");
      assert.equal(await store.mergeIndexSegments(2), false, "nothing left to merge");

      // New writes add segments: the next idle merge has work again.
      await write(40);
      assert.equal(await store.mergeIndexSegments(2), true);
      while (await store.mergeIndexSegments(2)) {
        steps++;
        assert.ok(steps < 1000, "the merge ends");
      }
      for (const t of FTS_TABLES) assert.ok(Math.max(...segmentsPerLevel(db, t)) <= 1);

      await assert.rejects(store.mergeIndexSegments(0), RangeError);
    } finally {
      await store.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("The full-text indexes merged into one segment in steps (mergeIntoOne, SqliteGraphStore.purgeDeleted)", () => {
  /** A store whose every write leaves its own FTS segment (automerge off), as the middle levels of a large one. */
  const open = (dir: string) => {
    const db = openSqlite(dir);
    const store = new SqliteGraphStore(db);
    for (const t of FTS_TABLES) {
      db.prepare(`INSERT INTO ${t} (${t}, rank) VALUES ('automerge', ?)`).run(0n);
      db.prepare(`INSERT INTO ${t} (${t}, rank) VALUES ('crisismerge', ?)`).run(1000n);
    }
    return { db, store };
  };
  const total = (levels: number[]): number => levels.reduce((x, y) => x + y, 0);

  it("ends with one segment per table, the same search results and an intact index, a turn of the event loop between two steps", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fts-one-"));
    const { db, store } = open(dir);
    try {
      const rnd = seeded(7);
      for (let i = 0; i < 60; i++) await store.writeBatch(batch("a", `c${i % 3}`, i, rnd));
      const before = [];
      for (const q of QUESTIONS)
        before.push(await store.searchRecordsLexical("a", q, 10), await store.searchTurnsLexical("a", q, 10));
      const turns: Record<string, number> = {};
      for (const t of FTS_TABLES) {
        assert.ok(total(segmentsPerLevel(db, t)) >= 50, `${t}: a segment per write before`);
        turns[t] = 0;
        await mergeIntoOne(
          db,
          t,
          async () => {
            turns[t] = (turns[t] ?? 0) + 1;
          },
          2,
        );
        assert.equal(
          total(segmentsPerLevel(db, t)),
          1,
          `${t}: one segment after (${segmentsPerLevel(db, t).join(",")})`,
        );
        db.prepare(`INSERT INTO ${t} (${t}) VALUES ('integrity-check')`).run();
      }
      // The turns' index (eight turns a write) is the larger: 2 pages a step take it several.
      assert.ok((turns.turns_fts ?? 0) > 2, `several steps of 2 pages (${JSON.stringify(turns)})`);
      const after = [];
      for (const q of QUESTIONS)
        after.push(await store.searchRecordsLexical("a", q, 10), await store.searchTurnsLexical("a", q, 10));
      assert.deepEqual(after, before, "same hits, scores and order");
    } finally {
      await store.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("purgeDeleted after an erasure: no erased term left in the files, one segment per table, other callbacks run during it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fts-purge-"));
    const { db, store } = open(dir);
    try {
      const rnd = seeded(11);
      const secret = (i: number): string => `zqsecret${i}x`;
      for (let i = 0; i < 200; i++) {
        const b = batch("a", `c${i % 2}`, i, rnd);
        // Each batch's record and first turn carry a term no other row has.
        const [record] = b.records;
        const [turn, ...rest] = b.segment.turns;
        await store.writeBatch({
          ...b,
          records: record ? [{ ...record, text: `${record.text} ${secret(i)}` }] : [],
          segment: { ...b.segment, turns: turn ? [{ ...turn, text: `${turn.text} ${secret(i)}` }, ...rest] : rest },
        });
      }
      assert.equal((await store.searchRecordsLexical("a", secret(0), 5)).length, 1, "the term is indexed");
      await eraseConversation(store, "a", "c0");
      let ticks = 0;
      let purging = true;
      const tick = (): void => {
        ticks++;
        if (purging) setImmediate(tick);
      };
      setImmediate(tick);
      await store.purgeDeleted();
      purging = false;
      assert.ok(ticks > 0, "the event loop turned during the purge");
      const files = ["memory.db", "memory.db-wal"].map((f) => join(dir, f)).filter((f) => existsSync(f));
      const bytes = files.map((f) => readFileSync(f));
      for (let i = 0; i < 200; i += 2)
        for (const [k, b] of bytes.entries())
          assert.equal(b.includes(secret(i)), false, `${secret(i)} (erased) is in ${files[k]}`);
      assert.ok(
        bytes.some((b) => b.includes(secret(1))),
        "a term of the conversation kept is still there",
      );
      for (const t of FTS_TABLES) {
        assert.equal(total(segmentsPerLevel(db, t)), 1, `${t}: one segment`);
        db.prepare(`INSERT INTO ${t} (${t}) VALUES ('integrity-check')`).run();
      }
      assert.equal((await store.searchRecordsLexical("a", secret(1), 5)).length, 1);
    } finally {
      await store.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
