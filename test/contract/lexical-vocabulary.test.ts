// The lexical vocabulary reads (LexicalVocabulary, core/ports.ts; issue 15) on every graph store
// that has them: which terms a tenant or conversation holds, and the closest terms to a misspelled
// one, never another tenant's or conversation's. Neo4j skips unless NEO4J_URI is set
// (eval "$(bash infra/env.sh)"); its tenants are unique per run and deleted at the end.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Neo4jGraphStore } from "../../services/core/adapters/neo4j/graph-store.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import type { GraphStore, LexicalVocabulary } from "../../services/core/ports.ts";
import type { SegmentTurn } from "../../services/core/types.ts";
import { neo4jConnection, neo4jSkip } from "../helpers/neo4j-env.ts";

const turn = (turnId: string, text: string): SegmentTurn => ({
  turnId,
  speaker: "Caroline",
  role: "user",
  text,
  compressed: text,
  timestamp: "2024-05-06T10:00:00.000Z",
  sessionId: "s1",
});

const vocabularyContract = (
  name: string,
  open: () => Promise<{ store: GraphStore & LexicalVocabulary; close: () => Promise<void> }>,
  skip: string | false,
) =>
  describe(`${name}: lexical vocabulary reads`, { skip }, () => {
    const prefix = `vocab-${randomUUID().slice(0, 8)}-`;
    const [a, b] = [`${prefix}a`, `${prefix}b`];
    let store: GraphStore & LexicalVocabulary;
    let close: () => Promise<void>;

    before(async () => {
      ({ store, close } = await open());
      await store.writeTurns(a, "c1", [turn("t1", "Caroline went to Seattle for a conference.")]);
      await store.writeTurns(a, "c2", [turn("t2", "The marathon was exhausting."), turn("t4", "I love painting.")]);
      await store.writeTurns(b, "c1", [turn("t3", "Carolyn bought a marathoner's watch in Seattle.")]);
    });
    after(async () => {
      await store?.deleteTenant(a);
      await store?.deleteTenant(b);
      await close?.();
    });

    it("says which terms the tenant or conversation holds", async () => {
      assert.deepEqual(await store.lexicalTermsPresent(a, ["carolin", "seattl", "carolyn", "marathon"]), [
        "carolin",
        "seattl",
        "marathon",
      ]);
      assert.deepEqual(await store.lexicalTermsPresent(a, ["carolin", "marathon"], "c1"), ["carolin"]);
      assert.deepEqual(await store.lexicalTermsPresent(b, ["carolin", "carolyn"]), ["carolyn"]);
    });

    it("finds the closest terms of the scope, never another tenant's or conversation's", async () => {
      assert.deepEqual(await store.lexicalNeighbours(a, "carolyn", 1), [{ term: "carolin", distance: 1 }]);
      assert.deepEqual(await store.lexicalNeighbours(b, "carolin", 1), [{ term: "carolyn", distance: 1 }]);
      assert.deepEqual(await store.lexicalNeighbours(a, "marathn", 1, "c1"), []);
      assert.deepEqual(await store.lexicalNeighbours(a, "marathn", 1, "c2"), [{ term: "marathon", distance: 1 }]);
      assert.deepEqual(await store.lexicalNeighbours(a, "seatle", 0), [], "no edits allowed, none found");
      assert.deepEqual(
        await store.lexicalNeighbours(a, "paintng", 1),
        [{ term: "paint", distance: 1, ending: true }],
        "a stem matching the start of a misspelt word",
      );
    });
  });

vocabularyContract(
  "SqliteGraphStore",
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "memory-vocab-"));
    const store = SqliteGraphStore.open(dir);
    return {
      store,
      close: async () => {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
  false,
);

vocabularyContract(
  "Neo4jGraphStore",
  async () => {
    const store = await Neo4jGraphStore.open(neo4jConnection());
    return { store, close: () => store.close() };
  },
  neo4jSkip,
);
