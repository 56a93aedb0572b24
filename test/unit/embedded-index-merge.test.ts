// The embedded engine's idle-time merge of the full-text index (EmbeddedEngine.mergeIndexWhenIdle,
// the idle tick's upkeep): not while turns arrive, done once nothing was ingested for a tick, and
// again after new turns.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { FTS_TABLES, segmentsPerLevel } from "../../services/core/adapters/sqlite/fts-segments.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { TurnInput } from "../../services/core/requests.ts";
import type { PipelineObserver } from "../../services/embedded/engine.ts";
import { engineSettingsFrom, openEmbeddedEngine } from "../../services/embedded/open.ts";

const turns = (n: number, session: string): TurnInput[] =>
  Array.from({ length: n }, (_, i) => ({
    turnId: `${session}-${i}`,
    speaker: i % 2 ? "Ana" : "Ben",
    text: `Ben told Ana about the garden ${session} and the ${i} tomatoes w${i * 7} he planted on Monday.`,
    timestamp: new Date(Date.UTC(2024, 4, 6, 10, i)).toISOString(),
    sessionId: session,
    role: "user" as const,
  }));

/**
 * An engine on a fresh folder whose clock moves only when told (passIdleTick: past one idle tick),
 * a second connection on its SQLite file, and their close with the folder's removal.
 */
const openIdleEngine = async (prefix: string, observer?: PipelineObserver) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  let now = Date.UTC(2024, 4, 6, 12);
  const config = loadConfig({ dataDir: dir });
  const settings = { ...engineSettingsFrom(config), clock: () => now };
  const o = await openEmbeddedEngine(config, {
    embedder: new HashingEmbedder(),
    settings,
    ...(observer ? { observer } : {}),
  });
  const db = openSqlite(dir);
  return {
    engine: o.engine,
    db,
    passIdleTick: (): void => {
      now += 60_001;
    },
    close: async (): Promise<void> => {
      db.close();
      await o.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
};

describe("embedded engine: idle-time merge of the full-text index", () => {
  it("merges once idle for a tick, not while turns come, and again after new turns", async () => {
    // The second connection on the same file reads the index structure. Automerge off: each write
    // transaction leaves its own segment (a test-sized index would be folded as it grows).
    const { engine, db, passIdleTick, close } = await openIdleEngine("memory-engine-merge-");
    try {
      for (const t of FTS_TABLES) {
        db.prepare(`INSERT INTO ${t} (${t}, rank) VALUES ('automerge', ?)`).run(0n);
        db.prepare(`INSERT INTO ${t} (${t}, rank) VALUES ('crisismerge', ?)`).run(1000n);
      }
      const segments = (): number => segmentsPerLevel(db, "turns_fts").reduce((a, b) => a + b, 0);
      const ingest = async (conversations: number, tag: string): Promise<void> => {
        for (let c = 0; c < conversations; c++) {
          await engine.ingest("t", `c${tag}${c}`, turns(6, `s${tag}${c}`));
          await engine.flush("t", `c${tag}${c}`);
          await engine.drain();
        }
      };
      await ingest(8, "a");
      const before = segments();
      assert.ok(before >= 8, `one segment or more per conversation written (${before})`);

      // Turns came in this tick: no merge yet.
      assert.equal(await engine.mergeIndexWhenIdle(), false);
      assert.equal(segments(), before);

      passIdleTick();
      assert.equal(await engine.mergeIndexWhenIdle(), true);
      for (const t of FTS_TABLES) assert.ok(Math.max(...segmentsPerLevel(db, t)) <= 1, `${t}: <= 1 segment per level`);
      assert.ok(segments() < before);
      // Every turn holds "tomatoes": the merged index finds all 48 (which of them a packed
      // context shows is the ranking's business, not the index's).
      const found = await new SqliteGraphStore(db).searchTurnsLexical("t", "tomatoes", 100);
      assert.equal(found.length, 8 * 6, "the merged index still finds every turn");

      // New turns, new segments; merged again only once idle for a tick.
      await ingest(3, "b");
      const grown = segments();
      assert.ok(grown > 1);
      assert.equal(await engine.mergeIndexWhenIdle(), false);
      passIdleTick();
      assert.equal(await engine.mergeIndexWhenIdle(), true);
      assert.ok(segments() < grown);
    } finally {
      await close();
    }
  });

  it("reports each step to the observer, and a failed step as an error (left for the next tick)", async () => {
    const events: { stage: string; outcome: string }[] = [];
    const observer = {
      stageEvent: (stage: string, outcome: "ok" | "error" | "dlq") => {
        if (stage === "index-merge") events.push({ stage, outcome });
      },
      segmentClosed: () => {},
      recordsWritten: () => {},
    };
    const { engine, db, passIdleTick, close } = await openIdleEngine("memory-engine-merge-fail-", observer);
    try {
      await engine.ingest("t", "c1", turns(6, "s1"));
      await engine.flush("t", "c1");
      await engine.drain();
      passIdleTick();
      assert.equal(await engine.mergeIndexWhenIdle(), true);
      assert.ok(events.length > 0 && events.every((e) => e.outcome === "ok"), "each step reported ok");

      // A full-text table the step cannot merge: the step fails, is reported, and the tick ends.
      await engine.ingest("t", "c2", turns(6, "s2"));
      await engine.flush("t", "c2");
      await engine.drain();
      db.exec("DROP TABLE turns_fts");
      events.length = 0;
      passIdleTick();
      assert.equal(await engine.mergeIndexWhenIdle(), false);
      assert.deepEqual(events.at(-1), { stage: "index-merge", outcome: "error" });
    } finally {
      await close();
    }
  });
});

describe("embedded engine: idle-time write of the vector index files", () => {
  it("writes the changed tenants' index files once idle for a tick, not while turns come, and again after new turns", async () => {
    const { engine, db, passIdleTick, close } = await openIdleEngine("memory-engine-vector-flush-");
    /** Tenants whose index file is behind their writes (what a crash now would leave to rebuild). */
    const behind = (): string[] =>
      (
        db.prepare("SELECT tenant FROM vector_tenants WHERE flushed_version <> version ORDER BY tenant").all() as {
          tenant: string;
        }[]
      ).map((r) => r.tenant);
    const ingest = async (tenant: string, tag: string): Promise<void> => {
      await engine.ingest(tenant, `c${tag}`, turns(6, `s${tag}`));
      await engine.flush(tenant, `c${tag}`);
      await engine.drain();
    };
    try {
      await ingest("t1", "a");
      await ingest("t2", "b");
      assert.deepEqual(behind(), ["t1", "t2"]);
      assert.equal(await engine.flushVectorsWhenIdle(), false, "turns came this tick");
      assert.deepEqual(behind(), ["t1", "t2"]);
      passIdleTick();
      assert.equal(await engine.flushVectorsWhenIdle(), true);
      assert.deepEqual(behind(), []);
      await ingest("t2", "c");
      assert.deepEqual(behind(), ["t2"]);
      assert.equal(await engine.flushVectorsWhenIdle(), false);
      passIdleTick();
      assert.equal(await engine.flushVectorsWhenIdle(), true);
      assert.deepEqual(behind(), []);
    } finally {
      await close();
    }
  });
});
