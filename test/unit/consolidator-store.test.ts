import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { applyConsolidation } from "../../services/consolidator/apply.ts";
import { runConsolidation } from "../../services/consolidator/consolidator.ts";
import { eraseConversation } from "../../services/consolidator/erasure.ts";
import {
  ConsolidationScheduler,
  dueReason,
  inWindow,
  parseWindow,
  type ScheduleSettings,
} from "../../services/consolidator/scheduler.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import { recordId } from "../../services/core/ids.ts";
import type { IndexBatch } from "../../services/core/ports.ts";
import type { MemoryRecord, RecordType, Segment, UpdateCandidate } from "../../services/core/types.ts";
import { walkVersionGraph } from "../../services/core/version-graph.ts";

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const store = (): SqliteGraphStore => {
  const dir = mkdtempSync(join(tmpdir(), "memory-consolidator-"));
  dirs.push(dir);
  return new SqliteGraphStore(openSqlite(dir), { ownsDb: true });
};

let turnNo = 0;
const rec = (tenant: string, conversation: string, statement: string, day: string, type: RecordType = "fact") => {
  const text = `Ana (${day}): ${statement}`;
  const names = [...new Set(["Ana", ...(statement.match(/\b(?:Boston|Denver|Lisbon)\b/g) ?? [])])];
  const r: MemoryRecord = {
    id: recordId(tenant, text),
    type,
    text,
    entities: names.map((name) => ({ name, kind: name === "Ana" ? "person" : "place", aliases: [] })),
    topics: [],
    time: {},
    source: {
      tenant,
      conversation,
      segmentId: `${conversation}-seg-${day}`,
      turnIds: [`t${++turnNo}`],
      speakers: ["Ana"],
      sessionId: "s1",
      saidAt: `${day}T10:00:00.000Z`,
    },
    valid: { from: `${day}T10:00:00.000Z` },
  };
  return r;
};

const write = async (g: SqliteGraphStore, records: MemoryRecord[]): Promise<void> => {
  for (const r of records) {
    const segment: Segment = {
      id: r.source.segmentId,
      tenant: r.source.tenant,
      conversation: r.source.conversation,
      sessionId: "s1",
      turns: r.source.turnIds.map((turnId) => ({
        turnId,
        speaker: "Ana",
        role: "user",
        text: r.text,
        compressed: r.text,
        timestamp: r.source.saidAt,
        sessionId: "s1",
      })),
      start: r.source.saidAt,
      end: r.source.saidAt,
      tokens: 10,
      closedBy: "flush",
      decisions: [],
    };
    const batch: IndexBatch = {
      tenant: r.source.tenant,
      conversation: r.source.conversation,
      segment,
      records: [r],
      eventFrames: [{ id: `f-${r.id}`, recordIds: [r.id], turnIds: r.source.turnIds }],
    };
    await g.writeBatch(batch);
  }
};

const cand = (r: MemoryRecord, c: MemoryRecord): UpdateCandidate => ({
  recordId: r.id,
  candidateId: c.id,
  tenant: r.source.tenant,
  similarity: 0.5,
  sharedEntities: ["ana"],
  sharedTopics: [],
  reason: "entity-attribute",
});

/** Every record of a tenant with its validity, for state comparisons. */
const dump = async (g: SqliteGraphStore, tenant: string) =>
  (await g.listRecords(tenant, { limit: 1000, includeSuperseded: true })).records.map((r) => ({
    id: r.id,
    valid: r.valid,
    merged: r.mergedSources?.map((s) => s.turnIds.join()) ?? [],
  }));

