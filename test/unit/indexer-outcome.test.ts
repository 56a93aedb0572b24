// The indexer says what it wrote (issue 19, item 8): indexSegment returns the update candidates it
// wrote to the store, which the Kafka indexer stage produces to the update queue.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { HnswVectorStore } from "../../services/core/adapters/hnsw/vector-store.ts";
import type { TopicCodec } from "../../services/core/adapters/kafka/serde.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import { emptyContext } from "../../services/encoder/context.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { indexerStage } from "../../services/indexer/kafka-handler.ts";
import { makeRecord, makeSegment, makeTurn } from "../contract/graph-store.contract.ts";

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const open = () => {
  const dir = mkdtempSync(join(tmpdir(), "indexer-outcome-"));
  dirs.push(dir);
  const db = openSqlite(dir);
  return {
    db,
    graph: new SqliteGraphStore(db),
    vectors: new HnswVectorStore(db, dir),
    embedder: new HashingEmbedder(),
  };
};

const segmentOf = (tenant: string, id: string, text: string, saidAt: string) => {
  const segment = makeSegment(tenant, "c1", id, [makeTurn(`${id}-t1`, text, saidAt)]);
  const record = makeRecord(tenant, "c1", id, {
    text,
    type: "fact",
    entities: ["Jon"],
    topics: ["work"],
    saidAt,
    turnIds: [`${id}-t1`],
  });
  return { segment, records: [record] };
};

describe("indexSegment", () => {
  it("returns the update candidates it wrote", async () => {
    const deps = open();
    try {
      const first = segmentOf("A", "seg-1", "Jon works at Acme.", "2023-01-01T00:00:00.000Z");
      const second = segmentOf("A", "seg-2", "Jon works at Globex.", "2023-03-01T00:00:00.000Z");
      const a = await indexSegment(deps, first.segment, first.records);
      assert.deepEqual(a.candidates, [], "nothing older to consolidate with");
      const b = await indexSegment(deps, second.segment, second.records);
      assert.ok(b.candidates.length > 0);
      assert.deepEqual(
        b.candidates.map((c) => [c.recordId, c.candidateId]),
        [[second.records[0]?.id, first.records[0]?.id]],
      );
      assert.deepEqual(await deps.graph.listUpdateCandidates("A"), b.candidates);
      assert.equal(b.records, 1);
      assert.equal(b.turns, 1);
    } finally {
      await deps.vectors.close();
      await deps.graph.close();
      deps.db.close();
    }
  });

  it("a segment indexed again after later ones finds the candidates of its first pass, not the later records", async () => {
    const deps = open();
    try {
      const first = segmentOf("A", "seg-1", "Jon works at Acme.", "2023-01-01T00:00:00.000Z");
      const second = segmentOf("A", "seg-2", "Jon works at Globex.", "2023-03-01T00:00:00.000Z");
      const third = segmentOf("A", "seg-3", "Jon works at Initech.", "2023-05-01T00:00:00.000Z");
      await indexSegment(deps, first.segment, first.records);
      const once = await indexSegment(deps, second.segment, second.records);
      await indexSegment(deps, third.segment, third.records);
      // A Kafka indexer replays seg-2 (its commit was lost to a rebalance) after seg-3 was written.
      const replay = await indexSegment(deps, second.segment, second.records);
      assert.ok(once.candidates.length > 0);
      assert.deepEqual(replay.candidates, once.candidates);
      // Another conversation's record said later still counts: only the replayed conversation's order is known.
      const other = makeRecord("A", "c2", "seg-x", {
        text: "Jon works at Hooli.",
        type: "fact",
        entities: ["Jon"],
        topics: ["work"],
        saidAt: "2023-06-01T00:00:00.000Z",
        turnIds: ["seg-x-t1"],
      });
      await indexSegment(
        deps,
        makeSegment("A", "c2", "seg-x", [makeTurn("seg-x-t1", other.text, "2023-06-01T00:00:00.000Z")]),
        [other],
      );
      const again = await indexSegment(deps, second.segment, second.records);
      assert.ok(again.candidates.some((c) => c.candidateId === other.id));
      assert.ok(!again.candidates.some((c) => c.candidateId === third.records[0]?.id));
    } finally {
      await deps.vectors.close();
      await deps.graph.close();
      deps.db.close();
    }
  });

  it("the Kafka indexer stage produces what indexSegment wrote, one message per record", async () => {
    const deps = open();
    /** The handler never encodes or decodes: the runtime does. */
    const codec = <T>(topic: string): TopicCodec<T> => ({
      topic,
      schemaId: 0,
      encode: () => Promise.reject(new Error("not in this test")),
      decode: () => Promise.reject(new Error("not in this test")),
    });
    try {
      const stage = indexerStage({ ...deps, input: codec("records"), output: codec("updates") });
      const event = (s: ReturnType<typeof segmentOf>) => ({
        kind: "event" as const,
        value: { tenant: "A", conversation: "c1", segment: s.segment, records: s.records, context: emptyContext() },
      });
      const first = segmentOf("A", "seg-1", "Jon works at Acme.", "2023-01-01T00:00:00.000Z");
      const second = segmentOf("A", "seg-2", "Jon works at Globex.", "2023-03-01T00:00:00.000Z");
      assert.deepEqual((await stage.handle("A/c1", event(first), undefined)).outputs, []);
      const { outputs } = await stage.handle("A/c1", event(second), undefined);
      const written = await deps.graph.listUpdateCandidates("A");
      const recordId = second.records[0]?.id as string;
      assert.deepEqual(outputs, [{ key: recordId, value: { recordId, tenant: "A", candidates: written } }]);
    } finally {
      await deps.vectors.close();
      await deps.graph.close();
      deps.db.close();
    }
  });

  it("returns none when candidates are off", async () => {
    const deps = open();
    try {
      const first = segmentOf("A", "seg-1", "Jon works at Acme.", "2023-01-01T00:00:00.000Z");
      const second = segmentOf("A", "seg-2", "Jon works at Globex.", "2023-03-01T00:00:00.000Z");
      await indexSegment({ ...deps, candidates: false }, first.segment, first.records);
      const b = await indexSegment({ ...deps, candidates: false }, second.segment, second.records);
      assert.deepEqual(b.candidates, []);
      assert.equal(await deps.graph.countPendingCandidates("A"), 0);
    } finally {
      await deps.vectors.close();
      await deps.graph.close();
      deps.db.close();
    }
  });
});
