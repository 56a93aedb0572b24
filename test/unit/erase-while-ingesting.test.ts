import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, describe, it } from "node:test";
import Database from "better-sqlite3";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { SQLITE_FILE } from "../../services/core/adapters/sqlite-db.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { GraphStore, VectorStore } from "../../services/core/ports.ts";
import type { EmbeddedEngine } from "../../services/embedded/engine.ts";
import { openEmbeddedEngine } from "../../services/embedded/open.ts";
import { Closer } from "../helpers/closer.ts";

const turn = (text: string, minute: number) => ({
  speaker: "Ana",
  role: "user" as const,
  text,
  timestamp: `2024-05-06T10:${String(minute).padStart(2, "0")}:00Z`,
  sessionId: "s1",
});

/** Every record text of the tenant (current and superseded), one string. */
const recordTexts = async (engine: EmbeddedEngine, tenant: string): Promise<string> =>
  (await engine.listRecords(tenant, { limit: 500, includeSuperseded: true })).records.map((r) => r.text).join(" | ");

describe("embedded erasure while turns keep arriving", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const engines = new Closer();
  /** Gates a test holds an engine's work on: opened before the engines close, even when the test failed. */
  const gates: (() => void)[] = [];
  afterEach(() => {
    for (const open of gates.splice(0)) open();
    return engines.closeAll();
  });
  /**
   * A gate a wrapped store call waits at (`pass`): `reached` resolves once a call arrives, `open`
   * lets it and later ones through.
   */
  const gate = (): { reached: Promise<void>; pass: () => Promise<void>; open: () => void } => {
    let arrived: () => void = () => {};
    const reached = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    let open: () => void = () => {};
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    gates.push(open);
    return {
      reached,
      pass: async () => {
        arrived();
        await opened;
      },
      open,
    };
  };
  const open = async (): Promise<EmbeddedEngine> => {
    const dir = mkdtempSync(join(tmpdir(), "erase-ingest-"));
    dirs.push(dir);
    const opened = await engines.track(
      openEmbeddedEngine(loadConfig({ dataDir: dir }), { embedder: new HashingEmbedder() }),
    );
    return opened.engine;
  };
  const seed = async (engine: EmbeddedEngine): Promise<void> => {
    await engine.ingest("T", "c1", [
      turn("I adopted a greyhound called Pepper.", 0),
      turn("Pepper sleeps all day.", 1),
    ]);
    await engine.ingest("U", "c1", [turn("I play the cello in an orchestra.", 0)]);
    await engine.flush("T");
    await engine.flush("U");
    await engine.drain();
    assert.match(await recordTexts(engine, "T"), /greyhound/);
  };

  it("a tenant's erasure keeps what was accepted after the call, and ids go on from the erased ones", async () => {
    const engine = await open();
    await seed(engine);
    const erasing = engine.erase("T");
    // Accepted after the call, while the erasure runs: for T and for another tenant.
    const later = await engine.ingest("T", "c1", [turn("I moved to Lisbon in June.", 5)]);
    await engine.ingest("U", "c1", [turn("The orchestra tours Japan next spring.", 5)]);
    const report = await erasing;
    assert.equal(report.records, 2);
    await engine.flush("T");
    await engine.flush("U");
    await engine.drain();
    const t = await recordTexts(engine, "T");
    assert.match(t, /Lisbon/, "the turn accepted after the call is kept");
    assert.doesNotMatch(t, /greyhound|Pepper/, "what was accepted before is erased");
    assert.match(await recordTexts(engine, "U"), /Japan/, "another tenant's turns wait, then go through");
    // The kept turn holds @3 of c1: a later assigned id goes on from it instead of starting at @1 again.
    assert.deepEqual(later.turnIds, ["@3"]);
    assert.deepEqual((await engine.ingest("T", "c1", [turn("Lisbon is sunny.", 6)])).turnIds, ["@4"]);
  });

  it("an idle flush during the erasure leaves nothing of the erased conversation behind", async () => {
    const dir = mkdtempSync(join(tmpdir(), "erase-ingest-"));
    dirs.push(dir);
    let now = Date.parse("2024-05-06T11:00:00Z");
    const opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }), {
      embedder: new HashingEmbedder(),
      settings: { clock: () => now },
    });
    const engine = opened.engine;
    await engine.ingest("T", "alice@example.com", [turn("My PIN is 4711.", 0)]);
    await engine.drain(); // the segment is open, in memory
    const erasing = engine.erase("T", "alice@example.com");
    // The idle tick while the erasure holds the pipeline (what the engine's idle timer calls).
    now += 31 * 60_000;
    (engine as unknown as { flushIdle(): void }).flushIdle();
    await erasing;
    await engine.drain();
    await opened.close();
    const db = new Database(join(dir, SQLITE_FILE), { readonly: true });
    try {
      for (const table of ["inbox", "turn_id_counters", "stage_state", "pending_segments"]) {
        const rows = db.prepare(`SELECT * FROM ${table}`).all();
        assert.ok(!JSON.stringify(rows).includes("alice@example.com"), `${table}: ${JSON.stringify(rows)}`);
      }
    } finally {
      db.close();
    }
  });

  it("a conversation's erasure: a turn of it accepted after the call is kept, one accepted before is erased", async () => {
    const engine = await open();
    await seed(engine);
    const first = engine.erase("T", "c1");
    // Accepted after the first call but before the second: the second erases it.
    await engine.ingest("T", "c2", [turn("My sister lives in Porto.", 3)]);
    const second = engine.erase("T", "c2");
    // Accepted after both calls: kept.
    await engine.ingest("T", "c1", [turn("I moved to Lisbon in June.", 5)]);
    await engine.ingest("T", "c2", [turn("I visit Madrid every May.", 6)]);
    await Promise.all([first, second]);
    await engine.flush("T");
    await engine.drain();
    const t = await recordTexts(engine, "T");
    assert.match(t, /Lisbon/);
    assert.match(t, /Madrid/);
    assert.doesNotMatch(t, /greyhound|Pepper|Porto/);
  });

  it("the pipeline goes on while the erasure writes the vector index files: turns sent meanwhile are indexed before it returns", {
    timeout: 60_000,
  }, async () => {
    const engine = await open();
    await seed(engine);
    // The index files' write waits on a gate (at 100K records it waits seconds for the rebuild a
    // large delete starts). While the pipeline was held until it was done, the drain below did not
    // end: the test timed out.
    const vectors = (engine as unknown as { parts: { vectors: VectorStore } }).parts.vectors;
    const flush = vectors.flush.bind(vectors);
    const atFlush = gate();
    vectors.flush = async () => {
      await atFlush.pass();
      return flush();
    };
    const erasing = engine.erase("T", "c1");
    await engine.ingest("U", "c1", [turn("The orchestra tours Japan next spring.", 5)]);
    await engine.ingest("T", "c1", [turn("I moved to Lisbon in June.", 6)]);
    await engine.flush("U");
    await engine.flush("T");
    await atFlush.reached;
    await engine.drain();
    assert.match(await recordTexts(engine, "U"), /Japan/, "another tenant's turn is indexed while the files wait");
    assert.match(await recordTexts(engine, "T"), /Lisbon/, "the erased conversation's later turn too");
    atFlush.open();
    const report = await erasing;
    assert.equal(report.records, 2);
    const t = await recordTexts(engine, "T");
    assert.match(t, /Lisbon/, "kept after the erasure returns");
    assert.doesNotMatch(t, /greyhound|Pepper/);
  });

  it("while a tenant's deletes run, other tenants' turns are indexed and the tenant's own later turns wait, then are kept", {
    timeout: 60_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "erase-ingest-"));
    dirs.push(dir);
    // Resolves when a segment of tenant U is indexed.
    let indexedU: () => void = () => {};
    const uIndexed = new Promise<void>((resolve) => {
      indexedU = resolve;
    });
    const observer = {
      stageEvent: () => {},
      segmentClosed: () => {},
      recordsWritten: () => {},
      segmentIndexed: (segment: { tenant: string }) => {
        if (segment.tenant === "U") indexedU();
      },
    };
    const opened = await engines.track(
      openEmbeddedEngine(loadConfig({ dataDir: dir }), { embedder: new HashingEmbedder(), observer }),
    );
    const engine = opened.engine;
    await engine.ingest("T", "c1", [
      turn("I adopted a greyhound called Pepper.", 0),
      turn("Pepper sleeps all day.", 1),
    ]);
    await engine.flush("T");
    await engine.drain();
    // The tenant's last delete waits on a gate, as a large tenant's deletes take seconds.
    const graph = (engine as unknown as { parts: { graph: GraphStore } }).parts.graph;
    const deleteTenant = graph.deleteTenant.bind(graph);
    const atDelete = gate();
    graph.deleteTenant = async (tenant: string) => {
      await atDelete.pass();
      return deleteTenant(tenant);
    };
    const erasing = engine.erase("T");
    await engine.ingest("T", "c1", [turn("I moved to Lisbon in June.", 5)]);
    await engine.ingest("U", "c1", [turn("The orchestra tours Japan next spring.", 5)]);
    await engine.flush("T");
    await engine.flush("U");
    await atDelete.reached;
    // Before: every tenant's entries after the call waited for the deletes, so this never resolved.
    await uIndexed;
    assert.match(await recordTexts(engine, "U"), /Japan/, "another tenant's turn is indexed during the deletes");
    assert.doesNotMatch(await recordTexts(engine, "T"), /Lisbon/, "the tenant's own later turn waits");
    atDelete.open();
    const report = await erasing;
    assert.equal(report.records, 2);
    await engine.drain();
    const t = await recordTexts(engine, "T");
    assert.match(t, /Lisbon/, "and is kept after the erasure");
    assert.doesNotMatch(t, /greyhound|Pepper/);
    // Every entry is done: a second drain has nothing left, the inbox lag is 0.
    assert.equal((await engine.health()).details.inboxLag, "0");
  });
});
