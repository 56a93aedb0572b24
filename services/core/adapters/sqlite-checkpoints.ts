/**
 * WAL checkpoints on a worker thread. With SQLite's automatic checkpoint, the commit that takes the
 * write-ahead log past its size runs the checkpoint itself: it copies every page of the log into
 * the database file and syncs both, on the thread that committed. On the 100K scale store that was
 * 0.6-0.8 s on the event loop (an ingest commit's or an erasure step's), every 10,000 pages of log.
 *
 * Here a second connection on a worker thread runs a PASSIVE checkpoint once the log has been
 * written since the last one and `intervalMs` have passed: it copies pages while the main
 * connection goes on reading and writing (WAL readers and writers do not wait for a checkpointer).
 * The main connection starts the log again from its beginning at its next write if, when that
 * write begins, every frame has been copied. Under writes back to back (an erasure's steps) a
 * write lands during every copy, so the log would only grow: once the worker reports a log of
 * BEHIND_FRAMES or more, the store's next write first waits (asynchronously, the event loop free)
 * for one more copy (catchUp), which then has every frame and lets that write restart the log.
 * The main connection's automatic checkpoint stays as the bound should the worker stop. After an
 * erasure the worker copies the log first, so that the main connection's TRUNCATE checkpoint
 * (truncateWal) copies only what was written since.
 *
 * A checkpoint changes nothing stored: it moves committed pages from the log to the file.
 * Durability is the same (synchronous=NORMAL); the worker only does sooner, and elsewhere, what a
 * commit would have done.
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { SQLITE_DEFAULTS } from "../config.ts";
import { SQLITE_WAL_AUTOCHECKPOINT_PAGES, type SqliteDatabase } from "./sqlite-db.ts";

/** A log at least this long has the store's next write wait for a copy first (catchUp). */
export const BEHIND_FRAMES = 8_000;

/**
 * The main connection's automatic checkpoint while the worker runs: only a bound on the log should
 * the worker stop (4x SQLITE_WAL_AUTOCHECKPOINT_PAGES, about 160 MiB of log at most).
 */
export const WAL_AUTOCHECKPOINT_WITH_WORKER_PAGES = 4 * SQLITE_WAL_AUTOCHECKPOINT_PAGES;

/** One checkpoint the worker ran: frames in the log, frames copied, whether it was refused, its time. */
export interface CheckpointReport {
  log: number;
  checkpointed: number;
  busy: boolean;
  ms: number;
}

export interface WalCheckpointer {
  /** The timer's last report had a log of BEHIND_FRAMES or more, and no catchUp copied it all since. */
  readonly behind: boolean;
  /** Resolves with the next checkpoint the worker reports (tests; a bench's figures). */
  next(): Promise<CheckpointReport>;
  /** A checkpoint now (one for every caller waiting meanwhile); resolves with its report. */
  catchUp(): Promise<CheckpointReport>;
  /**
   * After an erasure: the worker copies the log and pauses (no checkpoint of its own under way),
   * then `truncate` runs (the main connection's TRUNCATE checkpoint, truncateWal: it then copies
   * only what was written since), then the worker resumes. Writes stay on the main connection: a
   * write on the worker's would hold SQLite's write lock while the main connection writes (a
   * transaction of the main connection that has read fails with SQLITE_BUSY instead of waiting).
   */
  truncateAfterCopy(truncate: () => void): Promise<void>;
  /** Stops the worker and waits for it to exit (before the main connection is closed). */
  close(): Promise<void>;
}

/**
 * The worker's source: plain CommonJS evaluated in the worker (no loader, no build step), given the
 * resolved better-sqlite3 module and the database file. It polls the log file's size and mtime
 * every `pollMs` (a stat, no SQLite call) and checkpoints when they changed and `intervalMs` have
 * passed since its last checkpoint; requests run between two polls. It only ever checkpoints (no
 * write of its own: see truncateAfterCopy); "pause" checkpoints and stops the timer until "resume",
 * and a checkpoint asked for meanwhile (a store write's catchUp) is answered busy without one.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { statSync } = require("node:fs");
const Database = require(workerData.module);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma("busy_timeout = 5000");
const wal = workerData.file + "-wal";
let seen = "";
let last = 0;
const stamp = () => { try { const s = statSync(wal); return s.size + ":" + s.mtimeMs; } catch { return ""; } };
const message = (err) => String((err && err.message) || err);
const checkpoint = (id) => {
  const started = performance.now();
  const row = db.pragma("wal_checkpoint(PASSIVE)")[0];
  last = Date.now();
  seen = stamp();
  parentPort.postMessage({ kind: "checkpoint", id, log: row.log, checkpointed: row.checkpointed, busy: row.busy !== 0, ms: performance.now() - started });
};
let paused = false;
const timer = setInterval(() => {
  if (paused || Date.now() - last < workerData.intervalMs) return;
  const current = stamp();
  if (current === "" || current === seen) return;
  try { checkpoint(undefined); } catch (err) { parentPort.postMessage({ kind: "error", message: message(err) }); }
}, workerData.pollMs);
parentPort.on("message", (m) => {
  if (m.kind === "close") { clearInterval(timer); db.close(); parentPort.close(); return; }
  if (m.kind === "resume") { paused = false; return; }
  // Paused, the main connection truncates the log: a checkpoint now would read the log meanwhile
  // and the truncation would fail ("another connection is reading"). Refused, as a busy one is.
  if (paused && m.kind === "checkpoint") { parentPort.postMessage({ kind: "checkpoint", id: m.id, log: -1, checkpointed: -1, busy: true, ms: 0 }); return; }
  try { checkpoint(m.id); } catch (err) { parentPort.postMessage({ kind: "checkpoint", id: m.id, log: -1, checkpointed: -1, busy: true, ms: 0, message: message(err) }); }
  if (m.kind === "pause") paused = true;
});
`;

type WorkerMessage =
  | ({ kind: "checkpoint"; id?: number; message?: string } & CheckpointReport)
  | { kind: "error"; message: string };

/** The checkpointer started for a main connection, if any (the graph store's writes and purge ask it). */
const started = new WeakMap<SqliteDatabase, WalCheckpointer>();

