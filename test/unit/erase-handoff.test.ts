/**
 * The indexer's two consumers erasing one erasure (issue 18), without a broker, over real SQLite +
 * HNSW stores and the hashing embedder. The race: the raw-turn consumer reaches the erase control
 * while the records consumer has written a segment's records but not yet committed their candidate
 * sets; it erases those records and tombstones them, the candidate sets are committed after those
 * tombstones, and the records consumer's own erase control then finds no record to tombstone. With
 * the hand-off (erase-handoff.ts) the records consumer's control tombstones them too, after its
 * candidate sets. The hand-off's scopes and its bound.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { UpdateCandidatesEventSchema } from "../../services/core/adapters/kafka/serde.ts";
import type { StageOutput } from "../../services/core/adapters/kafka/stage-runtime.ts";
import { SensoryEventSchema } from "../../services/core/adapters/kafka/turn-embedding.ts";
import { keyOf, type RecordsEvent, RecordsEventSchema } from "../../services/core/types.ts";
import { ErasedRecordsHandOff } from "../../services/indexer/erase-handoff.ts";
import { indexerStage } from "../../services/indexer/kafka-handler.ts";
import { rawTurnStage } from "../../services/indexer/raw-turn-stage.ts";
import { type LocalStores, withLocalStores } from "../helpers/local-stores.ts";
import { jsonCodec, recordOf, segmentOf, segmentTurnOf } from "../helpers/stage-fixtures.ts";

const KEY = keyOf("acme", "c1");

const withStores = (fn: (s: LocalStores) => Promise<void>): Promise<void> => withLocalStores("erase-handoff-", fn);

/** Two records of one segment that are each other's update candidates (same person, same topic). */
const event = (): RecordsEvent => {
  const segment = segmentOf("seg-1", [
    segmentTurnOf("t1", "I moved to Paris in May!", "2023-06-01T10:00:00.000Z"),
    segmentTurnOf("t2", "I moved to Paris in May, the city of my dreams.", "2023-06-01T10:01:00.000Z"),
  ]);
  const caroline = { name: "Caroline", kind: "person" as const, aliases: [] };
  const records = [
    { text: "Caroline moved to Paris in May 2023.", turnId: "t1" },
    { text: "Caroline moved to Paris, the city of her dreams, in May 2023.", turnId: "t2" },
  ].map((r) =>
    recordOf(segment, {
      text: r.text,
      entities: [caroline],
      topics: ["moving"],
      turnIds: [r.turnId],
      saidAt: segment.start,
    }),
  );
  return {
    tenant: "acme",
    conversation: "c1",
    segment,
    records,
    context: { aliases: {}, referents: {}, speakers: ["Caroline"], recentRecords: [] },
  };
};

/**
 * The interleaving the race needs, in the order its update-queue messages are appended: the records
 * consumer handles the records event (stores written, candidate sets returned but not committed),
 * the raw-turn consumer handles the erase control (its tombstones are committed first), then the
 * records consumer's candidate sets are committed, then its own erase control. Returns the update
 * queue in append order, and which keys are live at the end (tombstones applied).
 */
