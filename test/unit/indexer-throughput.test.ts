// The indexer's throughput and freshness tuning (issue 18): the records consumer embeds in slices,
// so the raw-turn consumer's calls to the shared model get in between; update-candidate lookups
// run for several records at once and find exactly what one record after another found.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { HnswVectorStore } from "../../services/core/adapters/hnsw/vector-store.ts";
import { SqliteGraphStore } from "../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import { loadConfig } from "../../services/core/config.ts";
import { mapLimit } from "../../services/core/map-limit.ts";
import type { Embedder, GraphStore, VectorQuery, VectorStore } from "../../services/core/ports.ts";
import type { MemoryRecord } from "../../services/core/types.ts";
import { DEFAULT_CANDIDATE_SETTINGS, findUpdateCandidates } from "../../services/indexer/candidates.ts";
import { FreshnessGate } from "../../services/indexer/freshness-gate.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { SlicedEmbedder } from "../../services/indexer/sliced-embedder.ts";
import { makeRecord, makeSegment, makeTurn } from "../contract/graph-store.contract.ts";

/** A model that runs one call at a time, first come first served (as the ONNX embedder does), and logs each call. */
class QueuedEmbedder implements Embedder {
  readonly inner = new HashingEmbedder(16);
  readonly calls: string[][] = [];
  private queue: Promise<unknown> = Promise.resolve();
  get id() {
    return this.inner.id;
  }
  get dimension() {
    return this.inner.dimension;
  }
  stats() {
    return this.inner.stats();
  }
  embed(texts: readonly string[]): Promise<Float32Array[]> {
    const run = this.queue.then(async () => {
      this.calls.push([...texts]);
      return this.inner.embed(texts);
    });
    this.queue = run.catch(() => undefined);
    return run;
  }
}

describe("SlicedEmbedder", () => {
  it("returns the inner embedder's vectors in order, at most a slice per call", async () => {
    const inner = new QueuedEmbedder();
    const sliced = new SlicedEmbedder(inner, 4);
    const texts = Array.from({ length: 10 }, (_, i) => `record text ${i}`);
    const got = await sliced.embed(texts);
    assert.deepEqual(got, await new HashingEmbedder(16).embed(texts));
    assert.deepEqual(
      inner.calls.map((c) => c.length),
      [4, 4, 2],
    );
    assert.equal((await sliced.embed(texts.slice(0, 3))).length, 3);
    assert.deepEqual(inner.calls.at(-1), texts.slice(0, 3), "a short list is one call");
  });

  it("lets a call made meanwhile in after the first slice, not after the whole list", async () => {
    const inner = new QueuedEmbedder();
    const records = new SlicedEmbedder(inner, 2);
    const segment = records.embed(["r1", "r2", "r3", "r4", "r5", "r6"]);
    const rawTurn = inner.embed(["turn"]);
    await Promise.all([segment, rawTurn]);
    assert.deepEqual(inner.calls, [["r1", "r2"], ["turn"], ["r3", "r4"], ["r5", "r6"]]);
  });

  it("refuses a slice that is not a positive whole number", () => {
    assert.throws(() => new SlicedEmbedder(new HashingEmbedder(16), 0), /positive integer/);
    assert.throws(() => new SlicedEmbedder(new HashingEmbedder(16), 1.5), /positive integer/);
  });
});

describe("FreshnessGate (raw-turn writes first)", () => {
  it("idle() waits while urgent work runs, and is immediate when none does", async () => {
    const gate = new FreshnessGate(60_000);
    const order: string[] = [];
    await gate.idle();
    let finish: () => void = () => undefined;
    const urgent = gate.urgent(
      () =>
        new Promise<void>((ok) => {
          finish = ok;
        }),
    );
    const waiting = gate.idle().then(() => order.push("records step"));
    await Promise.resolve();
    order.push("raw-turn write done");
    finish();
    await Promise.all([urgent, waiting]);
    assert.deepEqual(order, ["raw-turn write done", "records step"]);
    await gate.idle();
  });

  it("a records step waits maxWaitMs at most, however busy the gate is", async () => {
    const gate = new FreshnessGate(5);
    let finish: () => void = () => undefined;
    const urgent = gate.urgent(
      () =>
        new Promise<void>((ok) => {
          finish = ok;
        }),
    );
    await gate.idle(); // resolves by its timeout while the urgent work is still running
    finish();
    await urgent;
  });

  it("the records consumer's embedding slices each wait for the gate", async () => {
    const inner = new QueuedEmbedder();
    const gate = new FreshnessGate(60_000);
    let finish: () => void = () => undefined;
    const rawTurn = gate.urgent(async () => {
      await new Promise<void>((ok) => {
        finish = ok;
      });
      return inner.embed(["turn"]);
    });
    const records = new SlicedEmbedder(inner, 2, () => gate.idle()).embed(["r1", "r2", "r3"]);
    await Promise.resolve();
    assert.deepEqual(inner.calls, [], "no slice while the raw-turn write runs");
    finish();
    await Promise.all([rawTurn, records]);
    assert.deepEqual(inner.calls, [["turn"], ["r1", "r2"], ["r3"]]);
  });
});

