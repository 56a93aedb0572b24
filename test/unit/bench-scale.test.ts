import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, describe, it } from "node:test";
import { runScaleBench, type ScaleBenchReport } from "../../services/bench/scale.ts";
import { disguiseOf, disguiseTurns, fixedSegments, perturb, seededRandom } from "../../services/bench/scale-data.ts";
import { openSqliteStores, openStores } from "../../services/composition/stores.ts";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { openSqlite } from "../../services/core/adapters/sqlite-db.ts";
import { loadConfig } from "../../services/core/config.ts";
import { loadLocomo } from "../../services/core/datasets/locomo.ts";
import { neo4jSkip } from "../helpers/neo4j-env.ts";

const dir = mkdtempSync(join(tmpdir(), "bench-scale-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const PETS = ["a golden retriever", "two cats", "a parrot", "a rabbit", "a tortoise"];
const CITIES = ["Boston", "Paris", "Sweden", "Lisbon", "Berlin"];

/** A LoCoMo-format file: two conversations of three sessions, facts, events and plans that the extractor keeps. */
const locomoFile = (): string => {
  const session = (n: number, a: string, b: string) =>
    Array.from({ length: 12 }, (_, i) => ({
      speaker: i % 2 === 0 ? a : b,
      dia_id: `D${n}:${i + 1}`,
      text:
        i % 3 === 0
          ? `I adopted ${PETS[(i + n) % PETS.length]} last week and we moved to ${CITIES[(i + n) % CITIES.length]}.`
          : i % 3 === 1
            ? `My sister Clara is visiting me from ${CITIES[(i * n) % CITIES.length]} next month, she loves painting.`
            : `Yesterday I ran ${5 + i + n} kilometres before work and then baked bread for ${a}.`,
    }));
  const sample = (id: string, a: string, b: string) => ({
    sample_id: id,
    conversation: {
      speaker_a: a,
      speaker_b: b,
      session_1_date_time: "1:56 pm on 8 May, 2023",
      session_1: session(1, a, b),
      session_2_date_time: "10:00 am on 25 September, 2023",
      session_2: session(2, a, b),
      session_3_date_time: "7:30 pm on 2 January, 2024",
      session_3: session(3, a, b),
    },
    qa: [
      { question: `What pet did ${a} adopt?`, answer: "a dog", evidence: ["D1:1"], category: 4 },
      { question: `Who is visiting ${b} from Paris?`, answer: "Clara", evidence: ["D1:2"], category: 1 },
    ],
  });
  const p = join(dir, "tiny-locomo.json");
  writeFileSync(p, JSON.stringify([sample("tiny-1", "Alice", "Bob"), sample("tiny-2", "Carol", "Dan")]));
  return p;
};

/** The options the grow tests share: a hashing embedder, 3 tenants, no model, no report files. */
const growOptions = (data: string) => ({
  config: { ...loadConfig({}), modelDir: join(dir, "no-models") },
  data,
  queries: 2,
  tenants: 3,
  embedder: new HashingEmbedder(64),
  out: null,
  progress: false,
});

/** Everything a build wrote, in a stable order: records, turns and vectors (bytes included). */
const contents = (folder: string): string => {
  const db = openSqlite(folder);
  try {
    return JSON.stringify([
      db.prepare("SELECT tenant, id, conversation, text FROM records ORDER BY tenant, id").all(),
      db.prepare("SELECT tenant, conversation, turn_id, text FROM turns ORDER BY tenant, conversation, turn_id").all(),
      db.prepare("SELECT tenant, id, kind, hex(vector) AS v FROM vectors ORDER BY tenant, id").all(),
    ]);
  } finally {
    db.close();
  }
};

/**
 * Runs test/helpers/grow-child.ts on the store folder and SIGKILLs it at the first line that
 * `killAt` matches; resolves with that line (or the last one, had the child ended by itself).
 */
const growInChild = async (data: string, store: string, sizes: string, killAt: RegExp): Promise<string> => {
  const child = spawn(process.execPath, ["--import", "tsx", "test/helpers/grow-child.ts", data, store, sizes], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  let last = "";
  for await (const line of createInterface({ input: child.stdout })) {
    last = line;
    if (killAt.test(line)) {
      child.kill("SIGKILL");
      break;
    }
  }
  await exited;
  return last;
};

describe("bench scale", () => {
  it("no two copies of a conversation are disguised alike (else their records are the same records)", () => {
    const [conv] = loadLocomo(locomoFile());
    assert.ok(conv);
    // Copies 1,100 apart had the same date shift and names: the same texts, the same ids.
    const seen = new Map<string, number>();
    for (let copy = 1; copy <= 12_000; copy++) {
      const d = disguiseOf(conv, copy);
      const key = JSON.stringify([[...d.names], [...d.places], d.shiftDays]);
      assert.equal(seen.get(key), undefined, `copy ${copy} disguised like copy ${seen.get(key)}`);
      seen.set(key, copy);
    }
  });

  it("disguises copies (names, places, dates), keeps the original as copy 0, and perturbs near the base", () => {
    const [conv] = loadLocomo(locomoFile());
    assert.ok(conv);
    assert.deepEqual(disguiseTurns(conv, disguiseOf(conv, 0)), conv.turns);
    const d = disguiseOf(conv, 3);
    const turns = disguiseTurns(conv, d);
    assert.ok(turns.every((t) => t.speaker !== "Alice" && t.speaker !== "Bob"));
    assert.ok(turns.every((t) => !/\b(Alice|Boston|Paris|Sweden)\b/.test(t.text)));
    assert.notEqual(turns[0]?.timestamp, conv.turns[0]?.timestamp);
    const segments = fixedSegments("t", "c", turns, 5);
    assert.equal(
      segments.reduce((n, s) => n + s.turns.length, 0),
      turns.length,
    );
    assert.ok(segments.every((s) => s.turns.length <= 5 && s.turns.every((t) => t.sessionId === s.sessionId)));
    const base = new Float32Array(384).fill(1 / Math.sqrt(384));
    const v = perturb(base, 0.5, seededRandom(1));
    const cos = v.reduce((s, x, i) => s + x * (base[i] as number), 0);
    assert.ok(Math.abs(cos - 1 / Math.sqrt(1.25)) < 0.05, `cosine ${cos}`);
  });

  it("grows a store to each size and reports latency, throughput, memory, disk and cold start", async () => {
    const out = join(dir, "out");
    const { report, markdown, files } = await runScaleBench({
      config: { ...loadConfig({}), modelDir: join(dir, "no-models") },
      data: locomoFile(),
      sizes: [500, 150],
      queries: 6,
      tenants: 3,
      embedder: new HashingEmbedder(64),
      out,
      progress: false,
    });
    assert.deepEqual(report.config.sizes, [150, 500]);
    assert.equal(report.sizes.length, 2);
    const [small, big] = report.sizes as [ScaleBenchReport["sizes"][0], ScaleBenchReport["sizes"][0]];
    assert.ok(small.records >= 150 && big.records >= 500 && big.records > small.records);
    assert.ok(big.tenants === 3 && big.conversations > small.conversations);
    assert.ok(report.config.realEmbedded.records > 0 && report.config.realEmbedded.records < big.records);
    for (const s of report.sizes) {
      for (const scope of ["conversation", "tenant"] as const) {
        const q = s.query[scope];
        assert.equal(q.n, 6);
        assert.ok(
          (q.p50 as number) > 0 && (q.p50 as number) <= (q.p95 as number) && (q.p95 as number) <= (q.p99 as number),
        );
        assert.ok(q.routes.dense && q.routes.dense.n === 6, "per-route timings");
      }
      assert.equal(s.questionEmbedding.n, 12);
      assert.ok((s.p95OverEmbedding.conversation as number) > 0);
      assert.ok(s.write.recordsPerSecond > 0 && s.write.vectorsPerSecond > 0);
      assert.ok(s.memory.rssBytes > 0 && (s.disk?.bytesPerRecord ?? 0) > 0 && s.coldStartMs > 0);
      // The split is read where /proc says it (Linux: every machine this runs on).
      if (process.platform === "linux") {
        const { anonBytes, fileBytes } = s.memory as { anonBytes: number; fileBytes: number };
        assert.ok(anonBytes > 0 && fileBytes > 0 && anonBytes + fileBytes <= s.memory.rssBytes * 1.5);
      }
    }
    assert.match(markdown, /RSS MiB \(anon \+ file\)/);
    assert.match(markdown, /# bench scale \(embedded\)/);
    assert.match(markdown, /## Per route/);
    assert.equal(files.length, 2);
    const json = JSON.parse(readFileSync(files.find((f) => f.endsWith(".json")) as string, "utf8")) as ScaleBenchReport;
    assert.equal(json.sizes.length, 2);
  });

  it("--store neo4j: grows the Neo4j runtime's stores under a run prefix and erases them at the end", {
    skip: neo4jSkip,
  }, async () => {
    const config = loadConfig({}, process.env);
    const { report, markdown } = await runScaleBench({
      config: { ...config, modelDir: join(dir, "no-models") },
      data: locomoFile(),
      sizes: [120],
      store: "neo4j",
      queries: 4,
      tenants: 2,
      // The shared server's vector index has the real embedder's dimension.
      embedder: new HashingEmbedder(384),
      out: null,
      progress: false,
    });
    const [s] = report.sizes;
    assert.ok(s && s.records >= 120 && s.tenants === 2);
    assert.equal(report.config.store, "neo4j");
    assert.match(report.config.tenantPrefix, /^scale-[0-9a-f]{8}-$/);
    assert.equal(s.disk, null);
    assert.equal(s.query.conversation.n, 4);
    assert.ok(s.write.recordsPerSecond > 0 && s.coldStartMs > 0);
    assert.match(markdown, /# bench scale \(neo4j\)/);
    // The run's tenants are gone from the graph and the vectors.
    const stores = await openStores(config, "neo4j");
    try {
      for (const t of ["t0", "t1"]) {
        const tenant = `${report.config.tenantPrefix}${t}`;
        assert.equal(await stores.graph.countRecords(tenant), 0, tenant);
        assert.equal(await stores.vectors.count(tenant), 0, tenant);
      }
    } finally {
      await stores.close();
    }
  });

  it("measures a kept store again without building (--reuse-store): its stored records, same turns, tenants and conversations", async () => {
    const data = locomoFile();
    const common = {
      config: { ...loadConfig({}), modelDir: join(dir, "no-models") },
      data,
      queries: 4,
      tenants: 2,
      embedder: new HashingEmbedder(64),
      out: null,
      progress: false,
    };
    const kept = join(dir, "kept");
    const built = (await runScaleBench({ ...common, sizes: [200], keepStore: kept })).report.sizes[0];
    const { report: reused, markdown: reusedMarkdown } = await runScaleBench({
      ...common,
      sizes: [999_999],
      // The option is ignored: the store's own tenants are reported.
      tenants: 7,
      reuseStore: kept,
    });
    assert.ok(built);
    const [again] = reused.sizes;
    assert.ok(again);
    // Both count the records the store holds (a record id written twice is one record).
    assert.equal(again.records, built.records);
    assert.deepEqual(reused.config.sizes, [again.records]);
    assert.deepEqual(
      [again.turns, again.tenants, again.conversations],
      [built.turns, built.tenants, built.conversations],
    );
    assert.equal(again.query.tenant.n, 4);
    assert.equal(again.write.recordsPerSecond, 0);
    // Nothing was written, so the table gives no write rate rather than 0.
    const row = reusedMarkdown.split("\n").find((l) => l.startsWith(`| ${again.records.toLocaleString("en-US")} |`));
    assert.ok(row, reusedMarkdown);
    assert.equal(row.split("|")[8]?.trim(), "–");
    // The data line says the store is a kept one, with its own tenants, and claims no embeddings.
    assert.equal(reused.config.reused, true);
    assert.equal(reused.config.tenants, 2);
    assert.match(reusedMarkdown, /Data: a store an earlier run built and kept .* over 2 tenants/);
    assert.doesNotMatch(reusedMarkdown, /first copy \(0 records/);
    await assert.rejects(runScaleBench({ ...common, sizes: [10], keepStore: kept, reuseStore: kept }), /not both/);
  });

  it("grows a store over several runs (--grow-store) to what one run builds: stopped between sizes, or in a conversation", async () => {
    const data = locomoFile();
    const common = growOptions(data);
    const once = join(dir, "grown-once");
    const whole = (await runScaleBench({ ...common, sizes: [300], keepStore: once })).report.sizes[0];
    assert.ok(whole);

    // Run 1 is stopped by its signal after its first size; run 2 carries on to the end.
    const grown = join(dir, "grown");
    const stop = new AbortController();
    const first = await runScaleBench({
      ...common,
      sizes: [100, 300],
      growStore: grown,
      signal: stop.signal,
      log: (line) => {
        if (/querying/.test(line)) stop.abort();
      },
    });
    assert.equal(first.report.sizes.length, 1);
    const second = await runScaleBench({ ...common, sizes: [100, 300], growStore: grown });
    // The size already measured is not measured again. (A run counts the records it wrote, the
    // store one row per id, a repeated id once: the resumed run's count starts from the store's.)
    assert.equal(second.report.sizes.length, 1);
    assert.equal(second.report.sizes[0]?.turns, whole.turns);
    assert.ok(Math.abs((second.report.sizes[0]?.records ?? 0) - whole.records) <= whole.records * 0.05);
    assert.equal(contents(grown), contents(once));

    // A stop in the middle of a conversation (as a kill between two of its segments leaves it):
    // the signal comes while the second conversation's real vectors are embedded, after the first's.
    const cut = join(dir, "cut");
    const cutStop = new AbortController();
    const embedder = new HashingEmbedder(64);
    let calls = 0;
    const counting = {
      id: embedder.id,
      dimension: embedder.dimension,
      stats: () => embedder.stats(),
      embed: async (texts: readonly string[]) => {
        if (++calls === 8) cutStop.abort();
        return embedder.embed(texts);
      },
    };
    const stoppedRun = await runScaleBench({
      ...common,
      sizes: [300],
      growStore: cut,
      embedder: counting,
      signal: cutStop.signal,
    });
    assert.equal(stoppedRun.report.sizes.length, 0);
    const partial = openSqlite(cut);
    const turnsByConversation = partial
      .prepare("SELECT conversation, COUNT(*) AS n FROM turns GROUP BY conversation ORDER BY conversation")
      .all() as { conversation: string; n: number }[];
    partial.close();
    assert.deepEqual(
      turnsByConversation.map((r) => r.conversation),
      ["tiny-1-c0", "tiny-2-c0"],
    );
    assert.ok((turnsByConversation[1]?.n ?? 0) < (turnsByConversation[0]?.n ?? 0), "the second is cut short");
    const resumed = await runScaleBench({ ...common, sizes: [300], growStore: cut });
    assert.equal(resumed.report.sizes[0]?.turns, whole.turns);
    assert.equal(contents(cut), contents(once));
    await assert.rejects(runScaleBench({ ...common, sizes: [100], growStore: cut }), /already holds/);
    await assert.rejects(runScaleBench({ ...common, sizes: [10], keepStore: once, growStore: cut }), /not both/);
  });
  it("turns the event loop between segments: a stop set by a callback of the loop (a signal's handler) ends a grow", async () => {
    // The writes are synchronous and the hashing embedder resolves at once: without a turn of the
    // event loop between segments the callback below ran only after the whole size was built
    // (a SIGINT was not honoured, and native finalizers of evicted indexes never ran).
    const common = growOptions(locomoFile());
    const stop = new AbortController();
    setImmediate(() => stop.abort());
    const run = await runScaleBench({ ...common, sizes: [300], growStore: join(dir, "looped"), signal: stop.signal });
    assert.equal(run.report.sizes.length, 0, "stopped before the first size was built");
  });

  it("grows a store killed with SIGKILL (in the first copies' writes, then while it measures) to what one run builds", {
    timeout: 120_000,
  }, async () => {
    const data = locomoFile();
    const common = growOptions(data);
    const once = join(dir, "killed-once");
    const whole = (await runScaleBench({ ...common, sizes: [300], keepStore: once })).report.sizes[0];
    assert.ok(whole);
    const killed = join(dir, "killed");
    // Killed as soon as the 10th embedding call's line is read: the first conversation's first copy
    // is written by then (its writes precede the second's embedding), and the kill lands in the
    // second's embedding or writes, before or after the first size's index files (timing decides;
    // what must hold holds wherever it lands).
    assert.equal(await growInChild(data, killed, "100,300", /^embedded 10$/), "embedded 10");
    const partial = openSqlite(killed);
    const firstTurns = partial.prepare("SELECT COUNT(*) AS n FROM turns WHERE conversation = 'tiny-1-c0'").get();
    partial.close();
    assert.deepEqual(firstTurns, { n: 36 });
    // Killed once the first size is built and being measured (index files written just before).
    assert.match(await growInChild(data, killed, "100,300", /querying/), /querying/);
    const resumed = await runScaleBench({ ...common, sizes: [100, 300], growStore: killed });
    assert.equal(resumed.report.sizes.at(-1)?.turns, whole.turns);
    assert.equal(contents(killed), contents(once));
    // The vector indexes answer as the one-run store's do: the killed store's were rebuilt from
    // SQLite or read from a file written before the kill.
    const config = loadConfig({});
    const [a, b] = [openSqliteStores({ ...config, dataDir: once }), openSqliteStores({ ...config, dataDir: killed })];
    try {
      const probes = a.db.prepare("SELECT tenant, id FROM vectors WHERE kind = 'record' ORDER BY tenant, id").all() as {
        tenant: string;
        id: string;
      }[];
      assert.ok(probes.length > 50);
      for (const p of probes.filter((_, i) => i % 10 === 0)) {
        const [probe] = await a.vectors.get(p.tenant, [p.id]);
        assert.ok(probe);
        const ids = async (s: typeof a) =>
          (await s.vectors.search(p.tenant, probe.vector, 10, { kind: "record" })).map((h) => h.id);
        assert.deepEqual(await ids(b), await ids(a), p.id);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });
});
