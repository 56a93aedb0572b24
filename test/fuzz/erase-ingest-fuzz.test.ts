/**
 * Seeded interleavings of ingest, erasure, flush, drain and consolidation on one embedded engine
 * (two tenants, two conversations each): nothing hangs, every call settles, a turn is erased
 * exactly when an erasure covering it was called after it (gone from raw turns, records and the
 * inbox), and is kept otherwise. Bounded: 40 seeds of 60 operations (and 20 with one-entry
 * batches), each wait capped. More seeds than at first: a race between the checkpoint worker and
 * an erasure's purge (ced7ed2) showed only across ~120 seeds.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import Database from "better-sqlite3";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { SQLITE_FILE } from "../../services/core/adapters/sqlite-db.ts";
import { loadConfig } from "../../services/core/config.ts";
import { openEmbeddedEngine } from "../../services/embedded/open.ts";
import { seededRandom } from "../helpers/seeded.ts";

const SEEDS = 40;
const OPERATIONS = 60;
const WAIT_MS = 30_000;

const within = <T>(p: Promise<T>, what: string): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled within ${WAIT_MS} ms`)), WAIT_MS);
  });
  return Promise.race([p, limit]).finally(() => clearTimeout(timer));
};

interface Sent {
  word: string;
  tenant: string;
  conversation: string;
  at: number;
}

const runSeed = async (seed: number, settings: { batchSize?: number; queueCapacity?: number }): Promise<string[]> => {
  const next = seededRandom(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)] as T;
  const dir = mkdtempSync(join(tmpdir(), "erase-fuzz-"));
  const opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }), { embedder: new HashingEmbedder(), settings });
  const engine = opened.engine;
  const sent: Sent[] = [];
  const erasures: { tenant: string; conversation: string | undefined; at: number }[] = [];
  const calls: Promise<unknown>[] = [];
  const problems: string[] = [];
  let at = 0;
  try {
    for (let i = 0; i < OPERATIONS; i++) {
      const x = next();
      const tenant = pick(["T", "U"]);
      const conversation = pick(["c1", "c2"]);
      if (x < 0.5) {
        const word = `zq${seed}x${i}q`;
        sent.push({ word, tenant, conversation, at: at++ });
        const withId = next() < 0.2;
        calls.push(
          engine.ingest(tenant, conversation, [
            {
              speaker: "Ana",
              role: "user",
              text: `I like ${word} very much.`,
              timestamp: `2024-05-06T10:${String(i).padStart(2, "0")}:00Z`,
              sessionId: "s1",
              ...(withId ? { turnId: `cid-${word}` } : {}),
            },
          ]),
        );
      } else if (x < 0.62) {
        const scope = next() < 0.5 ? conversation : undefined;
        erasures.push({ tenant, conversation: scope, at: at++ });
        calls.push(engine.erase(tenant, scope));
      } else if (x < 0.72) calls.push(engine.flush(tenant, next() < 0.5 ? conversation : undefined));
      else if (x < 0.8) calls.push(engine.drain());
      else if (x < 0.86) calls.push(engine.consolidate(next() < 0.5 ? tenant : undefined));
      else {
        // Let the pipeline run a little: a few turns of the event loop.
        const turns = Math.floor(next() * 20);
        for (let t = 0; t < turns; t++) await new Promise<void>((resolve) => setImmediate(resolve));
      }
    }
    const settled = await within(Promise.allSettled(calls), `seed ${seed}: the calls`);
    for (const s of settled) if (s.status === "rejected") problems.push(`a call failed: ${String(s.reason)}`);
    for (const t of ["T", "U"]) await engine.flush(t);
    await within(engine.drain(), `seed ${seed}: the final drain`);
  } finally {
    await within(opened.close(), `seed ${seed}: close`);
  }
  const db = new Database(join(dir, SQLITE_FILE), { readonly: true });
  try {
    const raw = (db.prepare("SELECT text FROM turns").all() as { text: string }[]).map((r) => r.text).join(" ");
    const records = (db.prepare("SELECT json FROM records").all() as { json: string }[]).map((r) => r.json).join(" ");
    const inbox = (db.prepare("SELECT json FROM inbox").all() as { json: string }[]).map((r) => r.json).join(" ");
    for (const s of sent) {
      const erased = erasures.some(
        (e) => e.at > s.at && e.tenant === s.tenant && (e.conversation ?? s.conversation) === s.conversation,
      );
      const where = [raw.includes(`${s.word} `) && "raw turns", records.includes(s.word) && "records"];
      if (erased && (where.some(Boolean) || inbox.includes(s.word)))
        problems.push(`${s.word} (${s.tenant}/${s.conversation}) should be erased: ${where.filter(Boolean)}`);
      if (!erased && !raw.includes(`${s.word} `))
        problems.push(`${s.word} (${s.tenant}/${s.conversation}) should be kept, not in raw turns`);
    }
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return problems.map((p) => `seed ${seed}: ${p}`);
};

describe("embedded erasure fuzz: ingest, erase, flush, drain and consolidate interleaved", () => {
  it("settles every call and erases exactly what was accepted before a covering erasure", async () => {
    const problems: string[] = [];
    for (let seed = 1; seed <= SEEDS; seed++) problems.push(...(await runSeed(seed, {})));
    assert.deepEqual(problems, []);
  });

  it("the same with one-entry batches and a one-segment encode queue", async () => {
    const problems: string[] = [];
    for (let seed = 101; seed <= 100 + SEEDS / 2; seed++)
      problems.push(...(await runSeed(seed, { batchSize: 1, queueCapacity: 1 })));
    assert.deepEqual(problems, []);
  });
});
