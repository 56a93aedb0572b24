/**
 * The indexer's two consumers erasing one erasure (issue 18), without a broker, over real SQLite +
 * HNSW stores and the hashing embedder. The raw-turn consumer erases raw turns alone (rows and
 * vectors) and produces no tombstone; the records consumer erases records and tombstones them.
 * The race that split closes: the raw-turn consumer reaches the erase control while the records
 * consumer has written a segment's records but not yet committed their candidate sets. Nothing is
 * shared between the two handlers (separate processes, or a restart between the two erasures, look
 * the same): the records consumer's handler for its control is a fresh instance.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { UpdateCandidatesEventSchema } from "../../services/core/adapters/kafka/serde.ts";
import type { StageOutput } from "../../services/core/adapters/kafka/stage-runtime.ts";
import { SensoryEventSchema } from "../../services/core/adapters/kafka/turn-embedding.ts";
import { turnRowId } from "../../services/core/ids.ts";
import { keyOf, type RecordsEvent, RecordsEventSchema } from "../../services/core/types.ts";
import { indexerStage } from "../../services/indexer/kafka-handler.ts";
import { rawTurnStage } from "../../services/indexer/raw-turn-stage.ts";
import { type LocalStores, withLocalStores } from "../helpers/local-stores.ts";
import { candidatePairEvent, jsonCodec } from "../helpers/stage-fixtures.ts";

const withStores = (fn: (s: LocalStores) => Promise<void>): Promise<void> => withLocalStores("erase-split-", fn);

const event = (tenant = "acme", conversation = "c1", city = "Paris"): RecordsEvent =>
  candidatePairEvent(tenant, conversation, city);

const recordsConsumerOf = (s: LocalStores) =>
  indexerStage({
    input: jsonCodec("memory.records.v1", RecordsEventSchema),
    output: jsonCodec("memory.update-queue.v1", UpdateCandidatesEventSchema),
    ...s,
  });

const rawTurnConsumerOf = (s: LocalStores) =>
  rawTurnStage({
    input: jsonCodec("memory.sensory.v1", SensoryEventSchema),
    output: jsonCodec("memory.update-queue.v1", UpdateCandidatesEventSchema),
    ...s,
  });

/** Keys live on a compacted topic once its messages (in append order) are applied. */
const liveKeys = (queue: readonly StageOutput<unknown>[]): Set<string> => {
  const live = new Set<string>();
  for (const m of queue) {
    if ("control" in m && m.control === "erase") live.delete(m.key);
    else live.add(m.key);
  }
  return live;
};

const turnVectors = async (s: LocalStores, tenant: string, conversation: string, ids: readonly string[]) =>
  (
    await s.vectors.get(
      tenant,
      ids.map((t) => turnRowId(conversation, t)),
    )
  ).length;