describe("MEMORY_RAW_TURNS_FIRST_MAX_WAIT_MS and MEMORY_RAW_TURN_PARTITIONS_AT_ONCE", () => {
  it("default to 1000 ms and 3 partitions, and refuse what is not a whole number, naming the variable", () => {
    const c = loadConfig({}, { MEMORY_CONFIG: "" });
    assert.equal(c.kafka.rawTurnsFirstMaxWaitMs, 1000);
    assert.equal(c.kafka.rawTurnPartitionsAtOnce, 3);
    const set = loadConfig(
      {},
      { MEMORY_CONFIG: "", MEMORY_RAW_TURNS_FIRST_MAX_WAIT_MS: "250", MEMORY_RAW_TURN_PARTITIONS_AT_ONCE: "6" },
    );
    assert.equal(set.kafka.rawTurnsFirstMaxWaitMs, 250);
    assert.equal(set.kafka.rawTurnPartitionsAtOnce, 6);
    assert.throws(
      () => loadConfig({}, { MEMORY_CONFIG: "", MEMORY_RAW_TURNS_FIRST_MAX_WAIT_MS: "-1" }),
      /kafka\.rawTurnsFirstMaxWaitMs.*\[MEMORY_RAW_TURNS_FIRST_MAX_WAIT_MS\]/,
    );
    assert.throws(
      () => loadConfig({}, { MEMORY_CONFIG: "", MEMORY_RAW_TURN_PARTITIONS_AT_ONCE: "0" }),
      /kafka\.rawTurnPartitionsAtOnce.*\[MEMORY_RAW_TURN_PARTITIONS_AT_ONCE\]/,
    );
  });
});

describe("MEMORY_INDEXER_EMBED_SLICE", () => {
  it("defaults to 8 texts per call and refuses what is not a positive whole number, naming the variable", () => {
    assert.equal(loadConfig({}, { MEMORY_CONFIG: "" }).kafka.indexerEmbedSlice, 8);
    assert.equal(loadConfig({}, { MEMORY_CONFIG: "", MEMORY_INDEXER_EMBED_SLICE: "16" }).kafka.indexerEmbedSlice, 16);
    for (const bad of ["0", "2.5", "many"])
      assert.throws(
        () => loadConfig({}, { MEMORY_CONFIG: "", MEMORY_INDEXER_EMBED_SLICE: bad }),
        /kafka\.indexerEmbedSlice.*\[MEMORY_INDEXER_EMBED_SLICE\]/,
      );
  });
});

describe("mapLimit", () => {
  it("keeps the order of the items and never runs more than the limit at once", async () => {
    let running = 0;
    let most = 0;
    const out = await mapLimit([5, 1, 4, 2, 3, 0, 6], 3, async (n, i) => {
      running++;
      most = Math.max(most, running);
      for (let k = 0; k < n; k++) await Promise.resolve();
      running--;
      return `${i}:${n}`;
    });
    assert.deepEqual(out, ["0:5", "1:1", "2:4", "3:2", "4:3", "5:0", "6:6"]);
    assert.equal(most, 3);
  });

  it("rethrows the first error", async () => {
    await assert.rejects(
      mapLimit([1, 2, 3], 2, async (n) => {
        if (n === 2) throw new Error("two");
        return n;
      }),
      /two/,
    );
  });
});

