/**
 * The second-opinion backfill (composition/second-opinion-backfill.ts) over the embedded stores: a
 * store indexed without the second model gets, item for item, the vectors the indexer would have
 * written with it on; items without a stored text, another tenant and a second run are left alone.
 * The models are hashing embedders of two dimensions (a small fake of the Embedder port).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { backfillSecondVectors, canBackfill } from "../../services/composition/second-opinion-backfill.ts";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { turnRowId } from "../../services/core/keys.ts";
import type { Embedder, VectorStore } from "../../services/core/ports.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { batchesFor } from "../contract/graph-store.contract.ts";
import { type LocalStores, withLocalStores } from "../helpers/local-stores.ts";

const TENANT = "acme/eu";
const OTHER = "acme";

/** Counts the texts it is asked for, so a test sees what was embedded. */
const counting = (inner: Embedder): Embedder & { texts: string[] } => {
  const texts: string[] = [];
  return Object.assign(Object.create(inner) as Embedder, {
    texts,
    embed: (batch: readonly string[]) => {
      texts.push(...batch);
      return inner.embed(batch);
    },
  });
};

const index = async (s: LocalStores, tenant: string, secondEmbedder?: Embedder): Promise<void> => {
  for (const b of batchesFor(tenant))
    await indexSegment(
      { ...s, candidates: false, ...(secondEmbedder ? { secondEmbedder } : {}) },
      b.segment,
      b.records,
    );
};

describe("second-opinion backfill", () => {
  it("gives every item the vector the indexer would have written with the setting on", async () => {
    const second = new HashingEmbedder(64);
    // The reference: the same segments indexed with the second model on from the start.
    const reference = new Map<string, Float32Array>();
    await withLocalStores("memory-backfill-ref-", async (s) => {
      await index(s, TENANT, second);
      const ids = (await s.vectors.idsWithoutSecond(TENANT, undefined, 1000)).length;
      assert.equal(ids, 0, "the indexer wrote a second vector for every item");
      const every = await everyId(s.vectors, TENANT);
      for (const [id, v] of await s.vectors.getSecondVectors(TENANT, every)) reference.set(id, v);
    });
    assert.ok(reference.size > 5);

    await withLocalStores("memory-backfill-", async (s) => {
      await index(s, TENANT);
      await index(s, OTHER);
      // A raw turn's vector without its row (written just before a crash): no text to embed.
      const [orphan] = await s.embedder.embed(["Caroline: a turn whose row never came"]);
      await s.vectors.upsert(TENANT, [
        {
          id: turnRowId("c9", "t-lost"),
          vector: orphan as Float32Array,
          payload: { tenant: TENANT, conversation: "c9", kind: "turn", time: 0 },
        },
      ]);
      assert.ok(canBackfill(s.vectors));
      const model = counting(second);
      const progress: number[] = [];
      const report = await backfillSecondVectors({ graph: s.graph, vectors: s.vectors, embedder: model }, TENANT, {
        batch: 3,
        onProgress: (r) => progress.push(r.set + r.withoutText),
      });
      assert.equal(report.set, reference.size);
      assert.equal(report.withoutText, 1);
      assert.equal(report.gone, 0);
      assert.equal(model.texts.length, reference.size, "each text embedded once");
      assert.ok(progress.length >= Math.ceil((reference.size + 1) / 3), "a step per page of 3");
      // Item for item what the indexer writes.
      const got = await s.vectors.getSecondVectors(TENANT, [...reference.keys()]);
      assert.equal(got.size, reference.size);
      for (const [id, v] of reference) assert.deepEqual(got.get(id), v, id);
      // Left as they were: the orphan, and the other tenant (same segments, same ids).
      assert.deepEqual(await s.vectors.idsWithoutSecond(TENANT, undefined, 100), [turnRowId("c9", "t-lost")]);
      assert.equal((await s.vectors.idsWithoutSecond(OTHER, undefined, 1000)).length, reference.size);
      // A second run finds nothing new to embed.
      const again = await backfillSecondVectors({ graph: s.graph, vectors: s.vectors, embedder: model }, TENANT);
      assert.deepEqual({ ...again, ms: 0 }, { tenant: TENANT, set: 0, withoutText: 1, gone: 0, ms: 0 });
      assert.equal(model.texts.length, reference.size);
    });
  });

  it("an erasure while a step embeds wins: the erased items are counted as gone and not written back", async () => {
    await withLocalStores("memory-backfill-erase-", async (s) => {
      await index(s, TENANT);
      const count = await s.vectors.count(TENANT);
      const model = new HashingEmbedder(64);
      let erased: string[] = [];
      // The erasure lands between the step's read of the page and its update, as a concurrent
      // DELETE /v1/conversations would.
      const erasing: Embedder = Object.assign(Object.create(model) as Embedder, {
        embed: async (batch: readonly string[]) => {
          if (erased.length === 0) {
            erased = (await s.vectors.idsWithoutSecond(TENANT, undefined, 2)).slice(0, 2);
            await s.vectors.delete(TENANT, erased);
          }
          return model.embed(batch);
        },
      });
      const report = await backfillSecondVectors({ graph: s.graph, vectors: s.vectors, embedder: erasing }, TENANT, {
        batch: 4,
      });
      assert.equal(erased.length, 2);
      assert.equal(report.gone, 2);
      assert.equal(report.set, count - 2);
      assert.equal(await s.vectors.count(TENANT), count - 2, "nothing erased came back");
      assert.equal((await s.vectors.get(TENANT, erased)).length, 0);
    });
  });

  it("stops between steps when aborted, and refuses a store that keeps no second vectors", async () => {
    await withLocalStores("memory-backfill-abort-", async (s) => {
      await index(s, TENANT);
      const before = (await s.vectors.idsWithoutSecond(TENANT, undefined, 1000)).length;
      const controller = new AbortController();
      const report = await backfillSecondVectors(
        { graph: s.graph, vectors: s.vectors, embedder: new HashingEmbedder(64) },
        TENANT,
        { batch: 2, signal: controller.signal, onProgress: () => controller.abort() },
      );
      assert.equal(report.set, 2, "one step of two");
      assert.equal((await s.vectors.idsWithoutSecond(TENANT, undefined, 1000)).length, before - 2);
      const noSecond: Pick<VectorStore, "idsWithoutSecond" | "setSecondVectors"> = {};
      assert.equal(canBackfill(noSecond), false);
      await assert.rejects(
        backfillSecondVectors({ graph: s.graph, vectors: noSecond, embedder: new HashingEmbedder(64) }, TENANT),
        /keeps no second-opinion vectors/,
      );
    });
  });
});

/** Every id of the tenant's vectors: the items without a second vector plus those with one. */
const everyId = async (vectors: LocalStores["vectors"], tenant: string): Promise<string[]> => {
  const ids: string[] = [];
  for (const b of batchesFor(tenant)) {
    ids.push(...b.records.map((r) => r.id));
    ids.push(...b.segment.turns.map((t) => turnRowId(b.segment.conversation, t.turnId)));
  }
  return (await vectors.get(tenant, ids)).map((i) => i.id);
};
