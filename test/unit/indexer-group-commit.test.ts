/**
 * Group commit in the indexer (issue 18): segments indexed as one group (indexSegments, and the
 * Kafka stage's prepare() over a chunk) give the same records and the same update candidates as the
 * same segments indexed one at a time in the same order, on real SQLite + HNSW stores with the
 * hashing embedder. The candidate settings look at two neighbours only, so records of later
 * segments of the group, written before the lookups, would crowd out what a lookup alone finds if
 * they were not hidden. A group that fails part way is indexed again as a group by handle(), and a
 * replay of a whole chunk gives the same outputs again.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type UpdateCandidatesEvent, UpdateCandidatesEventSchema } from "../../services/core/adapters/kafka/serde.ts";
import type { StageInput } from "../../services/core/adapters/kafka/stage-runtime.ts";
import type { GraphStore } from "../../services/core/ports.ts";
import {
  keyOf,
  type RecordsEvent,
  RecordsEventSchema,
  type Segment,
  type UpdateCandidate,
} from "../../services/core/types.ts";
import type { CandidateSettings } from "../../services/indexer/candidates.ts";
import { indexSegment, indexSegments } from "../../services/indexer/indexer.ts";
import { indexerStage } from "../../services/indexer/kafka-handler.ts";
import { type LocalStores, withLocalStores } from "../helpers/local-stores.ts";
import { jsonCodec, recordOf, segmentOf, segmentTurnOf } from "../helpers/stage-fixtures.ts";

const SETTINGS: CandidateSettings = { similarityThreshold: 0.55, neighbours: 2, maxPerRecord: 8, concurrency: 4 };

/** Deterministic pseudo-random numbers (mulberry32). */
const seeded = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};

const PEOPLE = ["Caroline", "Melanie", "Jon"];
const TOPICS = ["moving", "painting", "dogs"];
const WORDS = ["Paris", "a sunrise", "her dog Pepper", "the lake", "a new job", "the museum", "pottery", "Berlin"];

/**
 * Segments of two conversations of one tenant, interleaved as a chunk brings them. Several segments
 * of a conversation share a timestamp (a session's turns often do), so a later segment's records
 * are not "said after" an earlier one's end: only their place in the group hides them.
 */
