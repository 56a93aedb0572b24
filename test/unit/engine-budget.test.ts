import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { CompressionResult, Compressor, Embedder } from "../../services/core/ports.ts";
import type { TurnInput } from "../../services/core/requests.ts";
import { BudgetExceededError, withinBudget } from "../../services/embedded/budget.ts";
import { openEmbeddedEngine } from "../../services/embedded/open.ts";
import { StatisticalCompressor } from "../../services/sensory/statistical-compressor.ts";

/** Never returns on a turn marked SLOW, like a model stuck on an input. */
class StuckCompressor implements Compressor {
  readonly id = "stuck";
  private readonly inner = new StatisticalCompressor();
  compress(text: string, keepRate: number): Promise<CompressionResult> {
    if (text.includes("SLOW")) return new Promise(() => undefined);
    return this.inner.compress(text, keepRate);
  }
}

/** Throws on any batch holding a text marked BADVEC, like an embedder that chokes on one input. */
const chokingEmbedder = (): Embedder => {
  const inner = new HashingEmbedder();
  return {
    id: inner.id,
    get dimension() {
      return inner.dimension;
    },
    stats: () => inner.stats(),
    embed: async (texts) => {
      if (texts.some((t) => t.includes("BADVEC"))) throw new Error("embedder cannot handle this input");
      return inner.embed(texts);
    },
  };
};

/**
 * A model that dies on the first batch holding a text `fatal` matches, like ThreadedOnnxEmbedder
 * when its worker thread exits: its owner hears of it first (`onDeath`, set once the engine exists,
 * as openEmbeddedEngine wires it), then that call and every later one fail.
 */
const dyingModel = (fatal: (text: string) => boolean) => {
  const inner = new HashingEmbedder();
  let dead = false;
  const model: { embedder: Embedder; onDeath?: (err: Error) => void } = {
    embedder: {
      id: inner.id,
      get dimension() {
        return inner.dimension;
      },
      stats: () => inner.stats(),
      embed: async (texts) => {
        if (!dead && !texts.some(fatal)) return inner.embed(texts);
        if (!dead) {
          dead = true;
          model.onDeath?.(new Error("the embedding model's worker thread failed: exited (code 1)"));
        }
        throw new Error("embedder worker thread exited (code 1)");
      },
    },
  };
  return model;
};

const turns = (texts: readonly string[]): TurnInput[] =>
  texts.map((text, i) => ({
    turnId: `t${i}`,
    speaker: i % 2 ? "Ana" : "Ben",
    role: "user" as const,
    text,
    timestamp: new Date(Date.UTC(2024, 4, 6, 10, i)).toISOString(),
    sessionId: "s1",
  }));

const normal = (i: number): string => `Ben planted ${i} tomatoes in the Riverside garden on Monday.`;

describe("per-turn processing budget and poison isolation in the embedded runtime", () => {
  const dirs: string[] = [];
  const dataDir = () => {
    const d = mkdtempSync(join(tmpdir(), "memory-budget-"));
    dirs.push(d);
    return d;
  };
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("withinBudget passes results and errors through, and rejects with the budget after the limit", async () => {
    assert.equal(await withinBudget(Promise.resolve(7), 1000, "x"), 7);
    await assert.rejects(withinBudget(Promise.reject(new Error("boom")), 1000, "x"), /boom/);
    await assert.rejects(withinBudget(new Promise(() => undefined), 20, "sensory compression"), (err: Error) => {
      assert.ok(err instanceof BudgetExceededError);
      assert.match(err.message, /sensory compression exceeded its processing budget of 20 ms/);
      return true;
    });
  });

  it("a turn whose compression never returns is dead-lettered after the budget; the later turns flow", async () => {
    const o = await openEmbeddedEngine(loadConfig({ dataDir: dataDir() }), {
      embedder: new HashingEmbedder(),
      compressor: new StuckCompressor(),
      settings: { turnBudgetMs: 100 },
    });
    try {
      const texts = [normal(0), normal(1), "SLOW turn", normal(3), normal(4)];
      await o.engine.ingest("t", "c", turns(texts));
      await o.engine.flush("t", "c");
      await o.engine.drain();
      assert.equal(o.engine.progress.turns, 4);
      const letters = await o.engine.deadLetters(10);
      assert.equal(letters.length, 1);
      assert.match(letters[0]?.error ?? "", /exceeded its processing budget of 100 ms/);
      assert.match(letters[0]?.payload ?? "", /SLOW turn/);
      assert.equal((await o.engine.health()).ok, true);
    } finally {
      await o.close();
    }
  });

  it("a turn the embedder fails on is dead-lettered alone; its batch-mates are embedded one by one", async () => {
    const o = await openEmbeddedEngine(loadConfig({ dataDir: dataDir() }), {
      embedder: chokingEmbedder(),
      compressor: new StatisticalCompressor(),
      settings: { batchSize: 8 },
    });
    try {
      await o.engine.ingest("t", "c", turns([normal(0), normal(1), "BADVEC turn", normal(3)]));
      await o.engine.flush("t", "c");
      await o.engine.drain();
      assert.equal(o.engine.progress.turns, 3);
      const letters = await o.engine.deadLetters(10);
      assert.equal(letters.length, 1);
      assert.match(letters[0]?.error ?? "", /embedder cannot handle/);
      assert.equal((await o.engine.health()).ok, true, "the engine keeps running");
    } finally {
      await o.close();
    }
  });
});

