/**
 * How much embedding work ingest costs (issue 18): every text the embedded runtime needs is embedded
 * once (a turn for the boundary gate, whose vector then serves the raw-turn row and the segment's
 * index write; each record once), in one model call per inbox batch for the turns and one per
 * encoded segment for the records; and a long assistant turn costs embedding work linear in its
 * length, not records × turns. A counting fake embedder stands for the model.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { HnswVectorStore } from "../../services/core/adapters/hnsw/vector-store.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { Embedder, EmbedderStats, VectorItem } from "../../services/core/ports.ts";
import type { TurnInput } from "../../services/core/requests.ts";
import { seededRandom } from "../../services/core/seeded-random.ts";
import type { MemoryRecord } from "../../services/core/types.ts";
import { openEmbeddedEngine } from "../../services/embedded/open.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { indexRawTurns } from "../../services/indexer/raw-turns.ts";
import { makeRecord, makeSegment, makeTurn } from "../contract/graph-store.contract.ts";
import { Closer } from "../helpers/closer.ts";

/** The model as the engine sees it: every call and every text it is asked to embed. */
class CountingEmbedder implements Embedder {
  private readonly inner = new HashingEmbedder(64);
  readonly calls: string[][] = [];
  readonly id = "counting";
  readonly dimension = 64;
  stats(): EmbedderStats {
    return this.inner.stats();
  }
  embed(texts: readonly string[]): Promise<Float32Array[]> {
    this.calls.push([...texts]);
    return this.inner.embed(texts);
  }
  get texts(): string[] {
    return this.calls.flat();
  }
}

const at = (minute: number): string => new Date(Date.UTC(2024, 4, 6, 10, minute)).toISOString();

const PLACES = ["Lisbon", "Porto", "Riverside", "Basel", "Oslo", "Kyoto"];
const THINGS = ["tomatoes", "a greyhound", "old maps", "a bicycle", "the violin", "a sourdough starter"];

/** A fixed two-person conversation: each turn says one distinct thing. */
const conversation = (n: number): TurnInput[] =>
  Array.from({ length: n }, (_, i) => ({
    turnId: `t${i}`,
    speaker: i % 2 ? "Ana" : "Ben",
    text: `I went to ${PLACES[i % PLACES.length]} on day ${i} and brought back ${THINGS[(i * 5) % THINGS.length]} for the ${i}th time.`,
    timestamp: at(i),
    sessionId: "s1",
    role: "user" as const,
  }));

/** About `words` words of an assistant's answer: seeded sentences, distinct enough to be kept. */
const longAnswer = (words: number): string => {
  const rnd = seededRandom(18);
  const pick = (xs: readonly string[]): string => xs[Math.floor(rnd() * xs.length)] as string;
  const out: string[] = [];
  let n = 0;
  for (let i = 0; n < words; i++) {
    const s = `The ${pick(["museum", "harbour", "market", "library", "garden"])} in ${pick(PLACES)} keeps ${pick(THINGS)} near ${pick(["the north gate", "a quiet square", "the river", "an old bridge"])} since spring number ${i}.`;
    out.push(s);
    n += s.split(/\s+/).length;
  }
  return out.join(" ");
};

