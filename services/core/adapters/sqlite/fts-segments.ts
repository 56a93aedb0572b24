/**
 * Segments of the FTS5 indexes (records_fts, turns_fts) and their idle-time merge (issue 18).
 *
 * Every write transaction flushes its new terms as a new segment; FTS5's automerge folds them into
 * larger ones as writes go on, which leaves a store of any size with ~15-25 segments on 4-6 levels
 * (18 at 4,500 and at 40,000 records, 21 at 1,000,000). A term lookup seeks every segment, and the
 * middle levels' segments (tens to hundreds of pages) cost the most: replaying a scale bench's
 * 688 postings reads on a 40K store took 360-384 ms with its 18 segments, 278-291 ms merged into
 * one, 287-300 ms in two, 303-327 ms as one large segment and 14 one-page ones (docs/benchmarks.md).
 *
 * The merge: `usermerge` 2 (a table setting, kept in its config row) lets the 'merge' command fold
 * any two segments of a level, so repeated steps leave at most one segment per level, cascading to
 * one or two; each step writes about `pages` pages (it stops at a term boundary, so a term with a
 * long list can take more). Automerge during writes is unchanged.
 */
import type { SqliteDatabase } from "../sqlite-db.ts";

export const FTS_TABLES = ["records_fts", "turns_fts"] as const;
export type FtsTable = (typeof FTS_TABLES)[number];

/** The 'merge' command folds any two (or more) segments of one level. */
const USER_MERGE = 2;

/** Sets the table's `usermerge` to USER_MERGE unless it is set already (a config write otherwise). */
export const prepareSegmentMerge = (db: SqliteDatabase, table: FtsTable): void => {
  const row = db.prepare<[], { v: number }>(`SELECT v FROM ${table}_config WHERE k = 'usermerge'`).get();
  // Bound as an integer (BigInt): FTS5 refuses a REAL, which a JS number binds as.
  if (row?.v !== USER_MERGE)
    db.prepare(`INSERT INTO ${table} (${table}, rank) VALUES ('usermerge', ?)`).run(BigInt(USER_MERGE));
};

/**
 * One 'merge' step of about `pages` pages (negative: of segments on any level, see mergeIntoOne);
 * true when it changed the index (more may remain), false when there was nothing to merge (FTS5's
 * documented test: total_changes() moved by < 2).
 */
export const mergeSegmentsStep = (db: SqliteDatabase, table: FtsTable, pages: number): boolean => {
  const changes = db.prepare<[], { n: number }>("SELECT total_changes() AS n");
  const before = (changes.get() as { n: number }).n;
  db.prepare(`INSERT INTO ${table} (${table}, rank) VALUES ('merge', ?)`).run(BigInt(Math.floor(pages)));
  return (changes.get() as { n: number }).n - before >= 2;
};

/**
 * Pages one step of mergeIntoOne writes. On the 100K-record scale store a step of 128 pages took
 * 4-17 ms (records_fts, merging its 22 segments into one in 14 steps); the whole 'optimize' it
 * replaces took 113 ms there, turns_fts's 93 ms, back to back.
 */
export const PURGE_MERGE_PAGES = 128;

/** Steps after which mergeIntoOne stops stepping and lets 'optimize' finish (writes outpacing the merge). */
const MAX_PURGE_STEPS = 10_000;

/**
 * A table's index merged into one segment, as 'optimize' does, in steps with a turn of the event
 * loop between two (`between`), so that the other tenants' queries and writes run meanwhile.
 * FTS5's 'merge' with a negative page count merges segments of every level, not only of one, and
 * ends with a single segment; segments written between two steps are merged in too. The last step
 * is followed, in the same turn of the event loop, by 'optimize', a no-op on one segment (it
 * rewrites only what writes added after the last step when the step cap was reached).
 *
 * Why it matters for erasure: with FTS5's secure-delete a delete takes the row's terms out of the
 * segments, but keys a segment was indexed by can still hold a deleted term (without the merge,
 * test/unit/sqlite-fts-merge.test.ts finds erased terms in memory.db after the deletes and a
 * checkpoint). Merging rewrites every segment from what is live.
 */
export const mergeIntoOne = async (
  db: SqliteDatabase,
  table: FtsTable,
  between: () => Promise<void>,
  pages = PURGE_MERGE_PAGES,
): Promise<void> => {
  for (let step = 0; step < MAX_PURGE_STEPS; step++) {
    if (!mergeSegmentsStep(db, table, -Math.max(1, Math.floor(pages)))) break;
    await between();
  }
  db.exec(`INSERT INTO ${table} (${table}) VALUES ('optimize')`);
};

/** SQLite's variable-length integer (1-9 bytes, big-endian 7-bit groups, the 9th byte whole). */
const varint = (b: Uint8Array, at: { i: number }): number => {
  let v = 0;
  for (let n = 0; n < 8; n++) {
    const c = b[at.i++] as number;
    v = v * 128 + (c & 0x7f);
    if ((c & 0x80) === 0) return v;
  }
  return v * 256 + (b[at.i++] as number);
};

/**
 * Segments per level of a table's index, from its structure record (rowid 10 of `<table>_data`:
 * a 4-byte cookie, an optional 4-byte version-2 marker, then varints: levels, segments, write counter, and
 * per level the segments being merged, the segment count and each segment's id and first and last
 * page, with five more values per segment after the marker). For tests, benches and diagnostics.
 */
export const segmentsPerLevel = (db: SqliteDatabase, table: FtsTable): number[] => {
  const row = db.prepare<[], { block: Uint8Array }>(`SELECT block FROM ${table}_data WHERE id = 10`).get();
  if (!row) return [];
  const b = row.block;
  // FTS5_STRUCTURE_V2, the marker of a table whose segments carry origins and tombstones
  // (contentless_delete, migration 13): bytes FF 00 00 01, not text.
  const v2 = b[4] === 0xff && b[5] === 0 && b[6] === 0 && b[7] === 1;
  const at = { i: v2 ? 8 : 4 };
  const levels = varint(b, at);
  varint(b, at); // segments in all
  varint(b, at); // write counter
  const out: number[] = [];
  for (let l = 0; l < levels; l++) {
    varint(b, at); // segments being merged
    const n = varint(b, at);
    for (let s = 0; s < n * (v2 ? 8 : 3); s++) varint(b, at);
    out.push(n);
  }
  return out;
};
