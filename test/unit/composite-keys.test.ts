import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { rekeyDeadLetters, rekeyStageState } from "../../services/core/adapters/sqlite/rekey.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import { segmentId } from "../../services/core/ids.ts";
import {
  conversationKey,
  hashInput,
  isTurnRowId,
  joinKey,
  parseConversationKey,
  parseTurnRowId,
  splitKey,
  turnRowId,
} from "../../services/core/keys.ts";

const NAMES = [
  "c1",
  "eu/c1",
  "acme/eu",
  "a%2Fb",
  "50%",
  "x::y",
  "a:",
  ":b",
  "::",
  "\u0000",
  "e\u0301té",
  "🦊/🐻",
  "",
  "%",
  "/",
];

describe("composite keys", () => {
  it("acme's eu/c1 and acme/eu's c1 are different keys, each parsing back to its own parts", () => {
    const a = conversationKey("acme", "eu/c1");
    const b = conversationKey("acme/eu", "c1");
    assert.notEqual(a, b);
    assert.deepEqual(parseConversationKey(a), { tenant: "acme", conversation: "eu/c1" });
    assert.deepEqual(parseConversationKey(b), { tenant: "acme/eu", conversation: "c1" });
  });

  it("round-trips and never collides over names with separators, escapes, NUL and emoji", () => {
    for (const sep of ["/", "::", "\u0000"]) {
      const seen = new Map<string, string>();
      for (const x of NAMES)
        for (const y of NAMES)
          for (const z of NAMES) {
            const key = joinKey(sep, [x, y, z]);
            assert.deepEqual(
              splitKey(sep, key, 3),
              [x, y, z],
              `${JSON.stringify([x, y, z])} with ${JSON.stringify(sep)}`,
            );
            const before = seen.get(key);
            assert.ok(before === undefined, `${key} made from both ${before} and ${JSON.stringify([x, y, z])}`);
            seen.set(key, JSON.stringify([x, y, z]));
          }
    }
  });

  it("keeps keys of plain names in their former format (stored state is still found)", () => {
    assert.equal(conversationKey("acme", "c1"), "acme/c1");
    assert.equal(conversationKey("acme", "eu/c1"), "acme/eu/c1");
    assert.equal(turnRowId("c1", "t2"), "c1::t2");
    assert.equal(turnRowId("c1", "D1:3"), "c1::D1:3");
    assert.equal(hashInput(["t", "c", "t1", "t2"]), "t\u0000c\u0000t1\u0000t2");
  });

  it("turn row ids are unambiguous within a tenant and told apart from record ids", () => {
    const a = turnRowId("a::b", "c");
    const b = turnRowId("a", "b::c");
    assert.notEqual(a, b);
    assert.deepEqual(parseTurnRowId(a), { conversation: "a::b", turnId: "c" });
    assert.deepEqual(parseTurnRowId(b), { conversation: "a", turnId: "b::c" });
    assert.ok(isTurnRowId(a) && isTurnRowId(turnRowId("", "")));
    assert.equal(isTurnRowId("ab".repeat(32)), false);
    assert.equal(parseTurnRowId("garbage"), undefined);
    assert.equal(parseTurnRowId("a:b::c"), undefined, "an unescaped ':' in the conversation part is no row id");
  });

  it("rejects keys that were not made by the encoding", () => {
    assert.equal(parseConversationKey("no-separator"), undefined);
    assert.equal(parseConversationKey("/c1"), undefined, "no tenant");
    assert.equal(parseConversationKey("50%/c1"), undefined, "a bare % is not an escaped part");
    assert.equal(parseConversationKey("a%41/c1"), undefined, "only % and the separator are ever escaped");
  });

  it("segment ids differ when NUL inside a name would have shifted the parts", () => {
    assert.notEqual(segmentId("t", "a\u0000b", "c", "d"), segmentId("t", "a", "b\u0000c", "d"));
  });

  it("migrates stage state and dead letters of tenants with '/' to the new keys", () => {
    const dir = mkdtempSync(join(tmpdir(), "rekey-"));
    const db = openSqlite(dir);
    try {
      db.exec(`
        CREATE TABLE inbox (seq INTEGER PRIMARY KEY, tenant TEXT, conversation TEXT, kind TEXT, turn_id TEXT, json TEXT);
        CREATE TABLE stage_state (stage TEXT NOT NULL, key TEXT NOT NULL, json TEXT NOT NULL, PRIMARY KEY (stage, key));
        CREATE TABLE dead_letters (seq INTEGER PRIMARY KEY, tenant TEXT, stage TEXT, key TEXT, error TEXT, payload TEXT, at TEXT);
      `);
      const inbox = db.prepare("INSERT INTO inbox (tenant, conversation, kind, json) VALUES (?, ?, 'turn', '{}')");
      inbox.run("acme/eu", "c1");
      inbox.run("plain", "c2");
      inbox.run("x", "y/z");
      inbox.run("x/y", "z");
      const state = db.prepare("INSERT INTO stage_state (stage, key, json) VALUES (?, ?, ?)");
      state.run("segmenter", "acme/eu/c1", JSON.stringify({ tenant: "acme/eu", conversation: "c1" }));
      state.run("encoder", "acme/eu/c1", JSON.stringify({ lastSeq: 3 }));
      state.run("encoder", "plain/c2", JSON.stringify({ lastSeq: 1 }));
      state.run("encoder", "x/y/z", JSON.stringify({ lastSeq: 9 }));
      db.prepare("INSERT INTO dead_letters (tenant, stage, key, error, payload, at) VALUES (?, ?, ?, ?, ?, ?)").run(
        "acme",
        "encoder+indexer",
        "acme/eu/c1",
        "boom",
        JSON.stringify({ tenant: "acme/eu", conversation: "c1" }),
        "2026-01-01T00:00:00.000Z",
      );
      rekeyStageState(db);
      rekeyDeadLetters(db);
      const keys = db.prepare("SELECT stage, key FROM stage_state ORDER BY stage, key").all();
      assert.deepEqual(keys, [
        { stage: "encoder", key: "acme%2Feu/c1" },
        { stage: "encoder", key: "plain/c2" },
        // Ambiguous: x's y/z and x/y's z shared it; left as it was.
        { stage: "encoder", key: "x/y/z" },
        { stage: "segmenter", key: "acme%2Feu/c1" },
      ]);
      assert.deepEqual(db.prepare("SELECT tenant, key FROM dead_letters").all(), [
        { tenant: "acme/eu", key: "acme%2Feu/c1" },
      ]);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
