/**
 * The indexer's raw-turn consumer without a broker (issue 18), over real SQLite + HNSW stores in a
 * temporary folder and the hashing embedder: a sensory turn is found by both raw-turn routes (dense
 * and lexical) before any segment holds it; the segment-close write later names the segment on
 * the same rows and embeds no turn again; a replay writes nothing new; an erase control erases what
 * it wrote and tombstones the erased record ids; a key that lies is poison.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import hnswlib from "hnswlib-node";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { hnswFileOf } from "../../services/core/adapters/hnsw/vector-store.ts";
import { UpdateCandidatesEventSchema } from "../../services/core/adapters/kafka/serde.ts";
import { PoisonError } from "../../services/core/adapters/kafka/stage-runtime.ts";
import { turnRowId } from "../../services/core/ids.ts";
import { type GraphStore, OPEN_SEGMENT_ID, type VectorStore } from "../../services/core/ports.ts";
import { keyOf, type SensoryTurn, SensoryTurnSchema } from "../../services/core/types.ts";
import { FreshnessGate } from "../../services/indexer/freshness-gate.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { rawTurnStage } from "../../services/indexer/raw-turn-stage.ts";
import { rawTurnText } from "../../services/indexer/raw-turns.ts";
import { type LocalStores, withLocalStores } from "../helpers/local-stores.ts";
import { jsonCodec, segmentOf, segmentTurnOf } from "../helpers/stage-fixtures.ts";

interface Stores {
  graph: GraphStore;
  vectors: VectorStore;
  embedder: HashingEmbedder;
}

const withStores = (fn: (s: LocalStores) => Promise<void>): Promise<void> => withLocalStores("raw-turn-stage-", fn);

const stageOf = (s: Stores & { secondEmbedder?: HashingEmbedder }) =>
  rawTurnStage({
    input: jsonCodec("memory.sensory.v1", SensoryTurnSchema),
    output: jsonCodec("memory.update-queue.v1", UpdateCandidatesEventSchema),
    ...s,
  });

const T1 = segmentTurnOf("t1", "I adopted a greyhound called Pepper last week.", "2023-06-01T10:00:00.000Z");
const T2 = segmentTurnOf("t2", "She sleeps on the sofa all afternoon.", "2023-06-01T10:01:00.000Z");
const sensoryOf = (t: typeof T1, tenant = "acme", conversation = "c1"): SensoryTurn => ({
  tenant,
  conversation,
  turnId: t.turnId,
  speaker: t.speaker,
  role: t.role,
  text: t.text,
  timestamp: t.timestamp,
  sessionId: t.sessionId,
  compressed: t.compressed,
  keptRatio: 1,
});

const feed = async (stage: ReturnType<typeof stageOf>, turns: SensoryTurn[]) => {
  const inputs = turns.map((value) => ({
    key: keyOf(value.tenant, value.conversation),
    input: { kind: "event" as const, value },
  }));
  await stage.prepare?.(inputs);
  for (const { key, input } of inputs)
    assert.deepEqual(await stage.handle(key, input, undefined), { outputs: [], state: undefined });
};

describe("indexer raw-turn consumer", () => {
  it("a chunk abandoned after its prepare leaves no id that would skip a reused turn id's write after an erase", async () => {
    await withStores(async (s) => {
      const stage = stageOf(s);
      const key = keyOf("acme", "c1");
      // Prepared, then abandoned (a rebalance): its handle() never runs.
      await stage.prepare?.([{ key, input: { kind: "event", value: sensoryOf(T1) } }]);
      // Read again later behind an erase of the conversation, the id reused by a new turn.
      const reused = { ...sensoryOf(T1), text: "A new conversation under the same id." };
      const chunk = [
        { key, input: { kind: "control" as const, control: "erase" as const } },
        { key, input: { kind: "event" as const, value: reused } },
      ];
      await stage.prepare?.(chunk);
      for (const { key: k, input } of chunk) await stage.handle(k, input, undefined);
      const [row] = await s.graph.getTurns("acme", [{ conversation: "c1", turnId: T1.turnId }]);
      assert.equal(row?.text, reused.text, "the reused id's turn is written after the erase");
      assert.equal(await s.vectors.count("acme"), 1);
    });
  });

  it("its writes are urgent work of the process's gate: the records consumer's next step waits for them", async () => {
    await withStores(async (s) => {
      const gate = new FreshnessGate(60_000);
      const stage = rawTurnStage({
        input: jsonCodec("memory.sensory.v1", SensoryTurnSchema),
        output: jsonCodec("memory.update-queue.v1", UpdateCandidatesEventSchema),
        ...s,
        gate,
      });
      const value = sensoryOf(T1);
      const writing = stage.prepare?.([{ key: keyOf("acme", "c1"), input: { kind: "event", value } }]);
      // Without the gate this would run at once, before the turn's vector and row exist.
      await gate.idle();
      assert.equal(await s.vectors.count("acme"), 1, "the raw turn was written before the records step ran");
      assert.equal((await s.graph.getTurns("acme", [{ conversation: "c1", turnId: "t1" }])).length, 1);
      await writing;
    });
  });

  it("chunks of two partitions in flight at once: each turn is embedded and written once, by its chunk's prepare", async () => {
    await withStores(async (s) => {
      const stage = rawTurnStage({
        input: jsonCodec("memory.sensory.v1", SensoryTurnSchema),
        output: jsonCodec("memory.update-queue.v1", UpdateCandidatesEventSchema),
        ...s,
        partitionsAtOnce: 2,
      });
      assert.equal(stage.partitionsAtOnce, 2);
      const chunkOf = (turns: SensoryTurn[]) =>
        turns.map((value) => ({
          key: keyOf(value.tenant, value.conversation),
          input: { kind: "event" as const, value },
        }));
      const a = chunkOf([sensoryOf(T1, "acme", "c1"), sensoryOf(T2, "acme", "c1")]);
      const b = chunkOf([sensoryOf(T1, "acme", "c2")]);
      // Partition A's prepare, then B's, before either chunk's handles (as two partitions in flight do).
      await stage.prepare?.(a);
      await stage.prepare?.(b);
      const texts = s.embedder.stats().texts;
      for (const { key, input } of [...b, ...a]) await stage.handle(key, input, undefined);
      assert.equal(s.embedder.stats().texts, texts, "no turn embedded again by handle()");
      assert.equal(await s.vectors.count("acme"), 3);
      const rows = await s.graph.getTurns("acme", [
        { conversation: "c1", turnId: "t1" },
        { conversation: "c1", turnId: "t2" },
        { conversation: "c2", turnId: "t1" },
      ]);
      assert.equal(rows.length, 3);
    });
  });

  it("a turn is found by both raw-turn routes before its segment closes", async () => {
    await withStores(async (s) => {
      await feed(stageOf(s), [sensoryOf(T1), sensoryOf(T2)]);
      assert.equal(await s.graph.countSegments("acme"), 0);
      const [query] = await s.embedder.embed([rawTurnText(T1)]);
      const dense = await s.vectors.search("acme", query as Float32Array, 1, { conversation: "c1", kind: "turn" });
      assert.deepEqual(
        dense.map((h) => h.id),
        [turnRowId("c1", "t1")],
      );
      const lexical = await s.graph.searchTurnsLexical("acme", "greyhound Pepper", 5, "c1");
      assert.deepEqual(
        lexical.map((h) => h.id),
        [turnRowId("c1", "t1")],
      );
      const [stored] = await s.graph.getTurns("acme", [{ conversation: "c1", turnId: "t1" }]);
      assert.equal(stored?.segmentId, OPEN_SEGMENT_ID);
      assert.equal(stored?.text, T1.text);
      // Other tenants see nothing of it.
      assert.deepEqual(await s.graph.searchTurnsLexical("globex", "greyhound", 5), []);
      assert.equal(await s.vectors.count("globex"), 0);
    });
  });

  it("with a second-opinion model, each turn it writes carries that model's vector of the turn's text", async () => {
    await withStores(async (s) => {
      const second = new HashingEmbedder(40);
      await feed(stageOf({ ...s, secondEmbedder: second }), [sensoryOf(T1), sensoryOf(T2)]);
      const got = await s.vectors.getSecondVectors("acme", [turnRowId("c1", "t1"), turnRowId("c1", "t2")]);
      assert.equal(got.size, 2);
      assert.deepEqual(got.get(turnRowId("c1", "t2")), (await second.embed([rawTurnText(T2)]))[0]);
    });
  });

  it("the segment-close write names the segment, embeds no turn again, and a replay adds nothing", async () => {
    await withStores(async (s) => {
      const stage = stageOf(s);
      await feed(stage, [sensoryOf(T1), sensoryOf(T2)]);
      const textsBefore = s.embedder.stats().texts;
      const vectorsBefore = await s.vectors.count("acme");
      await indexSegment({ ...s, candidates: false }, segmentOf("seg-1", [T1, T2]), []);
      assert.equal(s.embedder.stats().texts, textsBefore, "the turns' vectors were stored already");
      assert.equal(await s.vectors.count("acme"), vectorsBefore);
      const turns = await s.graph.getTurns("acme", [
        { conversation: "c1", turnId: "t1" },
        { conversation: "c1", turnId: "t2" },
      ]);
      assert.deepEqual(
        turns.map((t) => t.segmentId),
        ["seg-1", "seg-1"],
      );
      await feed(stage, [sensoryOf(T1)]);
      assert.equal(await s.vectors.count("acme"), vectorsBefore);
      assert.equal((await s.graph.getTurns("acme", [{ conversation: "c1", turnId: "t1" }]))[0]?.segmentId, "seg-1");
      assert.equal((await s.graph.searchTurnsLexical("acme", "greyhound", 5)).length, 1);
    });
  });

  it("an erase control erases the raw turns it wrote and tombstones nothing (the records consumer does)", async () => {
    await withStores(async (s) => {
      const stage = stageOf(s);
      await feed(stage, [sensoryOf(T1), sensoryOf(T1, "acme", "c2")]);
      const out = await stage.handle(
        keyOf("acme", "c1"),
        { kind: "control", control: "erase", erasedIds: ["r-gone"] },
        undefined,
      );
      assert.deepEqual(out, { outputs: [], state: undefined });
      assert.deepEqual(await s.graph.getTurns("acme", [{ conversation: "c1", turnId: "t1" }]), []);
      assert.deepEqual(
        (await s.graph.searchTurnsLexical("acme", "greyhound", 5)).map((h) => h.id),
        [turnRowId("c2", "t1")],
      );
      assert.equal(await s.vectors.count("acme"), 1);
      // Flush, session end and idle mean nothing here.
      for (const control of ["flush", "session-end", "idle"] as const)
        assert.deepEqual(await stage.handle(keyOf("acme", "c2"), { kind: "control", control }, undefined), {
          outputs: [],
          state: undefined,
        });
      assert.equal(await s.vectors.count("acme"), 1);
    });
  });

  it("an erase control delivered again after a stop between its deletes and their purge purges the vectors it deleted", async () => {
    await withStores(async (s) => {
      const stage = stageOf(s);
      // One turn erased of seven: below the share that compacts the index at the delete.
      const others = ["sofa", "walks", "vet", "park", "rain", "ball"].map((word, i) =>
        sensoryOf(
          segmentTurnOf(`o${i}`, `We talked about the ${word} today.`, "2023-06-02T10:00:00.000Z"),
          "acme",
          "c2",
        ),
      );
      await feed(stage, [sensoryOf(T1), ...others]);
      await s.vectors.flush();
      const file = hnswFileOf(s.vectors.dir, "acme");
      const { label } = s.vectors.db
        .prepare("SELECT label FROM vectors WHERE tenant = 'acme' AND id = ?")
        .get(turnRowId("c1", "t1")) as { label: number };
      const index = new hnswlib.HierarchicalNSW("cosine", s.embedder.dimension);
      index.readIndexSync(file, true);
      const erased = Buffer.from(new Float32Array(index.getPoint(label)).buffer);
      // The first delivery's deletes (eraseRawTurnsControl), then a stop that wrote the index (a
      // close flushes it) before their purge: the vector is marked deleted in the file, still there.
      await s.graph.deleteRawTurns("acme", "c1");
      await s.vectors.deleteRawTurns("acme", "c1");
      await s.vectors.flush();
      assert.ok(readFileSync(file).includes(erased));
      // Delivered again: nothing left to delete, the purge runs all the same.
      await stage.handle(keyOf("acme", "c1"), { kind: "control", control: "erase" }, undefined);
      assert.ok(!readFileSync(file).includes(erased), "the erased turn's vector is gone from the index file");
      assert.equal(await s.vectors.count("acme"), 6);
    });
  });

  it("one chunk writes its turns in one batch, but never a turn behind an erase before that erase", async () => {
    await withStores(async (s) => {
      const stage = stageOf(s);
      const key = keyOf("acme", "c1");
      const chunk = [
        { key, input: { kind: "event" as const, value: sensoryOf(T1) } },
        { key, input: { kind: "control" as const, control: "erase" as const } },
        { key, input: { kind: "event" as const, value: sensoryOf(T2) } },
      ];
      await stage.prepare?.(chunk);
      assert.equal(await s.vectors.count("acme"), 1, "only the turn ahead of the erase, in prepare");
      for (const { key: k, input } of chunk) await stage.handle(k, input, undefined);
      assert.deepEqual(
        (
          await s.graph.getTurns("acme", [
            { conversation: "c1", turnId: "t1" },
            { conversation: "c1", turnId: "t2" },
          ])
        ).map((t) => t.turnId),
        ["t2"],
      );
      assert.equal(await s.vectors.count("acme"), 1);
    });
  });

  it("a key that does not match the turn is poison", async () => {
    await withStores(async (s) => {
      await assert.rejects(
        stageOf(s).handle(keyOf("acme", "other"), { kind: "event", value: sensoryOf(T1) }, undefined),
        PoisonError,
      );
      assert.equal(await s.vectors.count("acme"), 0);
    });
  });
});
