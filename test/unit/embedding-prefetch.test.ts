/**
 * The indexer embeds the chunk's next segment while the current one is in the stores
 * (embedding-prefetch.ts): embed() takes what a prefetch started, the rest is embedded then; a
 * failed prefetch is asked again; a prefetch nobody took is dropped by the next one. Through the
 * Kafka stage handler on real SQLite + HNSW stores: the next segment's record texts go to the model
 * before the current segment's graph write, every text is embedded once, and the outputs and the
 * stored candidates are those of the stage without the prefetch.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type UpdateCandidatesEvent, UpdateCandidatesEventSchema } from "../../services/core/adapters/kafka/serde.ts";
import type { StageInput } from "../../services/core/adapters/kafka/stage-runtime.ts";
import type { Embedder, GraphStore } from "../../services/core/ports.ts";
import { keyOf, type RecordsEvent, RecordsEventSchema, type Segment } from "../../services/core/types.ts";
import { EmbeddingPrefetch } from "../../services/indexer/embedding-prefetch.ts";
import { indexerStage } from "../../services/indexer/kafka-handler.ts";
import { type LocalStores, withLocalStores } from "../helpers/local-stores.ts";
import { jsonCodec, recordOf, segmentOf, segmentTurnOf } from "../helpers/stage-fixtures.ts";

/** A small fake model: a text's vector is its length and first char code; every call is logged. */
class FakeModel implements Embedder {
  readonly id = "fake";
  readonly dimension = 2;
  calls: string[][] = [];
  failNext = false;
  stats() {
    return { calls: this.calls.length, texts: this.calls.flat().length, ms: 0 };
  }
  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    this.calls.push([...texts]);
    if (this.failNext) {
      this.failNext = false;
      throw new Error("model busy");
    }
    return texts.map((t) => Float32Array.from([t.length, t.charCodeAt(0)]));
  }
}

const vec = (t: string) => Float32Array.from([t.length, t.charCodeAt(0)]);

describe("EmbeddingPrefetch", () => {
  it("embed() takes the prefetched texts and embeds only the others", async () => {
    const model = new FakeModel();
    const p = new EmbeddingPrefetch(model);
    p.prefetch(["alpha", "beta"]);
    assert.deepEqual(await p.embed(["beta", "gamma", "alpha"]), [vec("beta"), vec("gamma"), vec("alpha")]);
    assert.deepEqual(model.calls, [["alpha", "beta"], ["gamma"]]);
    // Taken once: asked again, they go to the model.
    assert.deepEqual(await p.embed(["alpha"]), [vec("alpha")]);
    assert.deepEqual(model.calls.at(-1), ["alpha"]);
  });

  it("a failed prefetch is asked again; prefetches of several segments wait, the oldest past four is dropped", async () => {
    const model = new FakeModel();
    const p = new EmbeddingPrefetch(model);
    model.failNext = true;
    p.prefetch(["alpha"]);
    assert.deepEqual(await p.embed(["alpha"]), [vec("alpha")]);
    assert.deepEqual(model.calls, [["alpha"], ["alpha"]]);
    // Two partitions' next segments asked ahead: both are taken without a model call.
    p.prefetch(["beta"]);
    p.prefetch(["gamma"]);
    assert.deepEqual(await p.embed(["beta", "gamma"]), [vec("beta"), vec("gamma")]);
    assert.deepEqual(model.calls.slice(2), [["beta"], ["gamma"]]);
    for (const t of ["d1", "d2", "d3", "d4", "d5"]) p.prefetch([t]);
    assert.deepEqual(await p.embed(["d1", "d5"]), [vec("d1"), vec("d5")]);
    assert.deepEqual(model.calls.slice(4), [["d1"], ["d2"], ["d3"], ["d4"], ["d5"], ["d1"]], "d1 was dropped");
  });
});

const CAROLINE = { name: "Caroline", kind: "person" as const, aliases: [] };