describe("embedding work per ingested turn (embedded runtime, counting embedder)", () => {
  const dirs: string[] = [];
  const engines = new Closer();
  afterEach(() => engines.closeAll());
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const ingest = async (turns: TurnInput[]) => {
    const dir = mkdtempSync(join(tmpdir(), "memory-embed-work-"));
    dirs.push(dir);
    const model = new CountingEmbedder();
    const records: MemoryRecord[] = [];
    let segments = 0;
    const o = await engines.track(
      openEmbeddedEngine(loadConfig({ dataDir: dir }), {
        embedder: model,
        observer: {
          stageEvent() {},
          segmentClosed() {},
          recordsWritten() {},
          segmentIndexed(_s, r) {
            segments++;
            records.push(...r);
          },
        },
      }),
    );
    await o.engine.ingest("t", "c", turns);
    await o.engine.flush("t", "c");
    await o.engine.drain();
    await o.close();
    return { model, records, segments };
  };

  it("embeds each turn once and each record once: turns + records texts, one call per batch and per segment", async () => {
    const turns = conversation(20);
    const { model, records, segments } = await ingest(turns);
    assert.equal(records.length > 0 && segments > 0, true);
    const texts = model.texts;
    assert.equal(new Set(texts).size, texts.length, "no text is embedded twice");
    assert.equal(texts.length, turns.length + records.length, "the turns and the records, nothing else");
    for (const t of turns) assert.ok(texts.includes(`${t.speaker}: ${t.text}`), `turn ${t.turnId} embedded`);
    for (const r of records) assert.ok(texts.includes(r.text), `record ${r.id} embedded`);
    // One inbox batch (20 turns < 32) for the turns, one call per segment for its records.
    assert.equal(model.calls.length, 1 + segments);
    assert.equal(model.calls[0]?.length, turns.length);
  });

  it("a 2,000-word assistant turn costs embedding work linear in its length", async () => {
    const answer = longAnswer(2000);
    const turns: TurnInput[] = [
      {
        turnId: "q",
        speaker: "user",
        text: "What did you find in the old towns?",
        timestamp: at(0),
        sessionId: "s1",
        role: "user",
      },
      { turnId: "a", speaker: "assistant", text: answer, timestamp: at(1), sessionId: "s1", role: "assistant" },
    ];
    const { model, records } = await ingest(turns);
    const texts = model.texts;
    assert.equal(new Set(texts).size, texts.length, "no text is embedded twice");
    assert.equal(texts.length, 2 + records.length, "the two turns and the records");
    const fromAnswer = records.filter((r) => r.source.turnIds.includes("a"));
    const words = answer.split(/\s+/).length;
    // Records are ~40-word chunks of the answer: about words / 40 of them, not turns × anything.
    assert.ok(fromAnswer.length >= words / 80 && fromAnswer.length <= words / 30, `${fromAnswer.length} records`);
    // What is embedded for the answer: the turn once and its records, which restate it once (plus
    // a short "Speaker (date):" prefix each): at most 2.5 × the answer's own characters.
    const chars = texts.reduce((n, t) => n + t.length, 0);
    assert.ok(chars <= 2.5 * answer.length, `${chars} characters embedded for a ${answer.length}-character answer`);
  });
});

describe("indexer: a raw turn written on arrival is not embedded or written again at segment close", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("writes each turn's vector once and each record's once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memory-embed-work-idx-"));
    dirs.push(dir);
    const db = openSqlite(dir);
    const store = new HnswVectorStore(db, dir);
    const written: string[] = [];
    const vectors = Object.assign(Object.create(store) as HnswVectorStore, {
      upsert: (tenant: string, items: readonly VectorItem[]) => {
        written.push(...items.map((i) => i.id));
        return store.upsert(tenant, items);
      },
    });
    const model = new CountingEmbedder();
    const deps = { graph: new SqliteGraphStore(db), vectors, embedder: model };
    try {
      const turns = [
        makeTurn("t1", "Jon started at Acme in March.", at(0)),
        makeTurn("t2", "Jon moved to Berlin for the job.", at(1)),
      ];
      const segment = makeSegment("A", "c1", "seg-1", turns);
      await indexRawTurns(
        deps,
        turns.map((t) => ({ ...t, tenant: "A", conversation: "c1" })),
      );
      const record = makeRecord("A", "c1", "seg-1", {
        text: "Jon (2024-05-06): Jon started at Acme in March.",
        type: "fact",
        entities: ["Jon"],
        topics: ["work"],
        saidAt: at(0),
        turnIds: ["t1"],
      });
      await indexSegment({ ...deps, candidates: false }, segment, [record]);
      assert.equal(new Set(written).size, written.length, `a vector written twice: ${written.join(", ")}`);
      assert.equal(written.length, 3, "two turns on arrival, one record at segment close");
      assert.deepEqual(
        model.calls.map((c) => c.length),
        [2, 1],
        "the turns once on arrival, the record at close",
      );
      assert.equal((await vectors.get("A", [record.id])).length, 1);
    } finally {
      await store.close();
      db.close();
    }
  });
});