export const walCheckpointerOf = (db: SqliteDatabase): WalCheckpointer | undefined => started.get(db);

/**
 * Starts the checkpointing worker for the main connection's database file. `onError` hears a
 * checkpoint that threw or the worker's failure (the main connection's automatic checkpoint then
 * bounds the log as before). The worker does not keep the process alive.
 */
export const startWalCheckpointer = (
  db: SqliteDatabase,
  options: { intervalMs?: number; pollMs?: number; behindFrames?: number; onError?: (message: string) => void } = {},
): WalCheckpointer => {
  // How often at most the worker checkpoints while the log is written (config cache.sqliteCheckpointMs).
  const intervalMs = options.intervalMs ?? SQLITE_DEFAULTS.checkpointMs;
  const behindFrames = options.behindFrames ?? BEHIND_FRAMES;
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: {
      module: createRequire(import.meta.url).resolve("better-sqlite3"),
      file: db.name,
      intervalMs,
      pollMs: options.pollMs ?? Math.max(10, Math.min(250, intervalMs / 4)),
    },
  });
  // Unreferenced while nobody waits on it, so that it never keeps the process alive; referenced
  // while a caller awaits a reply (a CLI's erasure awaiting its purge has nothing else running).
  worker.unref();
  let awaited = 0;
  let closing = false;
  const awaiting = <T>(reply: Promise<T>): Promise<T> => {
    if (awaited++ === 0) worker.ref();
    return reply.finally(() => {
      // Once close() has referenced the worker, it stays referenced until it exits.
      if (--awaited === 0 && !closing) worker.unref();
    });
  };
  db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_WITH_WORKER_PAGES}`);
  let behind = false;
  let nextId = 1;
  let failure: Error | undefined;
  const waiting: { resolve: (report: CheckpointReport) => void; reject: (err: Error) => void }[] = [];
  let catching: Promise<CheckpointReport> | undefined;
  const requests = new Map<number, { resolve: (report: CheckpointReport) => void; reject: (err: Error) => void }>();
  worker.on("message", (m: WorkerMessage) => {
    if (m.kind === "error") {
      options.onError?.(m.message);
      return;
    }
    const { kind: _kind, id, message, ...report } = m;
    if (message !== undefined) options.onError?.(message);
    // A refused checkpoint (another one under way, the main connection's) says nothing of the log.
    // A timer's report counts only the frames there were when it began (writes went on meanwhile);
    // a catchUp's ran while the store's writer waited, so a complete one lets its write restart it.
    if (!report.busy) behind = id === undefined ? report.log >= behindFrames : report.checkpointed < report.log;
    if (id !== undefined) {
      requests.get(id)?.resolve(report);
      requests.delete(id);
    }
    for (const w of waiting.splice(0)) w.resolve(report);
  });
  const fail = (err: Error): void => {
    failure ??= err;
    behind = false;
    if (!closing) options.onError?.(err.message);
    for (const p of requests.values()) p.reject(err);
    requests.clear();
    for (const w of waiting.splice(0)) w.reject(err);
  };
  worker.on("error", fail);
  const exited = new Promise<void>((resolve) =>
    worker.once("exit", () => {
      fail(failure ?? new Error(closing ? "SQLite checkpoint worker closed" : "SQLite checkpoint worker exited"));
      started.delete(db);
      // The main connection checkpoints as before (unless it was closed first).
      if (db.open) db.pragma(`wal_autocheckpoint = ${SQLITE_WAL_AUTOCHECKPOINT_PAGES}`);
      resolve();
    }),
  );
  const request = (kind: "checkpoint" | "pause"): Promise<CheckpointReport> => {
    if (failure) return Promise.reject(failure);
    const id = nextId++;
    return new Promise<CheckpointReport>((resolve, reject) => {
      requests.set(id, { resolve, reject });
      worker.postMessage({ kind, id });
    });
  };
  const checkpointer: WalCheckpointer = {
    get behind() {
      return behind;
    },
    next: () =>
      failure
        ? Promise.reject(failure)
        : awaiting(new Promise<CheckpointReport>((resolve, reject) => waiting.push({ resolve, reject }))),
    catchUp: () => {
      catching ??= awaiting(request("checkpoint")).finally(() => {
        catching = undefined;
      });
      return catching;
    },
    truncateAfterCopy: async (truncate) => {
      await awaiting(request("pause"));
      try {
        truncate();
      } finally {
        if (!failure) worker.postMessage({ kind: "resume" });
      }
    },
    close: async () => {
      started.delete(db);
      closing = true;
      worker.ref();
      worker.postMessage({ kind: "close" });
      await exited;
    },
  };
  started.set(db, checkpointer);
  return checkpointer;
};