const race = async (handOff: ErasedRecordsHandOff | undefined) => {
  let queue: StageOutput<unknown>[] = [];
  let records: string[] = [];
  let pendingAfter = -1;
  let lateRows = 0;
  await withStores(async (s) => {
    const recordsConsumer = indexerStage({
      input: jsonCodec("memory.records.v1", RecordsEventSchema),
      output: jsonCodec("memory.update-queue.v1", UpdateCandidatesEventSchema),
      ...s,
      ...(handOff ? { handOff: { role: "take" as const, ids: handOff } } : {}),
    });
    const rawTurns = rawTurnStage({
      input: jsonCodec("memory.sensory.v1", SensoryEventSchema),
      output: jsonCodec("memory.update-queue.v1", UpdateCandidatesEventSchema),
      ...s,
      ...(handOff ? { handOff: { role: "give" as const, ids: handOff } } : {}),
    });
    const value = event();
    records = value.records.map((r) => r.id);
    const indexed = await recordsConsumer.handle(KEY, { kind: "event", value }, undefined);
    assert.ok(indexed.outputs.length > 0, "the segment's records have update candidates");
    // The consumer writes a segment's candidate rows after its records: the rows as they were...
    const rows = await s.graph.pendingUpdateCandidates("acme", 100);
    const early = await rawTurns.handle(KEY, { kind: "control", control: "erase" }, undefined);
    // ...written again after the raw-turn consumer's erase (the interleaving CI met).
    await s.graph.putUpdateCandidates(rows);
    lateRows = rows.length;
    const late = await recordsConsumer.handle(KEY, { kind: "control", control: "erase" }, undefined);
    queue = [...early.outputs, ...indexed.outputs, ...late.outputs];
    assert.equal(await s.graph.countRecords("acme"), 0, "the stores hold none of them either way");
    pendingAfter = await s.graph.countPendingCandidates("acme");
  });
  const live = new Set<string>();
  for (const m of queue) {
    if ("control" in m && m.control === "erase") live.delete(m.key);
    else live.add(m.key);
  }
  return { queue, records, live, pendingAfter, lateRows };
};

describe("erase hand-off between the indexer's consumers", () => {
  it("without it, the records consumer's candidate sets outlive the records the raw-turn consumer erased", async () => {
    const { live, records, pendingAfter, lateRows } = await race(undefined);
    assert.ok(lateRows > 0);
    assert.equal(pendingAfter, lateRows, "the late candidate rows stay in the graph store");
    assert.ok(
      records.some((id) => live.has(id)),
      "the race this hand-off closes (a live candidate set of an erased record)",
    );
  });

  it("with it, the records consumer's erase control tombstones them after its candidate sets", async () => {
    const { live, queue, records, pendingAfter, lateRows } = await race(new ErasedRecordsHandOff());
    assert.deepEqual([...live], [], "no live candidate set of an erased record");
    assert.ok(lateRows > 0);
    assert.equal(pendingAfter, 0, "the late candidate rows are deleted from the graph store too");
    const lastTombstone = (id: string) => queue.findLastIndex((m) => m.key === id && "control" in m);
    const lastValue = (id: string) => queue.findLastIndex((m) => m.key === id && !("control" in m));
    for (const id of records) assert.ok(lastTombstone(id) > lastValue(id), `${id}: tombstoned after its candidates`);
  });

  it("scopes: a conversation's erasure gets its own ids and the tenant's; a tenant's every id of the tenant", () => {
    const h = new ErasedRecordsHandOff();
    h.give("acme", "c1", ["r1", "r2"]);
    h.give("acme", "c2", ["r3"]);
    h.give("acme", undefined, ["r4"]);
    h.give("other", "c1", ["r5"]);
    h.give("acme", "c1", []);
    assert.deepEqual(h.erasedBy("acme", "c1").sort(), ["r1", "r2", "r4"]);
    assert.deepEqual(h.erasedBy("acme", undefined).sort(), ["r1", "r2", "r3", "r4"]);
    assert.deepEqual(h.erasedBy("other", "c2"), []);
    assert.deepEqual(h.erasedBy("nobody", undefined), []);
    // Kept, not taken: every erase-tenant control (one per partition) tombstones them.
    assert.deepEqual(h.erasedBy("acme", "c1").sort(), ["r1", "r2", "r4"]);
  });

  it("keeps at most maxIds, the oldest out first", () => {
    const h = new ErasedRecordsHandOff(3);
    h.give("acme", "c1", ["r1", "r2"]);
    h.give("acme", "c2", ["r3"]);
    h.give("acme", "c3", ["r4", "r5"]);
    assert.deepEqual(h.erasedBy("acme", "c1"), [], "the oldest batch went");
    assert.deepEqual(h.erasedBy("acme", undefined).sort(), ["r3", "r4", "r5"]);
    h.give("acme", "c3", ["r4", "r5"]);
    assert.deepEqual(h.erasedBy("acme", undefined).sort(), ["r3", "r4", "r5"], "an id given twice is held once");
    assert.throws(() => new ErasedRecordsHandOff(0), /positive integer/);
  });
});
