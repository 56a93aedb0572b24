// The inbox processed out of order while an erasure holds one tenant's entries (DurableLog
// completeEntries, readInbox's exclusions): entries done ahead of the cursor are neither read again
// nor skipped over what lies before them, across a restart (a new log on the same file), and the
// cursor passes them once what lies before them is done.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import type { Turn } from "../../services/core/types.ts";
import { DurableLog } from "../../services/embedded/durable-log.ts";

const CURSOR = "inbox";

const turn = (tenant: string, turnId: string): Turn => ({
  tenant,
  conversation: "c1",
  turnId,
  speaker: "Ana",
  role: "user",
  text: `turn ${turnId} of ${tenant}`,
  timestamp: "2024-05-06T10:00:00Z",
  sessionId: "s1",
});

describe("DurableLog: entries done ahead of the cursor", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const open = () => {
    const dir = mkdtempSync(join(tmpdir(), "inbox-done-"));
    dirs.push(dir);
    return dir;
  };
  const seqs = (entries: readonly { seq: number }[]): number[] => entries.map((e) => e.seq);

  it("skips a held tenant's entries, marks the others done, keeps both across a restart, then passes them", () => {
    const dir = open();
    let db = openSqlite(dir);
    let log = new DurableLog(db);
    // 1-2: before the erasure's call; 3 T, 4 U, 5 T, 6 U after it.
    log.appendTurns([turn("T", "a"), turn("U", "a"), turn("T", "b"), turn("U", "b"), turn("T", "c"), turn("U", "c")]);
    log.completeEntries(CURSOR, [1, 2]);
    assert.equal(log.cursor(CURSOR), 2);

    // The erasure of T holds T's entries after 2: only U's are read, and done ahead of the cursor.
    const held = [{ tenant: "T", from: 2 }];
    const free = log.readInbox(log.cursor(CURSOR), 10, undefined, held);
    assert.deepEqual(seqs(free), [4, 6]);
    log.completeEntries(CURSOR, seqs(free));
    assert.equal(log.cursor(CURSOR), 2, "the cursor stays before T's first waiting entry");
    assert.deepEqual(seqs(log.readInbox(log.cursor(CURSOR), 10, undefined, held)), [], "nothing left to read");

    // A restart (the hold is gone with the process): T's entries are read, U's done ones are not.
    db.close();
    db = openSqlite(dir);
    log = new DurableLog(db);
    assert.deepEqual(seqs(log.readInbox(log.cursor(CURSOR), 10)), [3, 5]);
    log.completeEntries(CURSOR, [3]);
    assert.equal(log.cursor(CURSOR), 4, "past 3 and the done 4, before 5");
    log.completeEntries(CURSOR, [5]);
    assert.equal(log.cursor(CURSOR), 6, "past everything");
    const marks = db.prepare("SELECT COUNT(*) AS n FROM inbox_done").get() as { n: number };
    assert.equal(marks.n, 0, "no mark is kept behind the cursor");
    db.close();
  });

  it("moves the cursor to an erasure's position when what stood before it was deleted, not past an entry", () => {
    const dir = open();
    const db = openSqlite(dir);
    const log = new DurableLog(db);
    log.appendTurns([turn("T", "a"), turn("T", "b"), turn("U", "a")]);
    log.completeEntries(CURSOR, [1]);
    // An erasure at 3 deleted 2 and 3 (its tenant's entries up to its call): nothing left before it.
    db.prepare("DELETE FROM inbox WHERE seq IN (2, 3)").run();
    log.completeEntries(CURSOR, [], 3);
    assert.equal(log.cursor(CURSOR), 3);
    // A later entry is not passed by the floor.
    log.appendTurns([turn("U", "b")]);
    log.completeEntries(CURSOR, [], 10);
    assert.equal(log.cursor(CURSOR), 3, "entry 4 is not done: the cursor stays before it");
    db.close();
  });
});
