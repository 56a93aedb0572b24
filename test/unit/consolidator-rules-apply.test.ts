// The consolidation and erasure rules as pure functions (services/consolidator/apply.ts,
// erasure.ts): the writes a change or an erasure makes, given what its transaction read. The
// graph-store contract runs the same rules against SQLite and Neo4j.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { consolidationWrites } from "../../services/consolidator/apply.ts";
import { eraseConversation, eraseTenant, erasureWrites } from "../../services/consolidator/erasure.ts";
import { turnRowId } from "../../services/core/ids.ts";
import type {
  GraphTransactions,
  TransactionReads,
  TransactionView,
  TransactionWrites,
} from "../../services/core/ports.ts";
import type { MemoryRecord } from "../../services/core/types.ts";
import { makeRecord } from "../contract/graph-store.contract.ts";

const record = (conversation: string, text: string, saidAt: string): MemoryRecord =>
  makeRecord("A", conversation, `${conversation}-seg`, {
    text,
    type: "fact",
    entities: ["Jon"],
    topics: ["work"],
    saidAt,
    turnIds: [`${conversation}-t`],
  });

const OLD = record("k1", "Jon works at Acme.", "2023-01-01T00:00:00.000Z");
const NEW = record("k1", "Jon works at Globex.", "2023-03-01T00:00:00.000Z");
const DUP = record("k2", "Jon is employed at Globex.", "2023-03-02T00:00:00.000Z");
const view = (...records: MemoryRecord[]) => new Map(records.map((r) => [r.id, structuredClone(r)]));
const AT = "2024-01-01T00:00:00.000Z";

describe("consolidation rule (pure)", () => {
  it("supersede then merge in one change: each op sees the ones before it", () => {
    const { writes, result } = consolidationWrites(
      {
        tenant: "A",
        ops: [
          { kind: "supersede", older: OLD.id, newer: NEW.id, validTo: NEW.valid.from, reason: "new job" },
          // OLD is superseded now: merging into it is skipped.
          { kind: "merge", canonical: OLD.id, duplicate: DUP.id, validTo: DUP.valid.from },
          { kind: "merge", canonical: NEW.id, duplicate: DUP.id, validTo: DUP.valid.from },
        ],
        settled: [{ recordId: NEW.id, candidateId: OLD.id, decision: "contradiction" }],
      },
      view(OLD, NEW, DUP),
      AT,
    );
    assert.deepEqual(result, { superseded: 1, merged: 1, linked: 0, skipped: 1 });
    const byId = new Map((writes.records ?? []).map((r) => [r.id, r]));
    assert.deepEqual(byId.get(OLD.id)?.valid, { from: OLD.valid.from, to: NEW.valid.from, supersededBy: NEW.id });
    assert.deepEqual(byId.get(DUP.id)?.valid, { from: DUP.valid.from, to: DUP.valid.from, supersededBy: NEW.id });
    assert.deepEqual(byId.get(NEW.id)?.mergedSources, [DUP.source]);
    assert.deepEqual(writes.relations, [
      { from: NEW.id, to: OLD.id, relation: "SUPERSEDES", at: NEW.valid.from, reason: "new job" },
      { from: DUP.id, to: NEW.id, relation: "DUPLICATE_OF", at: DUP.valid.from },
    ]);
    assert.deepEqual(writes.settled, {
      rows: [{ recordId: NEW.id, candidateId: OLD.id, decision: "contradiction" }],
      decidedAt: AT,
    });
  });

  it("skips ops on unknown or identical records and clamps a validity end to the record's start", () => {
    const { writes, result } = consolidationWrites(
      {
        tenant: "A",
        ops: [
          { kind: "link", from: NEW.id, to: NEW.id, relation: "REFINES", at: AT },
          { kind: "link", from: NEW.id, to: "unknown", relation: "REFINES", at: AT },
          { kind: "supersede", older: OLD.id, newer: "unknown", validTo: AT },
          { kind: "supersede", older: OLD.id, newer: NEW.id, validTo: "2000-01-01T00:00:00.000Z" },
        ],
        settled: [],
      },
      view(OLD, NEW),
      AT,
    );
    assert.deepEqual(result, { superseded: 1, merged: 0, linked: 0, skipped: 3 });
    assert.equal(writes.records?.[0]?.valid.to, OLD.valid.from);
  });
});

