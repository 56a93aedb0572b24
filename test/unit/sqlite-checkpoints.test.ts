import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import Database from "better-sqlite3";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import {
  startWalCheckpointer,
  WAL_AUTOCHECKPOINT_WITH_WORKER_PAGES,
  walCheckpointerOf,
} from "../../services/core/adapters/sqlite-checkpoints.ts";
import {
  openSqlite,
  SQLITE_FILE,
  SQLITE_WAL_AUTOCHECKPOINT_PAGES,
  type SqliteDatabase,
  TRUNCATE_BUSY,
} from "../../services/core/adapters/sqlite-db.ts";
import { makeTurn } from "../contract/graph-store.contract.ts";

const MARKER = "qzvcheckpointmarker";

/** A store folder with the checkpoint worker on its connection; the worker's timer is as good as off. */
const withWorker = async (
  fn: (db: SqliteDatabase, dir: string, cp: ReturnType<typeof startWalCheckpointer>) => Promise<void>,
  options: { intervalMs?: number; behindFrames?: number } = {},
): Promise<void> => {
  const dir = mkdtempSync(join(tmpdir(), "sqlite-checkpoints-"));
  const db = openSqlite(dir);
  const cp = startWalCheckpointer(db, { intervalMs: options.intervalMs ?? 3_600_000, ...options });
  try {
    db.exec("CREATE TABLE t (k INTEGER PRIMARY KEY, x TEXT)");
    await fn(db, dir, cp);
  } finally {
    await cp.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
};

const write = (db: SqliteDatabase, rows: number, from = 0): void => {
  const insert = db.prepare("INSERT OR REPLACE INTO t VALUES (?, ?)");
  db.transaction(() => {
    for (let i = 0; i < rows; i++) insert.run(from + i, `${i} ${"x".repeat(3000)}`);
  })();
};

describe("SQLite checkpoints on a worker thread", () => {
  it("copies the log on the worker, and the main connection's next write starts it again", async () => {
    await withWorker(async (db) => {
      assert.equal(db.pragma("wal_autocheckpoint", { simple: true }), WAL_AUTOCHECKPOINT_WITH_WORKER_PAGES);
      write(db, 400);
      const first = await walCheckpointerOf(db)?.catchUp();
      assert.ok(first && first.log >= 400, JSON.stringify(first));
      assert.equal(first.checkpointed, first.log, "every frame copied");
      assert.equal(first.busy, false);
      // Every frame was copied when this write began: it writes from the log's beginning.
      write(db, 1, 10_000);
      const second = await walCheckpointerOf(db)?.catchUp();
      assert.ok(second && second.log < 20, `log restarted: ${JSON.stringify(second)}`);
      assert.deepEqual(db.prepare("SELECT COUNT(*) AS n FROM t").get(), { n: 401 });
    });
  });

  it("checkpoints by itself once the log was written, and reports it behind past the bound", async () => {
    await withWorker(
      async (db, _dir, cp) => {
        const report = cp.next();
        write(db, 300);
        const seen = await report;
        assert.ok(seen.log >= 300 && seen.checkpointed === seen.log, JSON.stringify(seen));
        assert.equal(cp.behind, true, "300 pages and more are past a bound of 100");
        // A write of the graph store waits for a copy first; the copy had everything, so no more.
        const store = new SqliteGraphStore(db);
        let caughtUp = 0;
        const catchUp = cp.catchUp.bind(cp);
        cp.catchUp = () => {
          caughtUp++;
          return catchUp();
        };
        await store.writeTurns("A", "c1", [makeTurn("t1", "Ana adopted a greyhound.", "2023-07-01T10:00:00.000Z")]);
        assert.equal(caughtUp, 1);
        assert.equal(cp.behind, false);
        await store.writeTurns("A", "c1", [makeTurn("t2", "It sleeps all day.", "2023-07-01T10:01:00.000Z")]);
        assert.equal(caughtUp, 1, "not behind: no wait");
        await store.close();
      },
      { intervalMs: 1, behindFrames: 100 },
    );
  });

  it("an erasure's purge: the worker copies the log, the main connection truncates it; no deleted text left", async () => {
    await withWorker(async (db, dir, cp) => {
      const store = new SqliteGraphStore(db);
      let copies = 0;
      const truncateAfterCopy = cp.truncateAfterCopy.bind(cp);
      cp.truncateAfterCopy = (truncate) => {
        copies++;
        return truncateAfterCopy(truncate);
      };
      await store.writeTurns("A", "c1", [
        makeTurn("t1", `${MARKER} ${"secret ".repeat(400)}`, "2023-07-01T10:00:00.000Z"),
        makeTurn("t2", "Something to keep.", "2023-07-01T10:01:00.000Z"),
      ]);
      const onDisk = (): boolean =>
        ["", "-wal"].some((suffix) => {
          try {
            return readFileSync(join(dir, SQLITE_FILE + suffix)).includes(MARKER);
          } catch {
            return false;
          }
        });
      assert.ok(onDisk());
      await store.deleteRawTurns("A", "c1");
      await store.purgeDeleted();
      assert.ok(!onDisk(), "no copy in memory.db or its WAL");
      assert.equal(statSync(join(dir, `${SQLITE_FILE}-wal`)).size, 0, "the log truncated");
      assert.equal(copies, 1);
      await store.close();
    });
  });

  it("writes of the main connection during a purge go through (the worker never writes)", async () => {
    await withWorker(async (db) => {
      const store = new SqliteGraphStore(db);
      const turns = (from: number) =>
        Array.from({ length: 50 }, (_, i) =>
          makeTurn(`t${from + i}`, `Turn ${from + i} about ${"greyhounds ".repeat(30)}`, "2023-07-01T10:00:00.000Z"),
        );
      // A log of some size, so that the worker's copy takes a while.
      for (let k = 0; k < 10; k++) await store.writeTurns("A", `c${k}`, turns(k * 50));
      for (let round = 0; round < 3; round++) {
        const purging = store.purgeDeleted();
        // While the worker copies: a write that reads first (deleteRawTurns) and one that writes first.
        for (let k = 0; k < 5; k++) {
          await store.deleteRawTurns("A", `c${round * 3 + (k % 3)}`);
          await store.writeTurns("B", `c${round}-${k}`, turns(k));
        }
        await purging;
      }
      assert.equal(await store.deleteRawTurns("B"), 3 * 5 * 50);
      await store.close();
    });
  });

  it("a copy asked for while the main connection truncates is refused as busy, so that the truncation never meets it", async () => {
    await withWorker(async (db, dir, cp) => {
      for (let round = 0; round < 20; round++) {
        write(db, 200, round * 1_000);
        let truncated = false;
        // A store write's catchUp posted right after the pause: the worker receives it while paused.
        const purge = cp.truncateAfterCopy(() => {
          db.pragma("wal_checkpoint(TRUNCATE)");
          truncated = statSync(join(dir, `${SQLITE_FILE}-wal`)).size === 0;
        });
        const caught = await cp.catchUp();
        await purge;
        assert.equal(caught.busy, true, `round ${round}: refused while paused (${JSON.stringify(caught)})`);
        assert.ok(truncated, `round ${round}: the log was truncated`);
      }
      // Resumed: a copy goes through again.
      write(db, 10, 100_000);
      const report = await cp.catchUp();
      assert.equal(report.busy, false);
      assert.equal(report.checkpointed, report.log);
    });
  });

  it("a purge that cannot truncate the log rejects as truncateWal throws, and the worker goes on", async () => {
    await withWorker(async (db, dir, cp) => {
      const store = new SqliteGraphStore(db);
      write(db, 10);
      const reader = new Database(join(dir, SQLITE_FILE));
      try {
        reader.exec("BEGIN");
        reader.prepare("SELECT COUNT(*) FROM t").get();
        write(db, 10, 100);
        await assert.rejects(store.purgeDeleted(), { message: TRUNCATE_BUSY });
        reader.exec("COMMIT");
        await store.purgeDeleted();
        write(db, 10, 200);
        const report = await cp.catchUp();
        assert.equal(report.checkpointed, report.log);
      } finally {
        reader.close();
        await store.close();
      }
    });
  });

  it("a write does not fail when the worker's copy does; a close while a copy is awaited completes", async () => {
    await withWorker(
      async (db, _dir, cp) => {
        const store = new SqliteGraphStore(db);
        const report = cp.next();
        write(db, 300);
        await report;
        assert.equal(cp.behind, true);
        cp.catchUp = () => Promise.reject(new Error("SQLite checkpoint worker exited"));
        await store.writeTurns("A", "c1", [makeTurn("t1", "Still written.", "2023-07-01T10:00:00.000Z")]);
        assert.equal((await store.getTurns("A", [{ conversation: "c1", turnId: "t1" }])).length, 1);
        await store.close();
      },
      { intervalMs: 1, behindFrames: 100 },
    );
    // close() right after a request: the process is kept alive until the worker has exited.
    const dir = mkdtempSync(join(tmpdir(), "sqlite-checkpoints-"));
    const db = openSqlite(dir);
    try {
      const cp = startWalCheckpointer(db);
      const copying = cp.catchUp().catch((err: Error) => err);
      await cp.close();
      await copying;
      assert.equal(walCheckpointerOf(db), undefined);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("once closed, the main connection checkpoints as before", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sqlite-checkpoints-"));
    const db = openSqlite(dir);
    try {
      const cp = startWalCheckpointer(db);
      assert.equal(walCheckpointerOf(db), cp);
      await cp.close();
      assert.equal(walCheckpointerOf(db), undefined);
      assert.equal(db.pragma("wal_autocheckpoint", { simple: true }), SQLITE_WAL_AUTOCHECKPOINT_PAGES);
      await assert.rejects(cp.catchUp(), /closed/);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
