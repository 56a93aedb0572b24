// The known entity / topic names and record counts the SQLite store keeps between queries: never older than the data,
// whoever wrote (this handle, another connection), and each caller gets its own array.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite, type SqliteDatabase } from "../../services/core/adapters/sqlite-db.ts";
import { makeRecord, makeSegment, makeTurn } from "../contract/graph-store.contract.ts";

const batch = (conversation: string, segment: string, text: string, entities: string[], topics: string[]) => {
  const saidAt = "2023-01-01T00:00:00.000Z";
  const seg = makeSegment("A", conversation, segment, [makeTurn(`${segment}-t1`, text, saidAt)]);
  const rec = makeRecord("A", conversation, segment, {
    text,
    type: "fact",
    entities,
    topics,
    saidAt,
    turnIds: [`${segment}-t1`],
  });
  return { tenant: "A", conversation, segment: seg, records: [rec], eventFrames: [] };
};

describe("SqliteGraphStore known names and record counts kept until the data changes", () => {
  let dir: string;
  let db: SqliteDatabase;
  let other: SqliteDatabase;
  let store: SqliteGraphStore;
  let writer: SqliteGraphStore;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "known-names-"));
    db = openSqlite(dir);
    other = openSqlite(dir);
    store = new SqliteGraphStore(db);
    writer = new SqliteGraphStore(other);
    await store.writeBatch(batch("c1", "s1", "Caroline went hiking.", ["Caroline"], ["hiking"]));
  });

  after(async () => {
    await store.close();
    await writer.close();
    db.close();
    other.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads the same names again, each caller getting its own array", async () => {
    const first = await store.knownEntities("A");
    assert.deepEqual(first, ["Caroline"]);
    first.push("Mallory");
    assert.deepEqual(await store.knownEntities("A"), ["Caroline"]);
    assert.deepEqual(await store.knownTopics("A", "c1"), ["hiking"]);
    assert.equal(await store.countRecords("A"), 1);
    assert.equal(await store.countRecords("A"), 1);
  });

  it("sees a write through its own handle at once", async () => {
    assert.deepEqual(await store.knownTopics("A"), ["hiking"]);
    await store.writeBatch(batch("c1", "s2", "Melanie paints.", ["Melanie"], ["painting"]));
    assert.deepEqual(await store.knownEntities("A"), ["Caroline", "Melanie"]);
    assert.deepEqual(await store.knownTopics("A", "c1"), ["hiking", "painting"]);
    assert.equal(await store.countRecords("A", "c1"), 2);
  });

  it("sees a write committed by another connection at once", async () => {
    assert.deepEqual(await store.knownEntities("A", "c2"), []);
    await writer.writeBatch(batch("c2", "s3", "Jon dances.", ["Jon"], ["dance"]));
    assert.deepEqual(await store.knownEntities("A", "c2"), ["Jon"]);
    assert.deepEqual(await store.knownEntities("A"), ["Caroline", "Jon", "Melanie"]);
    assert.deepEqual(await store.knownTopics("A"), ["dance", "hiking", "painting"]);
    assert.equal(await store.countRecords("A"), 3);
  });

  it("sees an erasure", async () => {
    await writer.deleteTenant("A");
    assert.deepEqual(await store.knownEntities("A"), []);
    assert.deepEqual(await store.knownTopics("A", "c1"), []);
    assert.equal(await store.countRecords("A"), 0);
  });
});
