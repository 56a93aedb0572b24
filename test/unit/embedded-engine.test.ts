import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { CompressionResult, Compressor } from "../../services/core/ports.ts";
import type { TurnInput } from "../../services/core/requests.ts";
import { engineSettingsFrom, openEmbeddedEngine } from "../../services/embedded/open.ts";
import { StatisticalCompressor } from "../../services/sensory/statistical-compressor.ts";
import { Closer } from "../helpers/closer.ts";

/** Fails on one marked turn, like a model that chokes on an input. */
class PoisonedCompressor implements Compressor {
  readonly id = "poisoned";
  private readonly inner = new StatisticalCompressor();
  compress(text: string, keepRate: number): Promise<CompressionResult> {
    if (text.includes("POISON")) throw new Error("compressor cannot handle this input");
    return this.inner.compress(text, keepRate);
  }
}

const turns = (n: number, session = "s1", offset = 0): TurnInput[] =>
  Array.from({ length: n }, (_, i) => ({
    turnId: `${session}-${i + offset}`,
    speaker: i % 2 ? "Ana" : "Ben",
    text: `Ben told Ana about the garden in Riverside and the ${i + offset} tomatoes he planted on Monday.`,
    timestamp: new Date(Date.UTC(2024, 4, 6, 10, i + offset)).toISOString(),
    sessionId: session,
    role: "user" as const,
  }));

describe("embedded engine (unit, hashing embedder)", () => {
  const dirs: string[] = [];
  // Each test closes its engine; one that fails first still gets it closed here.
  const engines = new Closer();
  afterEach(() => engines.closeAll());
  const open = (extra: Parameters<typeof openEmbeddedEngine>[1] = {}) => {
    const dir = mkdtempSync(join(tmpdir(), "memory-engine-"));
    dirs.push(dir);
    return engines.track(
      openEmbeddedEngine(loadConfig({ dataDir: dir }), { embedder: new HashingEmbedder(), ...extra }),
    );
  };
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("a turn is queryable by the raw-turn routes as soon as the inbox has it, before its segment closes", async () => {
    const o = await open();
    await o.engine.ingest("t", "c", [
      {
        turnId: "g1",
        speaker: "Ana",
        text: "I adopted a greyhound called Pepper last week.",
        timestamp: "2024-05-06T10:00:00.000Z",
        sessionId: "s1",
        role: "user",
      },
    ]);
    await o.engine.drain();
    assert.equal((await o.engine.listRecords("t", { limit: 10 })).records.length, 0, "no segment closed yet");
    const result = await o.engine.query("t", { question: "What is the name of Ana's greyhound?" });
    const turn = result.items.find((i) => i.kind === "turn");
    assert.deepEqual(turn?.turnIds, ["g1"]);
    assert.ok(turn?.routes.some((r) => r.route === "raw-lexical"));
    assert.ok(turn?.routes.some((r) => r.route === "raw-dense"));
  });

  it("a bounded queue of one still carries everything through (backpressure, not loss)", async () => {
    const o = await open({
      settings: {
        queueCapacity: 1,
        batchSize: 4,
        segmenter: { ...engineSettingsFrom(loadConfig({})).segmenter, bufferTokens: 0 },
      },
    });
    await o.engine.ingest("t", "c", turns(30, "s1"));
    await o.engine.ingest("t", "c", turns(10, "s2", 30));
    await o.engine.flush("t", "c");
    await o.engine.drain();
    assert.equal(o.engine.progress.turns, 40);
    assert.ok(o.engine.progress.segments >= 2, "session change and flush both close a segment");
    const page = await o.engine.listRecords("t", { limit: 200 });
    const cited = new Set(page.records.flatMap((r) => r.source.turnIds));
    assert.ok(cited.has("s1-0") && cited.has("s2-39"), [...cited].join(" "));
    await o.close();
  });

  it("accepts a turn id once per conversation: re-sending a batch changes nothing", async () => {
    const o = await open();
    await o.engine.ingest("t", "c", turns(6));
    await o.engine.ingest("t", "c", turns(6));
    await o.engine.flush("t", "c");
    await o.engine.drain();
    assert.equal(o.engine.progress.turns, 6);
    await o.close();
  });

  it("sets a poison turn aside as a dead letter with its reason; the rest flows", async () => {
    const o = await open({ compressor: new PoisonedCompressor() });
    const batch = turns(5);
    batch[2] = { ...(batch[2] as TurnInput), text: "POISON pill" };
    await o.engine.ingest("t", "c", batch);
    await o.engine.flush("t", "c");
    await o.engine.drain();
    assert.equal(o.engine.progress.turns, 4);
    const letters = await o.engine.deadLetters(10);
    assert.equal(letters.length, 1);
    assert.equal(letters[0]?.stage, "sensory+segmenter");
    assert.match(letters[0]?.error ?? "", /compressor cannot handle/);
    assert.match(letters[0]?.payload ?? "", /POISON pill/);
    assert.equal((await o.engine.health()).ok, true);
    await o.close();
  });

  it("rejects turns that fail the schema before anything is stored", async () => {
    const o = await open();
    await assert.rejects(
      o.engine.ingest("t", "c", [{ speaker: "A", text: "x", timestamp: "not a date", sessionId: "s", role: "user" }]),
      /timestamp/,
    );
    assert.equal((await o.engine.health()).details.inboxLag, "0");
    await o.close();
  });
});
