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

  it("an erasure's purge runs on the worker: no deleted text left in memory.db or its log", async () => {
    await withWorker(async (db, dir, cp) => {
      const store = new SqliteGraphStore(db);
      const purged: (readonly string[])[] = [];
      const purge = cp.purge.bind(cp);
      cp.purge = (statements) => {
        purged.push(statements);
        return purge(statements);
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
      assert.deepEqual(purged, [
        [
          "INSERT INTO records_fts (records_fts) VALUES ('optimize')",
          "INSERT INTO turns_fts (turns_fts) VALUES ('optimize')",
        ],
      ]);
      await store.close();
    });
  });

  it("a purge that cannot truncate the log rejects as truncateWal throws", async () => {
    await withWorker(async (db, dir) => {
      write(db, 10);
      const reader = new Database(join(dir, SQLITE_FILE));
      try {
        reader.exec("BEGIN");
        reader.prepare("SELECT COUNT(*) FROM t").get();
        write(db, 10, 100);
        await assert.rejects(walCheckpointerOf(db)?.purge([]) ?? Promise.resolve(), { message: TRUNCATE_BUSY });
        reader.exec("COMMIT");
        await walCheckpointerOf(db)?.purge([]);
      } finally {
        reader.close();
      }
    });
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