describe("SQLite consolidation writes", () => {
  it("applies a decision atomically: a failure before the commit leaves nothing behind", async () => {
    const g = store();
    const boston = rec("A", "c1", "Ana lives in Boston.", "2024-01-01");
    const denver = rec("A", "c1", "Ana moved to Denver.", "2024-02-01", "event");
    await write(g, [boston, denver]);
    await g.putUpdateCandidates([cand(denver, boston)]);
    const change = {
      tenant: "A",
      ops: [{ kind: "supersede" as const, older: boston.id, newer: denver.id, validTo: denver.valid.from }],
      settled: [{ recordId: denver.id, candidateId: boston.id, decision: "contradiction" as const }],
    };
    const before = await dump(g, "A");
    await assert.rejects(
      applyConsolidation(g, change, {
        beforeCommit: () => {
          throw new Error("crash");
        },
      }),
      /crash/,
    );
    assert.deepEqual(await dump(g, "A"), before);
    assert.equal(await g.countPendingCandidates("A"), 1);
    assert.deepEqual(await g.relationsOf("A", [boston.id]), []);

    const applied = await applyConsolidation(g, change);
    assert.deepEqual(applied, { superseded: 1, merged: 0, linked: 0, skipped: 0 });
    const [old] = await g.getRecords("A", [boston.id]);
    assert.deepEqual(old?.valid, { from: boston.valid.from, to: denver.valid.from, supersededBy: denver.id });
    assert.equal(await g.countPendingCandidates("A"), 0);
    // A replayed candidate keeps its settled status; a repeated op is skipped.
    await g.putUpdateCandidates([cand(denver, boston)]);
    assert.equal(await g.countPendingCandidates("A"), 0);
    assert.equal((await applyConsolidation(g, change)).skipped, 1);
    // Superseded records leave the current indexes but stay readable.
    assert.deepEqual(
      (await g.listRecords("A", { limit: 10 })).records.map((r) => r.id),
      [denver.id],
    );
    assert.equal((await g.getRecords("A", [boston.id])).length, 1);
    await g.close();
  });

  it("merges a duplicate's sources into the older, canonical record", async () => {
    const g = store();
    const a = rec("A", "c1", "Ana has two cats named Luna and Max.", "2024-01-01");
    const b = rec("A", "c2", "Ana has two cats named Luna and Max.", "2024-03-01");
    await write(g, [a, b]);
    const applied = await applyConsolidation(g, {
      tenant: "A",
      ops: [{ kind: "merge", canonical: a.id, duplicate: b.id, validTo: b.valid.from }],
      settled: [],
    });
    assert.equal(applied.merged, 1);
    const [canonical, dup] = await g.getRecords("A", [a.id, b.id]);
    assert.deepEqual(canonical?.mergedSources, [b.source]);
    assert.equal(canonical?.valid.to, undefined);
    assert.equal(dup?.valid.supersededBy, a.id);
    const graph = await walkVersionGraph(g, "A", b.id);
    assert.deepEqual(graph.records.map((r) => r.id).sort(), [a.id, b.id].sort());
    assert.equal(graph.relations[0]?.relation, "DUPLICATE_OF");
    assert.deepEqual(await walkVersionGraph(g, "B", b.id), { records: [], relations: [] }, "tenant-scoped");

    // Erasing the duplicate's conversation takes its source off the canonical record.
    await eraseConversation(g, "A", "c2");
    const [after] = await g.getRecords("A", [a.id]);
    assert.equal(after?.mergedSources, undefined);
    assert.deepEqual(await g.relationsOf("A", [a.id]), []);
    await g.close();
  });

  it("erasing a conversation restores what its records had superseded elsewhere", async () => {
    const g = store();
    const boston = rec("A", "c1", "Ana lives in Boston.", "2024-01-01");
    const denver = rec("A", "c2", "Ana moved to Denver.", "2024-02-01", "event");
    await write(g, [boston, denver]);
    await g.putUpdateCandidates([cand(denver, boston)]);
    const report = await runConsolidation({ graph: g });
    assert.equal(report.superseded, 1);
    const erased = await eraseConversation(g, "A", "c2");
    assert.deepEqual(erased.records, [denver.id]);
    assert.equal(erased.restored, 1);
    const [restored] = await g.getRecords("A", [boston.id]);
    assert.deepEqual(restored?.valid, { from: boston.valid.from });
    assert.equal(await g.countRecords("A", "c2"), 0);
    assert.equal(await g.countPendingCandidates("A"), 0);
    await g.close();
  });

  it("runConsolidation: idempotent, and a crash mid-run resumes to the same state", async () => {
    const build = async () => {
      const g = store();
      const rs = [
        rec("A", "c1", "Ana lives in Boston.", "2024-01-01"),
        rec("A", "c1", "Ana moved to Denver.", "2024-02-01", "event"),
        rec("A", "c1", "Ana moved to Lisbon.", "2024-03-01", "event"),
        rec("A", "c1", "Ana loves sushi.", "2024-01-05", "preference"),
        rec("A", "c1", "Ana doesn't like sushi anymore.", "2024-04-01", "preference"),
        rec("B", "c1", "Ana lives in Boston.", "2024-01-01"),
        rec("B", "c1", "Ana moved to Denver.", "2024-02-01", "event"),
      ];
      await write(g, rs);
      const [a0, a1, a2, a3, a4, b0, b1] = rs as [
        MemoryRecord,
        MemoryRecord,
        MemoryRecord,
        MemoryRecord,
        MemoryRecord,
        MemoryRecord,
        MemoryRecord,
      ];
      await g.putUpdateCandidates([cand(a1, a0), cand(a2, a1), cand(a2, a0), cand(a4, a3), cand(b1, b0), cand(a3, a0)]);
      return g;
    };
    const reference = await build();
    const first = await runConsolidation({ graph: reference }, { concurrency: 2 });
    assert.deepEqual(first.tenants, ["A", "B"]);
    assert.equal(first.superseded, 4);
    assert.equal(first.examined, 5);
    const second = await runConsolidation({ graph: reference });
    assert.equal(second.examined, 0, "nothing left to do");
    const [a2] = (await reference.listRecords("A", { limit: 10, type: "event" })).records;
    assert.match(a2?.text ?? "", /Lisbon/, "the latest move is the current one");

    const crashed = await build();
    await assert.rejects(
      runConsolidation(
        { graph: crashed },
        {
          concurrency: 1,
          beforeCommit: (n) => {
            if (n === 2) throw new Error("injected crash");
          },
        },
      ),
      /injected crash/,
    );
    assert.ok((await crashed.countPendingCandidates()) > 0);
    await runConsolidation({ graph: crashed });
    for (const t of ["A", "B"]) assert.deepEqual(await dump(crashed, t), await dump(reference, t));
    await reference.close();
    await crashed.close();
  });
});

