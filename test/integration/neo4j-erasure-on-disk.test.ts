// What a Neo4j 5 Community store keeps on disk after an erasure (docs/erasure.md). Skips unless
// NEO4J_URI is set and the server's data folder is readable here (NEO4J_DATA_DIR, default the
// local infra's infra/.work/data/neo4j/data). Neo4j gives no client a way to scrub its files, so
// this asserts what the product guarantees (nothing erased is readable through Neo4j; the purge
// runs) and reports, as test diagnostics, which files still hold the erased text.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { test } from "node:test";
import { eraseConversation } from "../../services/consolidator/erasure.ts";
import { Neo4jGraphStore } from "../../services/core/adapters/neo4j/graph-store.ts";
import { makeRecord, makeSegment, makeTurn } from "../contract/graph-store.contract.ts";
import { neo4jConnection, neo4jSkip } from "../helpers/neo4j-env.ts";

const dataDir = process.env.NEO4J_DATA_DIR ?? "infra/.work/data/neo4j/data";

const filesUnder = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));

/** Files of the folder holding the needle (UTF-8 or UTF-16LE; Neo4j keeps short strings in either). */
const holding = (dir: string, needle: string): string[] =>
  filesUnder(dir).filter((f) => {
    try {
      const bytes = readFileSync(f);
      return bytes.includes(Buffer.from(needle, "utf8")) || bytes.includes(Buffer.from(needle, "utf16le"));
    } catch {
      return false; // a file the server removed (log rotation) or holds locked
    }
  });

test("Neo4j erasure: nothing readable through the database; what its files still hold is reported", {
  skip: neo4jSkip || (existsSync(dataDir) ? false : `Neo4j data folder ${dataDir} not readable here`),
}, async (t) => {
  const store = await Neo4jGraphStore.open(neo4jConnection());
  const tenant = `erasure-disk-${randomUUID().slice(0, 8)}`;
  const marker = `erq${randomUUID().replaceAll("-", "").slice(0, 16)}`;
  try {
    const text = `Caroline stayed at the ${marker} guesthouse in Porto.`;
    const segment = makeSegment(tenant, "gone", "seg-gone", [makeTurn("t1", text, "2024-02-01T10:00:00.000Z")]);
    const record = makeRecord(tenant, "gone", "seg-gone", {
      text,
      type: "fact",
      entities: ["Caroline"],
      topics: ["travel"],
      saidAt: "2024-02-01T10:00:00.000Z",
      turnIds: ["t1"],
    });
    await store.writeBatch({ tenant, conversation: "gone", segment, records: [record], eventFrames: [] });
    assert.equal((await store.searchRecordsLexical(tenant, marker, 5)).length, 1);

    const erased = await eraseConversation(store, tenant, "gone");
    assert.deepEqual(erased.records, [record.id]);
    const started = performance.now();
    await store.purgeDeleted();
    const ms = performance.now() - started;

    assert.deepEqual(await store.searchRecordsLexical(tenant, marker, 5), []);
    assert.deepEqual(await store.searchTurnsLexical(tenant, marker, 5), []);
    assert.deepEqual(await store.getRecords(tenant, [record.id]), []);
    const left = holding(dataDir, marker.slice(-12)).map((f) => relative(dataDir, f));
    t.diagnostic(`purgeDeleted (fulltext refresh + checkpoint): ${ms.toFixed(0)} ms`);
    t.diagnostic(`files still holding the erased text: ${left.length === 0 ? "none" : left.join(", ")}`);
  } finally {
    await store.deleteTenant(tenant);
    await store.close();
  }
});
