// The consolidator and erased records (issue 13): candidate rows that name a record which no longer
// exists (its conversation was erased while its candidates were still on the update queue, and the
// consolidator service put them back from there) are deleted, not decided: the decider never sees
// the erased record, nothing of it is written back, the kept records' decisions still happen.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { runConsolidation } from "../../services/consolidator/consolidator.ts";
import { eraseConversation } from "../../services/consolidator/erasure.ts";
import { RuleDecider } from "../../services/consolidator/rules.ts";
import type { CandidateView, ConsolidationDecider } from "../../services/consolidator/types.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import { recordId } from "../../services/core/ids.ts";
import type { MemoryRecord, RecordType, UpdateCandidate } from "../../services/core/types.ts";

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

let turnNo = 0;
const rec = (conversation: string, statement: string, day: string, type: RecordType = "fact"): MemoryRecord => {
  const text = `Ana (${day}): ${statement}`;
  const places = statement.match(/\b(?:Boston|Denver|Lisbon)\b/g) ?? [];
  const turnId = `t${++turnNo}`;
  return {
    id: recordId("A", text),
    type,
    text,
    entities: [
      { name: "Ana", kind: "person", aliases: [] },
      ...places.map((name) => ({ name, kind: "place" as const, aliases: [] })),
    ],
    topics: [],
    time: {},
    source: {
      tenant: "A",
      conversation,
      segmentId: `${conversation}-seg-${day}`,
      turnIds: [turnId],
      speakers: ["Ana"],
      sessionId: "s1",
      saidAt: `${day}T10:00:00.000Z`,
    },
    valid: { from: `${day}T10:00:00.000Z` },
  };
};

const write = async (g: SqliteGraphStore, records: readonly MemoryRecord[]): Promise<void> => {
  for (const r of records) {
    await g.writeBatch({
      tenant: "A",
      conversation: r.source.conversation,
      segment: {
        id: r.source.segmentId,
        tenant: "A",
        conversation: r.source.conversation,
        sessionId: "s1",
        turns: r.source.turnIds.map((turnId) => ({
          turnId,
          speaker: "Ana",
          role: "user" as const,
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
      },
      records: [r],
      eventFrames: [{ id: `f-${r.id}`, recordIds: [r.id], turnIds: r.source.turnIds }],
    });
  }
};

const cand = (r: MemoryRecord, c: MemoryRecord): UpdateCandidate => ({
  recordId: r.id,
  candidateId: c.id,
  tenant: "A",
  similarity: 0.5,
  sharedEntities: ["ana"],
  sharedTopics: [],
  reason: "entity-attribute",
});

/** The rules, recording every record they are shown. */
class SeeingDecider implements ConsolidationDecider {
  readonly id = "rules";
  readonly seen = new Set<string>();
  private readonly rules = new RuleDecider();
  decide(subject: MemoryRecord, views: readonly CandidateView[]) {
    this.seen.add(subject.id);
    for (const v of views) this.seen.add(v.record.id);
    return this.rules.decide(subject, views);
  }
}

describe("consolidation over candidates of erased records", () => {
  it("deletes the rows naming a missing record and decides the rest", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memory-consolidator-missing-"));
    dirs.push(dir);
    const g = new SqliteGraphStore(openSqlite(dir), { ownsDb: true });
    const boston = rec("kept", "Ana lives in Boston.", "2024-01-01");
    const denver = rec("erased", "Ana moved to Denver.", "2024-02-01", "event");
    const lisbon = rec("kept", "Ana moved to Lisbon.", "2024-03-01", "event");
    await write(g, [boston, denver, lisbon]);
    await eraseConversation(g, "A", "erased");
    assert.deepEqual(await g.getRecords("A", [denver.id]), []);
    // Replayed from the update queue after the erasure: the erased record's own candidate set, and
    // a kept record's set that names the erased record next to a kept one.
    await g.putUpdateCandidates([cand(denver, boston), cand(lisbon, denver), cand(lisbon, boston)]);
    assert.equal(await g.countPendingCandidates("A"), 3);

    const decider = new SeeingDecider();
    const report = await runConsolidation({ graph: g, decider }, { tenant: "A" });
    assert.ok(!decider.seen.has(denver.id), "the decider never sees the erased record");
    assert.deepEqual(
      { examined: report.examined, candidates: report.candidates, superseded: report.superseded },
      { examined: 1, candidates: 1, superseded: 1 },
      "only the kept pair is decided (Lisbon supersedes Boston)",
    );
    assert.equal(await g.countPendingCandidates("A"), 0);
    assert.deepEqual(
      (await g.listUpdateCandidates("A")).map((c) => [c.recordId, c.candidateId]),
      [[lisbon.id, boston.id]],
      "no candidate row of the erased record is left, settled or not",
    );
    assert.deepEqual(await g.getRecords("A", [denver.id]), [], "nothing of the erased record is written back");
    const relations = await g.relationsOf("A", [boston.id, lisbon.id, denver.id]);
    assert.ok(relations.every((r) => r.from !== denver.id && r.to !== denver.id));
    const [old] = await g.getRecords("A", [boston.id]);
    assert.equal(old?.valid.supersededBy, lisbon.id);

    // A second run finds nothing; replaying the erased record's candidates again changes nothing.
    await g.putUpdateCandidates([cand(denver, boston)]);
    const again = await runConsolidation({ graph: g, decider }, { tenant: "A" });
    assert.deepEqual([again.examined, again.merged, again.superseded, again.linked], [0, 0, 0, 0]);
    assert.equal(await g.countPendingCandidates("A"), 0);
    await g.close();
  });
});