const eventOf = (n: number): RecordsEvent => {
  const at = `2023-06-0${n + 1}T10:00:00.000Z`;
  const turns = [segmentTurnOf(`t${n}a`, `Paris story ${n}`, at), segmentTurnOf(`t${n}b`, `Dog story ${n}`, at)];
  const segment: Segment = segmentOf(`seg-${n}`, turns);
  const records = [
    `Caroline moved to Paris in May 2023 (${n}).`,
    `Caroline walked her dog Pepper in Paris (${n}).`,
  ].map((text, i) =>
    recordOf(segment, {
      text,
      entities: [CAROLINE],
      topics: ["moving"],
      turnIds: [(turns[i] as { turnId: string }).turnId],
      saidAt: at,
    }),
  );
  return {
    tenant: "acme",
    conversation: "c1",
    segment,
    records,
    context: { aliases: {}, referents: {}, speakers: ["Caroline"], recentRecords: [] },
  };
};

/** The stage over the stores, with its model calls and graph writes logged in one sequence. */
const loggedStage = (s: LocalStores, log: string[], prefetchNext: boolean) => {
  const embedder: Embedder = {
    id: s.embedder.id,
    dimension: s.embedder.dimension,
    stats: () => s.embedder.stats(),
    embed: (texts) => {
      log.push(`embed ${texts.join(" | ")}`);
      return s.embedder.embed(texts);
    },
  };
  const graph = new Proxy(s.graph, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (prop === "writeBatch")
        return (...args: Parameters<GraphStore["writeBatch"]>) => {
          log.push(`writeBatch ${args[0].segment.id}`);
          return target.writeBatch(...args);
        };
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return indexerStage({
    input: jsonCodec("memory.records.v1", RecordsEventSchema),
    output: jsonCodec("memory.update-queue.v1", UpdateCandidatesEventSchema),
    graph,
    vectors: s.vectors,
    embedder,
    prefetchNext,
  });
};

const runChunk = async (stage: ReturnType<typeof loggedStage>, events: readonly RecordsEvent[]) => {
  const chunk = events.map((value) => ({
    key: keyOf(value.tenant, value.conversation),
    input: { kind: "event", value } as StageInput<RecordsEvent>,
  }));
  await stage.prepare?.(chunk);
  const outs: { key: string; value: UpdateCandidatesEvent }[][] = [];
  for (const { key, input } of chunk) outs.push((await stage.handle(key, input, undefined)).outputs as never);
  return outs;
};

describe("indexer stage: next segment embedded during the current one's store steps", () => {
  it("embeds the next segment's records before the current graph write; same outputs, each text once", async () => {
    const events = [eventOf(1), eventOf(2), eventOf(3)];
    await withLocalStores("prefetch-off-", async (a) => {
      await withLocalStores("prefetch-on-", async (b) => {
        const offLog: string[] = [];
        const onLog: string[] = [];
        const reference = await runChunk(loggedStage(a, offLog, false), events);
        const outs = await runChunk(loggedStage(b, onLog, true), events);
        assert.deepEqual(outs, reference);
        assert.ok(reference.flat().length > 0, "the segments have update candidates");
        assert.deepEqual(await b.graph.listUpdateCandidates("acme"), await a.graph.listUpdateCandidates("acme"));
        // The second segment's record texts went to the model before the first segment's graph write.
        const second = events[1]?.records[0]?.text ?? "";
        const firstEmbedOf = (log: string[]) => log.findIndex((l) => l.startsWith("embed ") && l.includes(second));
        const ahead = firstEmbedOf(onLog);
        assert.ok(ahead >= 0 && ahead < onLog.indexOf("writeBatch seg-1"), onLog.join("\n"));
        assert.ok(firstEmbedOf(offLog) > offLog.indexOf("writeBatch seg-1"));
        // Nothing embedded twice: the same texts reached the model in both runs.
        assert.equal(b.embedder.stats().texts, a.embedder.stats().texts);
      });
    });
  });
});
