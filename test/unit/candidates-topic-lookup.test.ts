/**
 * The indexer's topic lookup (SqliteGraphStore.recordsByTopics, tenant-wide, the topic index named
 * instead of the planner's walk over every topic row of the tenant) returns exactly what the rule
 * says: current records holding any of the topics, by distinct topics matched, then newest said-at,
 * then id. Checked on a seeded store written through indexSegment against that rule computed from
 * every record, for each record's own topics (the lookup the indexer makes), and the update
 * candidates found through the store equal those found through the reference lookup.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { HnswVectorStore } from "../../services/core/adapters/hnsw/vector-store.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import type { GraphStore, ScoredId } from "../../services/core/ports.ts";
import { normaliseKey } from "../../services/core/record-index.ts";
import { seededRandom } from "../../services/core/seeded-random.ts";
import type { MemoryRecord } from "../../services/core/types.ts";
import { DEFAULT_CANDIDATE_SETTINGS, findUpdateCandidates } from "../../services/indexer/candidates.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { makeRecord, makeSegment, makeTurn } from "../contract/graph-store.contract.ts";

const dir = mkdtempSync(join(tmpdir(), "candidates-topics-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const TENANT = "topics-t";
const TOPICS = [
  "work",
  "travel",
  "Family",
  "music",
  "food",
  "health",
  "books",
  "pets",
  "garden",
  "money",
  "school",
  "art",
];
const PEOPLE = ["Jon", "Ana", "Bo", "Cy", "Dee", "Eli", "Fay"];
const VERBS = ["likes", "moved to", "visited", "works at", "talked about", "bought", "planned"];

describe("update candidates: tenant-wide topic lookup", () => {
  it("equals the rule computed from every record, and so do the candidates", async () => {
    const db = openSqlite(dir);
    const graph = new SqliteGraphStore(db);
    const vectors = new HnswVectorStore(db, dir);
    const embedder = new HashingEmbedder(64);
    const rnd = seededRandom(18);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
    const written: MemoryRecord[] = [];
    // 3 conversations, 150 segments of 4 records: 600 records with 1-3 topics from 12 (many ties
    // on score and some on said-at: two records per minute of a day).
    for (let s = 0; s < 150; s++) {
      const conversation = `c${s % 3}`;
      const segmentId = `seg-${s}`;
      const records: MemoryRecord[] = [];
      const turns = [];
      for (let i = 0; i < 4; i++) {
        const saidAt = new Date(Date.UTC(2024, 0, 1, 9, Math.floor((s * 4 + i) / 2))).toISOString();
        const person = pick(PEOPLE);
        const text = `${person} ${pick(VERBS)} ${pick(TOPICS)} number ${s * 4 + i}`;
        const topics = [...new Set(Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => pick(TOPICS)))];
        turns.push(makeTurn(`${segmentId}-t${i}`, text, saidAt));
        records.push(
          makeRecord(TENANT, conversation, segmentId, {
            text,
            type: "fact",
            entities: [person],
            topics,
            saidAt,
            turnIds: [`${segmentId}-t${i}`],
          }),
        );
      }
      await indexSegment({ graph, vectors, embedder }, makeSegment(TENANT, conversation, segmentId, turns), records);
      written.push(...records);
    }

    const current = (
      await graph.getRecords(
        TENANT,
        written.map((r) => r.id),
      )
    ).filter((r) => !r.valid.supersededBy);
    assert.equal(current.length, written.length);
    const keysOf = new Map(current.map((r) => [r.id, new Set(r.topics.map(normaliseKey))]));
    /** The rule, from every record: distinct topics matched, newest said-at, id. */
    const reference = (topics: readonly string[], k: number): ScoredId[] => {
      const wanted = new Set(topics.map(normaliseKey).filter(Boolean));
      return current
        .map((r) => ({ r, score: [...(keysOf.get(r.id) ?? [])].filter((t) => wanted.has(t)).length }))
        .filter((x) => x.score > 0)
        .sort(
          (a, b) =>
            b.score - a.score ||
            Date.parse(b.r.source.saidAt) - Date.parse(a.r.source.saidAt) ||
            (a.r.id < b.r.id ? -1 : a.r.id > b.r.id ? 1 : 0),
        )
        .slice(0, k)
        .map((x) => ({ id: x.r.id, score: x.score }));
    };
    const k = DEFAULT_CANDIDATE_SETTINGS.neighbours * 4;
    for (const r of current) {
      assert.deepEqual(await graph.recordsByTopics(TENANT, r.topics, k), reference(r.topics, k), r.id);
    }

    // The candidates of the last 40 records through the store and through the reference lookup.
    const referenceGraph = new Proxy(graph, {
      get(target, p, receiver) {
        if (p === "recordsByTopics")
          return async (tenant: string, topics: readonly string[], kk: number, conversation?: string) => {
            assert.equal(tenant, TENANT);
            assert.equal(conversation, undefined);
            return reference(topics, kk);
          };
        const v = Reflect.get(target, p, receiver);
        return typeof v === "function" ? v.bind(target) : v;
      },
    }) as GraphStore;
    const last = written.slice(-40);
    const vectorOf = new Map(
      (
        await vectors.get(
          TENANT,
          last.map((r) => r.id),
        )
      ).map((v) => [v.id, v.vector]),
    );
    assert.equal(vectorOf.size, last.length);
    const viaStore = await findUpdateCandidates({ graph, vectors }, TENANT, last, vectorOf);
    const viaReference = await findUpdateCandidates({ graph: referenceGraph, vectors }, TENANT, last, vectorOf);
    assert.ok(
      viaStore.some((c) => c.reason === "entity-topic"),
      "topic-sharing candidates exist",
    );
    assert.deepEqual(viaStore, viaReference);
    await vectors.close();
    await graph.close();
    db.close();
  });
});