describe("consolidation scheduler", () => {
  it("parses daily UTC windows, wrapping past midnight", () => {
    assert.deepEqual(parseWindow("01:00-05:00"), { startMin: 60, endMin: 300 });
    assert.equal(parseWindow(""), undefined);
    assert.throws(() => parseWindow("1am-5am"), /HH:MM/);
    const w = parseWindow("22:30-02:00");
    assert.ok(w);
    assert.equal(inWindow(Date.parse("2024-01-01T23:00:00Z"), w), true);
    assert.equal(inWindow(Date.parse("2024-01-01T01:59:00Z"), w), true);
    assert.equal(inWindow(Date.parse("2024-01-01T02:00:00Z"), w), false);
    assert.equal(inWindow(Date.parse("2024-01-01T12:00:00Z"), w), false);
  });

  it("is due in the window or after idle time with a low inbox lag, and only with pending work", () => {
    const s: ScheduleSettings = { window: parseWindow("01:00-05:00"), idleMs: 600_000, maxInboxLag: 0 };
    const night = Date.parse("2024-01-01T02:00:00Z");
    const noon = Date.parse("2024-01-01T12:00:00Z");
    const probe = { lastActivityMs: noon - 1000, inboxLag: 0, pending: 3 };
    assert.equal(dueReason(s, { ...probe, nowMs: night }), "window");
    assert.equal(dueReason(s, { ...probe, nowMs: noon }), undefined);
    assert.equal(dueReason(s, { ...probe, nowMs: noon + 600_000 }), "idle");
    assert.equal(dueReason(s, { ...probe, inboxLag: 5, nowMs: noon + 600_000 }), undefined, "ingest still behind");
    assert.equal(dueReason(s, { ...probe, pending: 0, nowMs: night }), undefined, "nothing to do");
  });

  it("runs on its tick with an injected clock, one run at a time", async () => {
    let now = Date.parse("2024-01-01T12:00:00Z");
    let runs = 0;
    let release: () => void = () => {};
    const scheduler = new ConsolidationScheduler(
      { window: parseWindow("01:00-05:00"), idleMs: 0, maxInboxLag: 0 },
      {
        clock: () => now,
        lastActivityMs: () => now,
        inboxLag: () => 0,
        pending: async () => 1,
        run: () => {
          runs++;
          return new Promise<void>((r) => {
            release = r;
          });
        },
      },
    );
    assert.equal(await scheduler.tick(), undefined);
    now = Date.parse("2024-01-02T03:00:00Z");
    const t1 = scheduler.tick();
    const t2 = scheduler.tick();
    await new Promise((r) => setImmediate(r));
    release();
    assert.equal(await t1, "window");
    assert.equal(await t2, "window");
    assert.equal(runs, 1, "a tick during a run joins it");
    scheduler.start();
    scheduler.stop();
  });
});
