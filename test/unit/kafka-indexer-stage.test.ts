/**
 * The indexer stage handler without a broker, over real SQLite + HNSW stores in a temporary folder
 * and the hashing embedder: a records event is written to the stores, and the update candidates the
 * indexer wrote for it come out as one message per new record (key: record id) — exactly the
 * candidates the store holds. A replay gives the same messages; control messages write nothing; a
 * slow write turns on back-pressure for the cool-down.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { type UpdateCandidatesEvent, UpdateCandidatesEventSchema } from "../../services/core/adapters/kafka/serde.ts";
import { PoisonError } from "../../services/core/adapters/kafka/stage-runtime.ts";
import { turnRowId } from "../../services/core/ids.ts";
import type { Embedder, GraphStore, VectorStore } from "../../services/core/ports.ts";
import { keyOf, type RecordsEvent, RecordsEventSchema, type Segment } from "../../services/core/types.ts";
import { type IndexerStageDeps, indexerStage } from "../../services/indexer/kafka-handler.ts";
import { type LocalStores, withLocalStores } from "../helpers/local-stores.ts";
import { jsonCodec, recordOf, segmentOf, segmentTurnOf } from "../helpers/stage-fixtures.ts";

interface Stores {
  graph: GraphStore;
  vectors: VectorStore;
  embedder: Embedder;
}

const withStores = (fn: (s: LocalStores) => Promise<void>): Promise<void> => withLocalStores("indexer-stage-", fn);

const stageWith = (s: Stores, over: Partial<IndexerStageDeps> = {}) =>
  indexerStage({
    input: jsonCodec("memory.records.v1", RecordsEventSchema),
    output: jsonCodec("memory.update-queue.v1", UpdateCandidatesEventSchema),
    ...s,
    ...over,
  });

const CAROLINE = { name: "Caroline", kind: "person" as const, aliases: [] };

const eventOf = (segment: Segment, specs: { text: string; turnId: string; who?: string; topic: string }[]) => {
  const records = specs.map((s) =>
    recordOf(segment, {
      text: s.text,
      entities: [s.who ? { name: s.who, kind: "person", aliases: [] } : CAROLINE],
      topics: [s.topic],
      turnIds: [s.turnId],
      saidAt: segment.start,
    }),
  );
  const value: RecordsEvent = {
    tenant: segment.tenant,
    conversation: segment.conversation,
    segment,
    records,
    context: { aliases: {}, referents: {}, speakers: ["Caroline"], recentRecords: [] },
  };
  return value;
};

const first = (tenant = "acme") =>
  eventOf(segmentOf("seg-1", [segmentTurnOf("t1", "I moved to Paris in May!", "2023-06-01T10:00:00.000Z")], tenant), [
    { text: "Caroline moved to Paris in May 2023.", turnId: "t1", topic: "moving" },
  ]);

const second = () =>
  eventOf(
    segmentOf("seg-2", [
      segmentTurnOf("t2", "Moving to Paris with my dog Pepper was great.", "2023-07-01T10:00:00.000Z"),
      segmentTurnOf("t3", "Melanie painted a sunrise.", "2023-07-01T10:01:00.000Z"),
    ]),
    [
      { text: "Caroline moved to Paris in May 2023 with her dog Pepper.", turnId: "t2", topic: "moving" },
      { text: "Melanie painted a sunrise on 2023-07-01.", turnId: "t3", who: "Melanie", topic: "painting" },
    ],
  );

const handle = async (stage: ReturnType<typeof stageWith>, value: RecordsEvent) => {
  const r = await stage.handle(keyOf(value.tenant, value.conversation), { kind: "event", value }, undefined);
  assert.equal(r.state, undefined, "the indexer keeps no keyed state");
  return r.outputs as { key: string; value: UpdateCandidatesEvent }[];
};

const byKey = (outs: { key: string; value: UpdateCandidatesEvent }[]) =>
  [...outs].sort((a, b) => (a.key < b.key ? -1 : 1));

describe("indexer stage handler", () => {
  it("with a second-opinion model, every record and raw turn it writes carries that model's vector", async () => {
    await withStores(async (s) => {
      const secondEmbedder = new HashingEmbedder(40);
      const value = second();
      await handle(stageWith(s, { secondEmbedder }), value);
      const ids = [
        ...value.records.map((r) => r.id),
        ...value.segment.turns.map((t) => turnRowId(value.conversation, t.turnId)),
      ];
      const got = await s.vectors.getSecondVectors(value.tenant, ids);
      assert.equal(got.size, ids.length);
      const [record] = value.records;
      assert.deepEqual(got.get(record?.id as string), (await secondEmbedder.embed([record?.text as string]))[0]);
    });
  });

  it("is a stateless sink writing update candidates to the update queue", async () => {
    await withStores(async (s) => {
      const stage = stageWith(s);
      assert.equal(stage.name, "indexer");
      assert.equal(stage.state, undefined);
      assert.equal(stage.output?.topic, "memory.update-queue.v1");
      assert.equal(stage.pressure?.(), false);
    });
  });

  it("writes a first record to the stores; with nothing older there is no candidate to send", async () => {
    await withStores(async (s) => {
      const indexed: number[] = [];
      const stage = stageWith(s, { onIndexed: (n) => indexed.push(n) });
      const ev = first();
      assert.deepEqual(await handle(stage, ev), []);
      assert.deepEqual(indexed, [1]);
      const [rec] = ev.records;
      assert.deepEqual(
        (await s.graph.getRecords("acme", [rec?.id ?? ""])).map((r) => r.text),
        [rec?.text],
      );
      assert.equal(await s.vectors.count("acme"), 2, "the record's vector and its turn's");
    });
  });

  it("sends, per new record, the candidates it wrote to the store, keyed by the record id", async () => {
    await withStores(async (s) => {
      const stage = stageWith(s);
      const older = first();
      await handle(stage, older);
      const ev = second();
      const outs = await handle(stage, ev);
      const [moved] = ev.records;
      assert.deepEqual(
        outs.map((o) => o.key),
        [moved?.id],
        "only the record about the same move has a candidate",
      );
      const out = outs[0] as { key: string; value: UpdateCandidatesEvent };
      assert.equal(out.value.recordId, out.key);
      assert.equal(out.value.tenant, "acme");
      assert.deepEqual(
        out.value.candidates.map((c) => [c.recordId, c.candidateId, c.tenant]),
        [[moved?.id, older.records[0]?.id, "acme"]],
      );
      assert.ok(UpdateCandidatesEventSchema.safeParse(out.value).success, "the output passes the topic's schema");
      const stored = await s.graph.pendingUpdateCandidates("acme", 100);
      assert.deepEqual(
        stored.map((c) => [c.recordId, c.candidateId, c.reason]),
        out.value.candidates.map((c) => [c.recordId, c.candidateId, c.reason]),
        "the topic gets what the store got",
      );
    });
  });

  it("sends the same messages when an event is replayed after a crash, and the stores do not grow", async () => {
    await withStores(async (s) => {
      const stage = stageWith(s);
      await handle(stage, first());
      const once = byKey(await handle(stage, second()));
      const records = await s.graph.countRecords("acme");
      const vectors = await s.vectors.count("acme");
      const again = byKey(await handle(stage, second()));
      assert.deepEqual(again, once);
      assert.equal(await s.graph.countRecords("acme"), records);
      assert.equal(await s.vectors.count("acme"), vectors);
    });
  });

  it("never proposes another tenant's record as a candidate", async () => {
    await withStores(async (s) => {
      const stage = stageWith(s);
      await handle(stage, first("acme"));
      assert.deepEqual(await handle(stage, first("globex")), []);
      assert.equal(await s.graph.countPendingCandidates("globex"), 0);
    });
  });

  it("writes nothing and sends nothing for control messages", async () => {
    await withStores(async (s) => {
      const stage = stageWith(s);
      for (const control of ["flush", "session-end", "idle"] as const)
        assert.deepEqual(await stage.handle(keyOf("acme", "c1"), { kind: "control", control }, undefined), {
          outputs: [],
          state: undefined,
        });
      assert.equal(await s.graph.countRecords("acme"), 0);
    });
  });

  it("turns on back-pressure after a write slower than slowWriteMs, for coolDownMs", async () => {
    await withStores(async (s) => {
      const slow: Embedder = {
        id: s.embedder.id,
        dimension: s.embedder.dimension,
        stats: () => s.embedder.stats(),
        embed: async (texts) => {
          await new Promise((r) => setTimeout(r, 20));
          return s.embedder.embed(texts);
        },
      };
      const stage = stageWith({ ...s, embedder: slow }, { slowWriteMs: 5, coolDownMs: 100 });
      assert.equal(stage.pressure?.(), false);
      await handle(stage, first());
      assert.equal(stage.pressure?.(), true, "saturated right after the slow write");
      await new Promise((r) => setTimeout(r, 150));
      assert.equal(stage.pressure?.(), false, "clear after the cool-down");
    });
  });

  it("on an erase control erases the conversation again and tombstones its records' update candidates", async () => {
    await withStores(async (s) => {
      const erasures: unknown[] = [];
      const stage = stageWith(s, { onErased: (e) => erasures.push(e) });
      const older = first();
      await handle(stage, older);
      const ev = second();
      await handle(stage, ev);
      const other = eventOf(segmentOf("seg-9", [segmentTurnOf("t9", "I like tea.")], "acme", "c2"), [
        { text: "Caroline likes tea.", turnId: "t9", topic: "food" },
      ]);
      await handle(stage, other);
      const r = await stage.handle(keyOf("acme", "c1"), { kind: "control", control: "erase" }, undefined);
      const ids = [...older.records, ...ev.records].map((x) => x.id).sort();
      assert.deepEqual(
        r.outputs.map((o) => ("control" in o ? [o.key, o.control] : ["value", o.key])).sort(),
        ids.map((id) => [id, "erase"]),
        "one tombstone per erased record, keyed by record id",
      );
      assert.equal(r.state, undefined);
      assert.deepEqual(erasures, [{ tenant: "acme", conversation: "c1", records: 3, turns: 3 }]);
      assert.equal(await s.graph.countRecords("acme", "c1"), 0);
      assert.equal(await s.graph.countRecords("acme", "c2"), 1, "the other conversation stays");
      assert.equal(await s.vectors.count("acme"), 2, "only c2's record and turn vectors are left");
      assert.equal(await s.graph.countPendingCandidates("acme"), 0);
      const again = await stage.handle(keyOf("acme", "c1"), { kind: "control", control: "erase" }, undefined);
      assert.deepEqual(again.outputs, [], "a replay erases nothing more");
    });
  });

  it("tombstones the ids an erase control carries: records the stores' erasure removed before it arrived", async () => {
    await withStores(async (s) => {
      const stage = stageWith(s);
      const r = await stage.handle(
        keyOf("acme", "c1"),
        { kind: "control", control: "erase", erasedIds: ["rec-gone-1", "rec-gone-2", "rec-gone-1"] },
        undefined,
      );
      assert.deepEqual(
        r.outputs.map((o) => ("control" in o ? [o.key, o.control] : ["value", o.key])).sort(),
        [
          ["rec-gone-1", "erase"],
          ["rec-gone-2", "erase"],
        ],
        "one tombstone per carried id, none twice",
      );
    });
  });

  it("on an erase-tenant control erases the tenant's records and vectors, no other tenant's", async () => {
    await withStores(async (s) => {
      const stage = stageWith(s);
      const acme = first("acme");
      await handle(stage, acme);
      await handle(stage, first("globex"));
      const key = keyOf("acme", "\u0000erase-tenant:0:5");
      const r = await stage.handle(key, { kind: "control", control: "erase-tenant" }, undefined);
      assert.deepEqual(r.outputs, [{ key: acme.records[0]?.id, control: "erase" }]);
      assert.equal(await s.graph.countRecords("acme"), 0);
      assert.equal(await s.vectors.count("acme"), 0);
      assert.equal(await s.graph.countRecords("globex"), 1);
      assert.equal(await s.vectors.count("globex"), 2);
    });
  });

  it("refuses an erase control whose key is not tenant/conversation as poison", async () => {
    await withStores(async (s) => {
      await assert.rejects(
        stageWith(s).handle("acme", { kind: "control", control: "erase" }, undefined),
        (err: unknown) => err instanceof PoisonError,
      );
    });
  });
});