const eventsOf = (seed: number, segments: number, tenant = "acme"): RecordsEvent[] => {
  const rnd = seeded(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const out: RecordsEvent[] = [];
  for (let s = 0; s < segments; s++) {
    const conversation = s % 2 === 0 ? "c1" : "c2";
    const at = `2023-0${1 + Math.floor(s / 4)}-01T10:00:00.000Z`;
    const turns = [0, 1, 2].map((t) => segmentTurnOf(`s${s}-t${t}`, `turn ${s}.${t} about ${pick(WORDS)}`, at));
    const segment: Segment = segmentOf(`seg-${s}`, turns, tenant, conversation);
    const records = turns.map((turn, t) => {
      const who = pick(PEOPLE);
      return recordOf(segment, {
        text: `${who} talked about ${pick(WORDS)} and ${pick(WORDS)} (${s}.${t}).`,
        entities: [{ name: who, kind: "person", aliases: [] }],
        topics: [pick(TOPICS)],
        turnIds: [turn.turnId],
        saidAt: at,
      });
    });
    out.push({
      tenant,
      conversation,
      segment,
      records,
      context: { aliases: {}, referents: {}, speakers: ["Caroline"], recentRecords: [] },
    });
  }
  return out;
};

const sorted = (cs: readonly UpdateCandidate[]) =>
  [...cs].sort((a, b) => `${a.recordId}/${a.candidateId}`.localeCompare(`${b.recordId}/${b.candidateId}`));

const oneAtATime = async (s: LocalStores, events: readonly RecordsEvent[]) => {
  const outcomes = [];
  for (const e of events) outcomes.push(await indexSegment({ ...s, candidates: SETTINGS }, e.segment, e.records));
  return outcomes;
};

const stageOf = (s: LocalStores, graph: GraphStore = s.graph) =>
  indexerStage({
    input: jsonCodec("memory.records.v1", RecordsEventSchema),
    output: jsonCodec("memory.update-queue.v1", UpdateCandidatesEventSchema),
    graph,
    vectors: s.vectors,
    embedder: s.embedder,
    candidates: SETTINGS,
  });

type Chunk = { key: string; input: StageInput<RecordsEvent> }[];
const chunkOf = (events: readonly RecordsEvent[]): Chunk =>
  events.map((value) => ({ key: keyOf(value.tenant, value.conversation), input: { kind: "event", value } }));

/** What the stage produces for a chunk: prepare() (if it succeeds), then handle() of each input. */
const runChunk = async (stage: ReturnType<typeof stageOf>, chunk: Chunk) => {
  const outs: { key: string; value: UpdateCandidatesEvent }[][] = [];
  for (const { key, input } of chunk) {
    const r = await stage.handle(key, input, undefined);
    outs.push(
      (r.outputs as { key: string; value: UpdateCandidatesEvent }[]).sort((a, b) => a.key.localeCompare(b.key)),
    );
  }
  return outs;
};

/** A graph store whose writeBatch fails once, on its n-th call. */
const failingOnce = (graph: GraphStore, n: number): GraphStore => {
  let calls = 0;
  return new Proxy(graph, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (prop === "writeBatch")
        return async (...args: Parameters<GraphStore["writeBatch"]>) => {
          if (++calls === n) throw new Error("neo4j went away");
          return target.writeBatch(...args);
        };
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
};

describe("indexer group commit", () => {
  it("indexes a group as the same segments one at a time: same records, same candidates per segment", async () => {
    for (const seed of [1, 2, 3]) {
      const events = eventsOf(seed, 8);
      await withLocalStores("group-one-", async (a) => {
        await withLocalStores("group-all-", async (b) => {
          const single = await oneAtATime(a, events);
          const grouped = await indexSegments(
            { ...b, candidates: SETTINGS },
            events.map((e) => ({ segment: e.segment, records: e.records })),
          );
          assert.equal(grouped.length, single.length);
          grouped.forEach((g, i) => {
            const s = single[i];
            assert.ok(s);
            assert.deepEqual({ ...g, candidates: sorted(g.candidates) }, { ...s, candidates: sorted(s.candidates) });
          });
          const all = single.flatMap((o) => o.candidates);
          assert.ok(all.length > 0, "the fixture yields candidates");
          // Not vacuous: a record of a later segment has one of an earlier segment as a candidate,
          // so the earlier one's lookup, run after both were written, has the later one in reach.
          const segmentOfRecord = new Map(events.flatMap((e, i) => e.records.map((r) => [r.id, i] as const)));
          assert.ok(
            all.some((c) => (segmentOfRecord.get(c.recordId) ?? 0) > (segmentOfRecord.get(c.candidateId) ?? 0)),
          );
          assert.deepEqual(
            sorted(await b.graph.listUpdateCandidates("acme")),
            sorted(await a.graph.listUpdateCandidates("acme")),
          );
          assert.equal(await b.graph.countRecords("acme"), await a.graph.countRecords("acme"));
          assert.equal(await b.graph.countSegments("acme"), await a.graph.countSegments("acme"));
        });
      });
    }
  });

  it("the stage's prepare() groups a chunk up to its first control; outputs as one at a time", async () => {
    const events = eventsOf(7, 6);
    await withLocalStores("group-stage-one-", async (a) => {
      await withLocalStores("group-stage-all-", async (b) => {
        const reference = await runChunk(stageOf(a), chunkOf(events));
        const stage = stageOf(b);
        const chunk: Chunk = [
          ...chunkOf(events.slice(0, 4)),
          { key: keyOf("acme", "c2"), input: { kind: "control", control: "flush" } as StageInput<RecordsEvent> },
          ...chunkOf(events.slice(4)),
        ];
        await stage.prepare?.(chunk);
        // The events after the control are not indexed ahead of it.
        const after = events.slice(4).flatMap((e) => e.records.map((r) => r.id));
        assert.deepEqual(await b.graph.getRecords("acme", after), []);
        const before = events.slice(0, 4).flatMap((e) => e.records.map((r) => r.id));
        assert.equal((await b.graph.getRecords("acme", before)).length, before.length);
        const outs = await runChunk(stage, chunk);
        assert.deepEqual([...outs.slice(0, 4), ...outs.slice(5)], reference);
        assert.deepEqual(outs[4], []);
        assert.ok(reference.flat().length > 0);
      });
    });
  });

  it("a group failing part way is indexed again by handle(); a replayed chunk gives the same outputs", async () => {
    const events = eventsOf(11, 6);
    await withLocalStores("group-crash-one-", async (a) => {
      await withLocalStores("group-crash-all-", async (b) => {
        const reference = await runChunk(stageOf(a), chunkOf(events));
        const chunk = chunkOf(events);
        // The third segment's graph write fails: the first two are written, nothing is handed out;
        // the first handle() indexes the group again.
        const crashing = stageOf(b, failingOnce(b.graph, 3));
        await assert.rejects(crashing.prepare?.(chunk) ?? Promise.resolve(), /neo4j went away/);
        assert.deepEqual(await runChunk(crashing, chunk), reference);
        // The Kafka commit lost (a crash after the writes): the chunk comes again, grouped.
        const replay = stageOf(b);
        await replay.prepare?.(chunk);
        assert.deepEqual(await runChunk(replay, chunk), reference);
        assert.deepEqual(
          sorted(await b.graph.listUpdateCandidates("acme")),
          sorted(await a.graph.listUpdateCandidates("acme")),
        );
      });
    });
  });
});