describe("erase controls split between the indexer's consumers", () => {
  it("no candidate set outlives a record when the raw-turn consumer erases first, mid-segment", async () => {
    await withStores(async (s) => {
      const value = event();
      const records = value.records.map((r) => r.id);
      const indexed = await recordsConsumerOf(s).handle(keyOf("acme", "c1"), { kind: "event", value }, undefined);
      assert.ok(indexed.outputs.length > 0, "the segment's records have update candidates");
      // The consumer writes a segment's candidate rows after its records: the rows as they were...
      const rows = await s.graph.pendingUpdateCandidates("acme", 100);
      const early = await rawTurnConsumerOf(s).handle(
        keyOf("acme", "c1"),
        { kind: "control", control: "erase" },
        undefined,
      );
      assert.deepEqual(early.outputs, [], "the raw-turn consumer tombstones nothing");
      assert.equal(
        await s.graph.countRecords("acme"),
        records.length,
        "and leaves the records to the records consumer",
      );
      // ...written again after the raw-turn consumer's erase (the interleaving CI met).
      await s.graph.putUpdateCandidates(rows);
      assert.ok(rows.length > 0);
      // Another instance (another process, or after a restart): nothing handed over.
      const late = await recordsConsumerOf(s).handle(
        keyOf("acme", "c1"),
        { kind: "control", control: "erase" },
        undefined,
      );
      const queue = [...early.outputs, ...indexed.outputs, ...late.outputs];
      assert.deepEqual([...liveKeys(queue)], [], "no live candidate set of an erased record");
      const lastTombstone = (id: string) => queue.findLastIndex((m) => m.key === id && "control" in m);
      const lastValue = (id: string) => queue.findLastIndex((m) => m.key === id && !("control" in m));
      for (const id of records) assert.ok(lastTombstone(id) > lastValue(id), `${id}: tombstoned after its candidates`);
      assert.equal(await s.graph.countRecords("acme"), 0);
      assert.equal(await s.graph.countPendingCandidates("acme"), 0, "the candidate rows are deleted too");
    });
  });

  it("the raw-turn consumer erases a conversation's raw turns (rows and vectors) and nothing else", async () => {
    await withStores(async (s) => {
      const mine = event("acme", "c1", "Paris");
      const other = event("acme", "c2", "Lisbon");
      const recordsConsumer = recordsConsumerOf(s);
      await recordsConsumer.handle(keyOf("acme", "c1"), { kind: "event", value: mine }, undefined);
      await recordsConsumer.handle(keyOf("acme", "c2"), { kind: "event", value: other }, undefined);
      // A turn that arrived ahead of its segment, vector first (raw-turns.ts), its row not yet written.
      await s.vectors.upsert("acme", [
        {
          id: turnRowId("c1", "t3"),
          vector: (await s.embedder.embed(["Caroline: see you"]))[0] as Float32Array,
          payload: { tenant: "acme", conversation: "c1", kind: "turn", time: 0 },
        },
      ]);
      const pending = await s.graph.countPendingCandidates("acme");
      const out = await rawTurnConsumerOf(s).handle(
        keyOf("acme", "c1"),
        { kind: "control", control: "erase" },
        undefined,
      );
      assert.deepEqual(out.outputs, []);
      const keys = (c: string) => ["t1", "t2"].map((turnId) => ({ conversation: c, turnId }));
      assert.deepEqual(await s.graph.getTurns("acme", keys("c1")), [], "c1's raw turn rows are gone");
      assert.equal(await turnVectors(s, "acme", "c1", ["t1", "t2", "t3"]), 0, "and their vectors, row or not");
      assert.deepEqual(await s.graph.searchTurnsLexical("acme", "Paris", 10), [], "and their full-text rows");
      assert.equal((await s.graph.getTurns("acme", keys("c2"))).length, 2, "c2's raw turns stay");
      assert.equal(await turnVectors(s, "acme", "c2", ["t1", "t2"]), 2);
      assert.equal(await s.graph.countRecords("acme", "c1"), 2, "c1's records stay (the records consumer's)");
      assert.equal(
        (
          await s.vectors.get(
            "acme",
            mine.records.map((r) => r.id),
          )
        ).length,
        2,
        "with their vectors",
      );
      assert.equal(await s.graph.countPendingCandidates("acme"), pending, "and their candidate rows");
    });
  });

  it("on a tenant's erasure the raw-turn consumer erases every raw turn of the tenant, no other tenant's", async () => {
    await withStores(async (s) => {
      const recordsConsumer = recordsConsumerOf(s);
      await recordsConsumer.handle(keyOf("acme", "c1"), { kind: "event", value: event("acme", "c1") }, undefined);
      await recordsConsumer.handle(
        keyOf("acme", "c2"),
        { kind: "event", value: event("acme", "c2", "Lisbon") },
        undefined,
      );
      await recordsConsumer.handle(keyOf("zeta", "c1"), { kind: "event", value: event("zeta", "c1") }, undefined);
      const out = await rawTurnConsumerOf(s).handle(
        keyOf("acme", "c1"),
        { kind: "control", control: "erase-tenant" },
        undefined,
      );
      assert.deepEqual(out.outputs, []);
      for (const c of ["c1", "c2"]) {
        assert.equal(await turnVectors(s, "acme", c, ["t1", "t2"]), 0, `acme/${c}: no turn vector`);
        assert.deepEqual(await s.graph.getTurns("acme", [{ conversation: c, turnId: "t1" }]), []);
      }
      assert.equal(await s.graph.countRecords("acme"), 4, "acme's records stay for the records consumer");
      assert.equal(await turnVectors(s, "zeta", "c1", ["t1", "t2"]), 2, "zeta is untouched");
      const late = await recordsConsumer.handle(
        keyOf("acme", "c1"),
        { kind: "control", control: "erase-tenant" },
        undefined,
      );
      assert.equal(late.outputs.length, 4, "the records consumer tombstones acme's records");
      assert.equal(await s.graph.countRecords("acme"), 0);
      assert.equal(await s.graph.countRecords("zeta"), 2);
    });
  });

  it("other controls erase nothing on either consumer", async () => {
    await withStores(async (s) => {
      await recordsConsumerOf(s).handle(keyOf("acme", "c1"), { kind: "event", value: event() }, undefined);
      for (const consumer of [rawTurnConsumerOf(s), recordsConsumerOf(s)]) {
        const out = await consumer.handle(keyOf("acme", "c1"), { kind: "control", control: "flush" }, undefined);
        assert.deepEqual(out.outputs, []);
      }
      assert.equal(await s.graph.countRecords("acme"), 2);
      assert.equal(await turnVectors(s, "acme", "c1", ["t1", "t2"]), 2);
    });
  });
});