describe("erasure rule (pure)", () => {
  it("reports the conversation's ids, restores what it superseded and trims merged sources", () => {
    const superseded = { ...OLD, valid: { ...OLD.valid, to: NEW.valid.from, supersededBy: DUP.id } };
    const canonical = { ...NEW, mergedSources: [DUP.source] };
    const untouched = { ...record("k3", "Jon likes tea.", "2023-02-01T00:00:00.000Z"), mergedSources: [NEW.source] };
    const { writes, result } = erasureWrites("A", "k2", {
      recordIds: [DUP.id],
      turnIds: ["k2-t"],
      complete: true,
      dependants: [superseded, canonical, untouched],
    });
    assert.deepEqual(result, { records: [DUP.id], turns: [turnRowId("k2", "k2-t")], restored: 1 });
    assert.deepEqual(writes.records, [
      { ...OLD, valid: { from: OLD.valid.from } },
      { ...NEW }, // mergedSources gone: the only one came from k2
    ]);
    assert.deepEqual(writes.deleteRecords, [DUP.id]);
    assert.equal(writes.deleteConversation, "k2");
    assert.deepEqual(writes.deleteDeadLetters, ["A/k2"]);
    assert.equal(writes.deleteTurns, undefined);
  });

  it("eraseConversation: steps of `step` items, the event loop turning between two, until one reads less", async () => {
    // A port fake holding 5 records and 3 turns of k2: each transaction hands out what is left.
    const records = ["r1", "r2", "r3", "r4", "r5"];
    const turns = ["t1", "t2", "t3"];
    const reads: TransactionReads[] = [];
    const writes: TransactionWrites[] = [];
    let ticks = 0;
    const ticksAt: number[] = [];
    const store: GraphTransactions = {
      transact: async (_tenant, r, decide) => {
        reads.push(r);
        ticksAt.push(ticks);
        const limit = r.limit ?? Number.POSITIVE_INFINITY;
        const recordIds = records.slice(0, limit);
        const turnIds = turns.slice(0, limit - recordIds.length);
        const { writes: w, result } = decide({
          records: new Map(),
          conversation: { recordIds, turnIds, complete: recordIds.length + turnIds.length < limit, dependants: [] },
        });
        writes.push(w);
        records.splice(0, recordIds.length);
        turns.splice(0, turnIds.length);
        return result;
      },
    };
    // Turns of the event loop, counted by a chain of setImmediate callbacks (bounded).
    const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    const counting = (async () => {
      for (let i = 0; i < 50; i++) {
        await tick();
        ticks++;
      }
    })();
    try {
      const erased = await eraseConversation(store, "A", "k2", 3);
      assert.deepEqual(erased.records, ["r1", "r2", "r3", "r4", "r5"]);
      assert.deepEqual(
        erased.turns,
        ["t1", "t2", "t3"].map((t) => turnRowId("k2", t)),
      );
      // 3 + 3 + 2 items read, the third reading less than 3: the last.
      assert.equal(reads.length, 3);
      assert.ok(reads.every((r) => r.conversation === "k2" && r.limit === 3 && r.dependants === true));
      assert.deepEqual(
        writes.map((w) => [w.deleteRecords, w.deleteTurns?.turnIds, w.deleteConversation]),
        [
          [["r1", "r2", "r3"], [], undefined],
          [["r4", "r5"], ["t1"], undefined],
          [[], undefined, "k2"],
        ],
      );
      const [a = 0, b = 0, c = 0] = ticksAt;
      assert.ok(a < b && b < c, `the loop turned between steps: ${ticksAt}`);
    } finally {
      await counting;
    }
  });

  it("a store that takes no steps (erasureStep Infinity) erases a conversation in one transaction, a tenant by deleteTenant", async () => {
    const reads: TransactionReads[] = [];
    let deletedTenant = "";
    const store = {
      erasureStep: Number.POSITIVE_INFINITY,
      transact: async <T>(
        _tenant: string,
        r: TransactionReads,
        decide: (view: TransactionView) => { writes: TransactionWrites; result: T },
      ): Promise<T> => {
        reads.push(r);
        return decide({
          records: new Map(),
          conversation: { recordIds: ["r1"], turnIds: ["t1"], complete: true, dependants: [] },
        }).result;
      },
      tenantConversations: async () => ["k2"],
      deleteTenant: async (tenant: string) => {
        deletedTenant = tenant;
        return ["r1"];
      },
    };
    assert.deepEqual((await eraseConversation(store, "A", "k2")).records, ["r1"]);
    assert.deepEqual(reads, [{ conversation: "k2", dependants: true }], "no limit, one transaction");
    assert.deepEqual(await eraseTenant(store, "A"), ["r1"]);
    assert.equal(deletedTenant, "A");
    assert.equal(reads.length, 1, "no conversation step for the tenant");
    await assert.rejects(eraseConversation(store, "A", "k2", 0), RangeError);
  });

  it("a step before the last deletes what it read and leaves the conversation's rest for later", () => {
    const superseded = { ...OLD, valid: { ...OLD.valid, to: NEW.valid.from, supersededBy: DUP.id } };
    const { writes, result } = erasureWrites("A", "k2", {
      recordIds: [DUP.id],
      turnIds: ["k2-t"],
      complete: false,
      dependants: [superseded],
    });
    assert.deepEqual(result, { records: [DUP.id], turns: [turnRowId("k2", "k2-t")], restored: 1 });
    assert.deepEqual(writes.records, [{ ...OLD, valid: { from: OLD.valid.from } }]);
    assert.deepEqual(writes.deleteRecords, [DUP.id]);
    assert.deepEqual(writes.deleteTurns, { conversation: "k2", turnIds: ["k2-t"] });
    assert.equal(writes.deleteConversation, undefined);
    assert.equal(writes.deleteDeadLetters, undefined);
  });
});