describe("update candidates found several records at a time", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** Store reads counted while in flight: each one yields before it answers, so lookups can overlap. */
  const counting = <T extends object>(target: T, inFlight: { now: number; most: number }): T =>
    new Proxy(target, {
      get(t, p, r) {
        const v = Reflect.get(t, p, r);
        if (typeof v !== "function") return v;
        return async (...args: unknown[]) => {
          inFlight.now++;
          inFlight.most = Math.max(inFlight.most, inFlight.now);
          try {
            await new Promise((ok) => setImmediate(ok));
            return await v.apply(t, args);
          } finally {
            inFlight.now--;
          }
        };
      },
    });

  it("finds the same candidates as one record after another, with lookups overlapping", async () => {
    const dir = mkdtempSync(join(tmpdir(), "indexer-throughput-"));
    dirs.push(dir);
    const db = openSqlite(dir);
    const graph = new SqliteGraphStore(db);
    const vectors = new HnswVectorStore(db, dir);
    const embedder = new HashingEmbedder();
    try {
      const facts = [
        ["Jon works at Acme.", ["Jon"], ["work"]],
        ["Jon works at Globex now.", ["Jon"], ["work"]],
        ["Gina opened a dance studio.", ["Gina"], ["dance"]],
        ["Gina teaches dance on Fridays.", ["Gina"], ["dance"]],
        ["Jon lost his job at Globex.", ["Jon"], ["work"]],
        ["Jon and Gina met at the studio.", ["Jon", "Gina"], ["dance", "work"]],
      ] as const;
      const records: MemoryRecord[] = [];
      for (const [i, [text, entities, topics]] of facts.entries()) {
        const saidAt = `2023-0${i + 1}-01T00:00:00.000Z`;
        const id = `seg-${i}`;
        const segment = makeSegment("A", "c1", id, [makeTurn(`${id}-t1`, text, saidAt)]);
        const record = makeRecord("A", "c1", id, {
          text,
          type: "fact",
          entities: [...entities],
          topics: [...topics],
          saidAt,
          turnIds: [`${id}-t1`],
        });
        await indexSegment({ graph, vectors, embedder, candidates: false }, segment, [record]);
        records.push(record);
      }
      const vectorOf = new Map(
        (
          await vectors.get(
            "A",
            records.map((r) => r.id),
          )
        ).map((v) => [v.id, v.vector]),
      );
      const inFlight = { now: 0, most: 0 };
      const deps = {
        graph: counting<GraphStore>(graph, inFlight),
        vectors: counting<VectorStore>(vectors, inFlight),
      };
      const one = await findUpdateCandidates(deps, "A", records, vectorOf, {
        ...DEFAULT_CANDIDATE_SETTINGS,
        concurrency: 1,
      });
      const oneMost = inFlight.most;
      inFlight.most = 0;
      const four = await findUpdateCandidates(deps, "A", records, vectorOf, {
        ...DEFAULT_CANDIDATE_SETTINGS,
        concurrency: 4,
      });
      assert.ok(one.length > 0, "the records have candidates among each other");
      assert.deepEqual(four, one);
      // The searches and the topic lookups of all records go side by side, each `concurrency` at a time.
      assert.equal(oneMost, 2, "one at a time: one search and one topic lookup at once");
      assert.ok(inFlight.most > 2, `lookups of several records overlap (${inFlight.most} reads at once)`);
      assert.ok(inFlight.most <= 8, "at most four searches and four topic lookups at once");

      // A store with the batched reads (searchMany, recordsByTopicsMany: Neo4j's, one statement
      // each) gives the same candidates with one call per route and round.
      const calls = new Map<string, number>();
      const counted = <T extends object>(target: T, batched: Record<string, unknown>): T =>
        new Proxy(target, {
          get(t, p, r) {
            const v = p in batched ? batched[p as string] : Reflect.get(t, p, r);
            if (typeof v !== "function") return v;
            return (...args: unknown[]) => {
              calls.set(String(p), (calls.get(String(p)) ?? 0) + 1);
              return v.apply(p in batched ? undefined : t, args);
            };
          },
        });
      const batchedDeps = {
        graph: counted<GraphStore>(graph, {
          recordsByTopicsMany: (tenant: string, lookups: readonly { topics: readonly string[]; k: number }[]) =>
            Promise.all(lookups.map((l) => graph.recordsByTopics(tenant, l.topics, l.k))),
        }),
        vectors: counted<VectorStore>(vectors, {
          searchMany: (tenant: string, queries: readonly VectorQuery[]) =>
            Promise.all(queries.map((q) => vectors.search(tenant, q.vector, q.k, q.filter))),
        }),
      };
      assert.deepEqual(await findUpdateCandidates(batchedDeps, "A", records, vectorOf), one);
      assert.equal(calls.get("searchMany"), 1);
      assert.equal(calls.get("recordsByTopicsMany"), 1);
      assert.equal(calls.get("getRecords"), 1);
      assert.ok((calls.get("get") ?? 0) <= 1);
      assert.equal(calls.get("search"), undefined);
      assert.equal(calls.get("recordsByTopics"), undefined);
    } finally {
      await vectors.close();
      await graph.close();
      db.close();
    }
  });
});