describe("a model that dies halts the embedded engine instead of dead-lettering its input", () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("sets nothing aside, says why, and a restart processes every turn", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memory-halt-"));
    dirs.push(dir);
    const model = dyingModel((t) => t.includes("DIES"));
    const texts = [normal(0), normal(1), "The model DIES on this batch", normal(3), normal(4), normal(5)];
    const first = await openEmbeddedEngine(loadConfig({ dataDir: dir }), {
      embedder: model.embedder,
      compressor: new StatisticalCompressor(),
      settings: { batchSize: 2 },
    });
    model.onDeath = (err) => first.engine.halt(err);
    try {
      await first.engine.ingest("t", "c", turns(texts));
      await first.engine.flush("t", "c");
      await assert.rejects(first.engine.drain(), /worker thread failed/);
      assert.deepEqual(await first.engine.deadLetters(10), [], "no turn is at fault");
      const health = await first.engine.health();
      assert.equal(health.ok, false);
      assert.match(health.details.error ?? "", /worker thread failed/);
      assert.equal(first.engine.progress.turns, 2, "the batches before the failure only");
      await assert.rejects(first.engine.ingest("t", "c", turns(["later"])), /worker thread failed/);
    } finally {
      await first.close();
    }
    // The restart: a healthy model; the batch in flight is replayed, and the turns after it follow.
    const second = await openEmbeddedEngine(loadConfig({ dataDir: dir }), {
      embedder: new HashingEmbedder(),
      compressor: new StatisticalCompressor(),
      settings: { batchSize: 2 },
    });
    try {
      await second.engine.drain();
      assert.equal(second.engine.progress.turns, texts.length - 2);
      assert.deepEqual(await second.engine.deadLetters(10), []);
      assert.equal((await second.engine.health()).ok, true);
      const found = await second.engine.query("t", { question: "Who DIES?", conversation: "c" });
      assert.ok(found.items.length > 0);
    } finally {
      await second.close();
    }
  });

  it("closes when the model dies while segments wait in a full queue", { timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "memory-halt-queue-"));
    dirs.push(dir);
    // The model dies on the first record texts ("Ben (2024-05-06): …"), after every turn was
    // embedded: the encode loop halts while the ingest loop waits to push the next segments.
    const model = dyingModel((t) => /\(\d{4}-\d\d-\d\d\)/.test(t));
    const o = await openEmbeddedEngine(loadConfig({ dataDir: dir }), {
      embedder: model.embedder,
      compressor: new StatisticalCompressor(),
      settings: { batchSize: 32, queueCapacity: 1 },
    });
    model.onDeath = (err) => o.engine.halt(err);
    for (const c of ["c1", "c2", "c3", "c4"]) await o.engine.ingest("t", c, turns([normal(1), normal(2)]));
    for (const c of ["c1", "c2", "c3", "c4"]) await o.engine.flush("t", c);
    await assert.rejects(o.engine.drain(), /worker thread failed/);
    assert.deepEqual(await o.engine.deadLetters(10), []);
    await o.close();
    // Nothing was lost: the segments the stopped loops left are indexed after a restart.
    const again = await openEmbeddedEngine(loadConfig({ dataDir: dir }), {
      embedder: new HashingEmbedder(),
      compressor: new StatisticalCompressor(),
      settings: { batchSize: 32, queueCapacity: 1 },
    });
    try {
      await again.engine.drain();
      assert.equal(again.engine.progress.segments, 4);
      assert.deepEqual(await again.engine.deadLetters(10), []);
    } finally {
      await again.close();
    }
  });
});
