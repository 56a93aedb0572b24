import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { STATE_MIGRATIONS } from "../../services/core/adapters/sqlite/schema.ts";
import { SqliteStateStore } from "../../services/core/adapters/sqlite/state-store.ts";
import { openSqlite, schemaVersion } from "../../services/core/adapters/sqlite-db.ts";

interface OpenSegment {
  turns: string[];
  tokens: number;
}

describe("SqliteStateStore", () => {
  it("puts, gets, overwrites, lists and deletes JSON values per (stage, key)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "state-store-"));
    const db = openSqlite(dir);
    try {
      const store = new SqliteStateStore(db);
      assert.equal(schemaVersion(db, "state"), STATE_MIGRATIONS.length);
      assert.equal(await store.get("segmenter", "t/c"), undefined);
      await store.put<OpenSegment>("segmenter", "t/c", { turns: ["1"], tokens: 5 });
      await store.put<OpenSegment>("segmenter", "t/a", { turns: [], tokens: 0 });
      await store.put("encoder", "t/c", { aliases: { Mel: "Melanie" } });
      assert.deepEqual(await store.get<OpenSegment>("segmenter", "t/c"), { turns: ["1"], tokens: 5 });
      await store.put<OpenSegment>("segmenter", "t/c", { turns: ["1", "2"], tokens: 9 });
      assert.deepEqual(await store.get<OpenSegment>("segmenter", "t/c"), { turns: ["1", "2"], tokens: 9 });
      assert.deepEqual(await store.keys("segmenter"), ["t/a", "t/c"]);
      assert.deepEqual(await store.keys("encoder"), ["t/c"]);
      assert.deepEqual(await store.keys("nothing"), []);
      // Stages are separate namespaces.
      assert.deepEqual(await store.get("encoder", "t/c"), { aliases: { Mel: "Melanie" } });
      await store.delete("segmenter", "t/c");
      await store.delete("segmenter", "never-there");
      assert.equal(await store.get("segmenter", "t/c"), undefined);
      assert.deepEqual(await store.keys("segmenter"), ["t/a"]);
      // Scalars, arrays and null are JSON too.
      await store.put("x", "n", 42);
      await store.put("x", "arr", [1, "two"]);
      await store.put("x", "nil", null);
      assert.equal(await store.get<number>("x", "n"), 42);
      assert.deepEqual(await store.get("x", "arr"), [1, "two"]);
      assert.equal(await store.get("x", "nil"), null);
      await assert.rejects(store.put("x", "u", undefined), /JSON/);
      await store.close();
      await assert.rejects(store.get("x", "n"), /closed/);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("survives close and reopen (on disk), with its own handle via open()", async () => {
    const dir = mkdtempSync(join(tmpdir(), "state-store-"));
    try {
      const a = SqliteStateStore.open(dir);
      await a.put("segmenter", "k", { tokens: 3 });
      await a.close();
      assert.equal(a.db.open, false);
      const b = SqliteStateStore.open(dir);
      assert.deepEqual(await b.get("segmenter", "k"), { tokens: 3 });
      assert.deepEqual(await b.keys("segmenter"), ["k"]);
      await b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
