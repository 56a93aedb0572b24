/**
 * `memory bench scale`: does the embedded store stay fast as it grows? One store is grown, copy by
 * copy of the dev conversations (other names, places, dates: scale-data.ts), through the indexer's
 * own write path (indexSegment: vectors, graph batch, update candidates) over many tenants, and
 * measured at each requested size: query latency (conversation-scoped and tenant-wide, total and
 * per route) next to the question embedding's own time in the same run, write throughput, resident
 * memory, bytes on disk per record and cold start (open + every tenant's index loaded, within the
 * store's residency caps: config cache.hnswResidentVectors / hnswResidentTenants). `--store neo4j`
 * grows the Neo4j runtime's stores the same way (tenants of a run prefix, erased at the end).
 *
 * Vectors: the first copy of each dev conversation gets real embeddings (the sample); every later
 * copy gets, per text, the real vector of the same position in the first copy perturbed
 * (scale-data.ts perturb), so the neighbourhood structure is that of real data. Each copy draws its
 * noise from a source seeded by (seed, copy, conversation), so a store grown in several runs
 * (`growStore`) holds the same data as one grown in one.
 */
import { createHash, randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { SingleBar } from "cli-progress";
import { openEmbedderThread, querySettingsFrom } from "../composition/parts.ts";
import { type OpenedSqliteStores, type OpenedStores, openSqliteStores, openStores } from "../composition/stores.ts";
import { HnswVectorStore } from "../core/adapters/hnsw/vector-store.ts";
import type { Config } from "../core/config.ts";
import { type LocomoConversation, loadLocomo } from "../core/datasets/locomo.ts";
import type { Embedder, EmbedderStats } from "../core/ports.ts";
import type { RouteName } from "../core/query-types.ts";
import { type EncoderState, encodeSegment } from "../encoder/encode-segment.ts";
import { deriveIndexBatch, vectorTexts } from "../indexer/derive.ts";
import { indexSegment } from "../indexer/indexer.ts";
import { runQuery } from "../query/query.ts";
import { warmUpQueries } from "../query/warm-up.ts";
import { residentSplit } from "./process-memory.ts";
import { runEnvironment, writeReportFiles } from "./run.ts";
import { disguiseOf, disguiseQuestion, disguiseTurns, fixedSegments, perturb, seededRandom } from "./scale-data.ts";
import { percentile } from "./scoring.ts";
import { fmt, fmtInt, markdownTable } from "./table.ts";

export const DEFAULT_SCALE_SIZES = [10_000, 50_000];

/** Where the bench grows its store: the embedded stores (SQLite + HNSW) or the Neo4j runtime's. */
export const SCALE_STORES = ["embedded", "neo4j"] as const;
export type ScaleStore = (typeof SCALE_STORES)[number];

/** Queries of each kind before the measured ones (JIT, statement caches, page cache). */
const WARM_UP_QUERIES = 5;

/** A long build writes its vector indexes to their files this often (records), for a kill's sake. */
const FLUSH_EVERY_RECORDS = 50_000;

export interface ScaleBenchOptions {
  /** The configuration (model folder, query settings); the store lives in a fresh temporary folder. */
  config: Config;
  /** LoCoMo-format file (the dev conversations). */
  data: string;
  /** Sizes in memory records (raw turns are stored besides), ascending. */
  sizes: readonly number[];
  /**
   * embedded (default): SQLite graph + HNSW vectors in a fresh folder. neo4j: the stores of the
   * Neo4j runtime composition (Neo4j graph, and the vectors the configuration puts with it: Neo4j's
   * vector index, or Qdrant), on the configured server, under tenants of a prefix unique to the
   * run, erased at the end.
   */
  store?: ScaleStore;
  /** Questions of each kind (conversation-scoped, tenant-wide) at each size (default 100). */
  queries?: number;
  /** Tenants the conversation copies are spread over, round-robin (default 10). */
  tenants?: number;
  /** Turns per segment (default 8). */
  segmentTurns?: number;
  /** Noise of the perturbed vectors (default 0.5: cosine to the real vector about 0.89). */
  noise?: number;
  seed?: number;
  /** The embedder (default: the ONNX one from the model folder; closed at the end then). */
  embedder?: Embedder;
  /**
   * Build the store in this folder (created; it must hold no store yet) and keep it afterwards, to
   * profile or inspect it (default: a temporary folder, removed at the end).
   */
  keepStore?: string;
  /**
   * Measure a store this bench built and kept earlier (`keepStore`) without building anything:
   * it is opened (migrating it if this code's schema is newer), its conversations are read back,
   * and one size (the store's own) is measured; `sizes` is ignored.
   */
  reuseStore?: string;
  /**
   * Grow the store in this folder (created when missing; empty or a store this bench kept) to the
   * sizes asked, carrying on where an earlier run stopped: a store of 1,000,000 records takes hours
   * on a small machine, so it can be built over several runs. Conversations the store holds in
   * full are kept; one cut short by a kill is written again (the indexer's writes are idempotent).
   * Sizes the store already holds are not measured again. `signal` stops a run between two
   * segments, with the vector indexes written to their files.
   */
  growStore?: string;
  /** Stops the build between two segments (the sizes measured so far are reported). */
  signal?: AbortSignal;
  /** Output folder; null writes nothing. */
  out: string | null;
  progress?: boolean;
  log?: (line: string) => void;
}

export interface Latency {
  n: number;
  p50: number | undefined;
  p95: number | undefined;
  p99: number | undefined;
}

export interface QueryLatency extends Latency {
  routes: Partial<Record<RouteName, Latency>>;
}

export interface ScaleSizeResult {
  /** Memory records in the store (at least the size asked, rounded up to whole conversation copies). */
  records: number;
  turns: number;
  conversations: number;
  tenants: number;
  largestTenantRecords: number;
  write: { seconds: number; recordsPerSecond: number; vectorsPerSecond: number };
  query: { conversation: QueryLatency; tenant: QueryLatency };
  questionEmbedding: Latency;
  /** Query p95 over question-embedding p95 (same run). */
  p95OverEmbedding: { conversation: number | undefined; tenant: number | undefined };
  /**
   * After the measured queries. anonBytes / fileBytes: the RSS split by what backs it
   * (process-memory.ts; null where /proc does not say): file-backed is mostly SQLite's mmap window.
   */
  memory: {
    rssBytes: number;
    heapUsedBytes: number;
    externalBytes: number;
    anonBytes: number | null;
    fileBytes: number | null;
  };
  /** The store folder's size (embedded); null for a server store (its files are the server's). */
  disk: { bytes: number; bytesPerRecord: number } | null;
  /**
   * Opening the stores and one vector search per tenant: embedded, every tenant's index loaded from
   * its file; neo4j, a new driver, the schema check and a first query per tenant.
   */
  coldStartMs: number;
  /**
   * Embedded HNSW store: its residency caps, what was in memory after the measured queries and
   * after the cold start, tenant index loads and evictions during the measured queries, and the
   * cost of a load (ms per 1,000 points, over every load of the run's cold start).
   */
  residency?: {
    caps: { vectors: number; tenants: number };
    afterQueries: { tenants: number; vectors: number };
    afterColdStart: { tenants: number; vectors: number; rssBytes: number };
    queryLoads: number;
    queryEvictions: number;
    coldStartLoads: number;
    coldStartEvictions: number;
    loadMsPer1000Vectors: number | undefined;
  };
}

export interface ScaleBenchReport {
  config: {
    bench: "scale";
    store: ScaleStore;
    /** The tenants' names are this prefix + t<i> (neo4j: unique to the run, erased at the end). */
    tenantPrefix: string;
    dataFile: string;
    dataSha256: string;
    sizes: number[];
    queries: number;
    tenants: number;
    segmentTurns: number;
    noise: number;
    seed: number;
    embedder: string;
    /** Records and turns whose vectors are real embeddings (the rest are perturbations of them). */
    realEmbedded: { records: number; turns: number };
    /**
     * Measured on a store an earlier run built (--reuse-store): nothing was embedded or written in
     * this run, and `tenants` is the store's, not the option's.
     */
    reused?: boolean;
    gitCommit: string | null;
    gitDirty: boolean | null;
    date: string;
    node: string;
    cpus: number;
    loadAverage: { before: number[]; after: number[] };
    wallSeconds: number;
  };
  sizes: ScaleSizeResult[];
}

/**
 * Returns the vectors prepared for the texts of the segment being written: indexSegment's own write
 * path without re-embedding. By text, since a segment written again (a resumed build) asks only
 * for the vectors the store does not hold yet.
 */
class PreparedEmbedder implements Embedder {
  readonly id = "prepared";
  private byText = new Map<string, Float32Array[]>();
  constructor(readonly dimension: number) {}
  prepare(texts: readonly string[], vectors: readonly Float32Array[]): void {
    this.byText.clear();
    texts.forEach((text, i) => {
      const list = this.byText.get(text) ?? [];
      list.push(vectors[i] as Float32Array);
      this.byText.set(text, list);
    });
  }
  stats(): EmbedderStats {
    return { calls: 0, texts: 0, ms: 0 };
  }
  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    return texts.map((text) => {
      const v = this.byText.get(text)?.shift();
      if (!v) throw new Error(`PreparedEmbedder: no vector prepared for ${JSON.stringify(text.slice(0, 60))}`);
      return v;
    });
  }
}

const latency = (values: readonly number[]): Latency => ({
  n: values.length,
  p50: percentile(values, 50),
  p95: percentile(values, 95),
  p99: percentile(values, 99),
});

const diskBytes = (dir: string): number => {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    n += e.isDirectory() ? diskBytes(p) : statSync(p).size;
  }
  return n;
};

interface BuiltConversation {
  tenant: string;
  conversation: string;
  source: LocomoConversation;
  copy: number;
}

/** Turns a copy of a dev conversation stores (one row per turn id). */
const turnCountOf = (source: LocomoConversation): number => new Set(source.turns.map((t) => t.turnId)).size;

interface StoredConversation extends BuiltConversation {
  records: number;
  turns: number;
}

/** A kept store's conversations with their record and turn counts, in the order the build made them (copy, then dev order). */
const readStoredConversations = (
  db: NonNullable<OpenedSqliteStores["db"]>,
  dev: readonly LocomoConversation[],
  dataFile: string,
): StoredConversation[] => {
  const order = new Map(dev.map((d, i) => [d.id, i]));
  const recordCounts = new Map(
    db
      .prepare<[], { tenant: string; conversation: string; n: number }>(
        "SELECT tenant, conversation, COUNT(*) AS n FROM records GROUP BY tenant, conversation",
      )
      .all()
      .map((r) => [`${r.tenant}\u0000${r.conversation}`, r.n]),
  );
  return db
    .prepare<[], { tenant: string; conversation: string; n: number }>(
      "SELECT tenant, conversation, COUNT(*) AS n FROM turns GROUP BY tenant, conversation",
    )
    .all()
    .map((r) => {
      const at = r.conversation.lastIndexOf("-c");
      const source = dev.find((d) => d.id === r.conversation.slice(0, at));
      if (!source) throw new Error(`bench scale: ${r.conversation} in the kept store is no copy of ${dataFile}`);
      return {
        tenant: r.tenant,
        conversation: r.conversation,
        source,
        copy: Number(r.conversation.slice(at + 2)),
        records: recordCounts.get(`${r.tenant}\u0000${r.conversation}`) ?? 0,
        turns: r.n,
      };
    })
    .sort((a, b) => a.copy - b.copy || (order.get(a.source.id) ?? 0) - (order.get(b.source.id) ?? 0));
};

export const runScaleBench = async (
  options: ScaleBenchOptions,
): Promise<{
  report: ScaleBenchReport;
  markdown: string;
  files: string[];
}> => {
  const started = performance.now();
  const loadBefore = loadavg();
  const sizes = [...new Set(options.sizes)].sort((a, b) => a - b);
  if (sizes.length === 0 || sizes.some((s) => !(s > 0))) throw new Error("bench scale: sizes must be positive");
  const queries = options.queries ?? 100;
  const tenantCount = options.tenants ?? 10;
  const segmentTurns = options.segmentTurns ?? 8;
  const noise = options.noise ?? 0.5;
  const seed = options.seed ?? 18;
  const log = options.log ?? (() => {});
  const dataFile = resolve(options.data);
  const bytes = readFileSync(dataFile);
  const dev = loadLocomo(dataFile);
  if (dev.length === 0) throw new Error(`no conversations in ${dataFile}`);

  const storeModes = [options.keepStore, options.reuseStore, options.growStore].filter((d) => d !== undefined);
  if (storeModes.length > 1) throw new Error("bench scale: --keep-store, --reuse-store or --grow-store, not both");
  const store: ScaleStore = options.store ?? "embedded";
  if (store === "neo4j" && storeModes.length > 0)
    throw new Error("bench scale: --keep-store, --reuse-store and --grow-store are for the embedded store");
  // Tenants of a Neo4j run carry a prefix of their own: the server is shared (tests, other runs),
  // and the cleanup at the end erases exactly these tenants.
  const tenantPrefix = store === "neo4j" ? `scale-${randomUUID().slice(0, 8)}-` : "scale-";

  const embedder = options.embedder ?? (await openEmbedderThread(options.config));
  const kept = options.keepStore ?? options.reuseStore ?? options.growStore;
  const dataDir = kept ? resolve(kept) : mkdtempSync(join(tmpdir(), "memory-bench-scale-"));
  if (options.growStore) mkdirSync(dataDir, { recursive: true });
  if (options.keepStore) {
    mkdirSync(dataDir, { recursive: true });
    if (readdirSync(dataDir).length > 0) throw new Error(`bench scale: --keep-store folder ${dataDir} is not empty`);
  }
  const config: Config = {
    ...options.config,
    dataDir,
    ...(store === "neo4j" ? { store: { ...options.config.store, kind: "neo4j" as const } } : {}),
  };
  // The SQLite handle is there for --reuse-store and --grow-store, which read a kept store's rows back.
  const openScaleStores = async (): Promise<OpenedStores & { db?: OpenedSqliteStores["db"] }> =>
    store === "neo4j" ? openStores(config, "neo4j") : openSqliteStores(config);
  const settings = querySettingsFrom(config);
  /** The questions' source; each copy's vector noise has its own (copyRandom). */
  const rnd = seededRandom(seed);
  const copyRandom = (c: number, source: LocomoConversation): (() => number) =>
    seededRandom(createHash("sha256").update(`${seed}/${c}/${source.id}`).digest().readUInt32LE(0));
  const bar = options.progress
    ? new SingleBar({
        format: "bench scale {phase} [{bar}] {value}/{total} records | {eta_formatted} left",
        stream: process.stderr,
        hideCursor: true,
        etaBuffer: 50,
      })
    : undefined;
  bar?.start(sizes[sizes.length - 1] as number, 0, { phase: "build" });

  let stores = await openScaleStores();
  log(`scale: store ${stores.label}${store === "neo4j" ? `, tenants ${tenantPrefix}*` : ""}`);
  const results: ScaleSizeResult[] = [];
  const built: BuiltConversation[] = [];
  const recordsPerTenant = new Map<string, number>();
  /** Every tenant written to (the Neo4j cleanup's list: a tenant counts from its first write). */
  const touched = new Set<string>();
  /** Real vectors of the first copy by conversation / segment index / text index. */
  const realVectors = new Map<string, Float32Array>();
  const realPool: Float32Array[] = [];
  const realEmbedded = { records: 0, turns: 0 };
  let records = 0;
  let turns = 0;
  const date = new Date().toISOString();
  // The commit the run's code came from: read once at the start (a long run may outlive a commit).
  const environment = runEnvironment();
  /** The report so far, written after every size (a long run keeps what it measured). */
  const writeReport = (): { report: ScaleBenchReport; markdown: string; files: string[] } => {
    const report: ScaleBenchReport = {
      config: {
        bench: "scale",
        store,
        tenantPrefix,
        dataFile,
        dataSha256: createHash("sha256").update(bytes).digest("hex"),
        sizes,
        queries,
        tenants: options.reuseStore ? recordsPerTenant.size : tenantCount,
        segmentTurns,
        noise,
        seed,
        embedder: embedder.id,
        realEmbedded,
        ...(options.reuseStore ? { reused: true } : {}),
        ...environment,
        date,
        loadAverage: { before: loadBefore, after: loadavg() },
        wallSeconds: (performance.now() - started) / 1000,
      },
      sizes: [...results],
    };
    const markdown = renderScaleMarkdown(report);
    const files = options.out === null ? [] : writeReportFiles(options.out, "scale", date, markdown, report);
    return { report, markdown, files };
  };
  try {
    // Untimed warm-up of the model.
    await embedder.embed(["warm-up"]);
    const prepared = new PreparedEmbedder(embedder.dimension);
    const segmentsOf = (tenant: string, source: LocomoConversation, c: number) =>
      fixedSegments(tenant, `${source.id}-c${c}`, disguiseTurns(source, disguiseOf(source, c)), segmentTurns);
    /** A copy's segments, each encoded (in order: the encoder's state runs on) with its vector texts. */
    const encodedSegmentsOf = (tenant: string, source: LocomoConversation, c: number) => {
      let state: EncoderState | undefined;
      return segmentsOf(tenant, source, c).map((segment) => {
        const encoded = encodeSegment(segment, state);
        state = encoded.state;
        return { segment, records: encoded.records, texts: vectorTexts(deriveIndexBatch(segment, encoded.records)) };
      });
    };
    type EncodedSegment = ReturnType<typeof encodedSegmentsOf>[number];
    /** Real embeddings of a first copy's texts, one call per segment (as its build makes them). */
    const embedFirstCopy = async (segments: readonly EncodedSegment[], source: LocomoConversation) => {
      const out: Float32Array[][] = [];
      for (const [si, { segment, records: segmentRecords, texts }] of segments.entries()) {
        const vs = texts.length > 0 ? await embedder.embed(texts.map((t) => t.text)) : [];
        vs.forEach((v, i) => {
          realVectors.set(`${source.id}/${si}/${i}`, v);
          realPool.push(v);
        });
        realEmbedded.records += segmentRecords.length;
        realEmbedded.turns += segment.turns.length;
        out.push(vs);
      }
      return out;
    };
    /** Writes one copy of a dev conversation; a stop asked for is honoured between its segments. */
    const buildOne = async (
      source: LocomoConversation,
      c: number,
    ): Promise<{ seconds: number; vectors: number; complete: boolean }> => {
      const tenant = `${tenantPrefix}t${built.length % tenantCount}`;
      touched.add(tenant);
      // Encoded once: a first copy's real embeddings are made from the same segments it writes.
      const segments = encodedSegmentsOf(tenant, source, c);
      const real = c === 0 ? await embedFirstCopy(segments, source) : undefined;
      const noisy = copyRandom(c, source);
      let seconds = 0;
      let vectors = 0;
      for (const [si, { segment, records: segmentRecords, texts }] of segments.entries()) {
        // A turn of the event loop between segments. The writes are synchronous (SQLite, hnswlib)
        // and later copies embed nothing, so without it a build never left the microtask queue:
        // a SIGINT's handler never ran (a grow could not be stopped), and neither did the native
        // finalizers that free an evicted tenant's hnswlib index, so past the residency caps the
        // evicted indexes piled up (21 GB resident at ~674K records over 100 tenants).
        await new Promise<void>((resolve) => setImmediate(resolve));
        // Cut short: the next --grow-store run writes this conversation again.
        if (si > 0 && options.signal?.aborted) return { seconds, vectors, complete: false };
        let vs: Float32Array[];
        if (real) {
          vs = real[si] ?? [];
        } else {
          vs = texts.map((_, i) => {
            const base =
              realVectors.get(`${source.id}/${si}/${i}`) ??
              (realPool[Math.floor(noisy() * realPool.length)] as Float32Array);
            return perturb(base, noise, noisy);
          });
        }
        prepared.prepare(
          texts.map((t) => t.text),
          vs,
        );
        const t0 = performance.now();
        await indexSegment(
          { graph: stores.graph, vectors: stores.vectors, embedder: prepared },
          segment,
          segmentRecords,
        );
        seconds += (performance.now() - t0) / 1000;
        vectors += vs.length;
        records += segmentRecords.length;
        turns += segment.turns.length;
        recordsPerTenant.set(tenant, (recordsPerTenant.get(tenant) ?? 0) + segmentRecords.length);
        bar?.update(Math.min(records, sizes[sizes.length - 1] as number), { phase: "build" });
      }
      built.push({ tenant, conversation: `${source.id}-c${c}`, source, copy: c });
      return { seconds, vectors, complete: true };
    };

    /** The next conversation to build: copy, then the dev conversation's index. */
    let next = { copy: 0, index: 0 };
    const advance = (): void => {
      next =
        next.index + 1 < dev.length ? { copy: next.copy, index: next.index + 1 } : { copy: next.copy + 1, index: 0 };
    };
    if (options.reuseStore || options.growStore) {
      const db = stores.db;
      if (!db) throw new Error("bench scale: --reuse-store and --grow-store need the embedded store");
      const stored = readStoredConversations(db, dev, dataFile);
      const last = stored[stored.length - 1];
      // Only the last conversation of a build can be cut short (they are written one by one).
      const cut = options.growStore && last && last.turns < turnCountOf(last.source) ? last : undefined;
      for (const r of stored) {
        if (r === cut) continue;
        built.push({ tenant: r.tenant, conversation: r.conversation, source: r.source, copy: r.copy });
        recordsPerTenant.set(r.tenant, (recordsPerTenant.get(r.tenant) ?? 0) + r.records);
        records += r.records;
        turns += r.turns;
      }
      if (options.reuseStore) {
        sizes.splice(0, sizes.length, records);
      } else {
        const done = sizes.filter((s) => s <= records);
        if (done.length === sizes.length)
          throw new Error(
            `bench scale: the store in ${dataDir} already holds ${records} records (sizes asked: ${sizes.join(", ")}); measure it with --reuse-store`,
          );
        if (done.length > 0)
          log(`scale: the store already holds ${records} records; not measured again: ${done.join(", ")}`);
        sizes.splice(0, done.length);
        const resumeAt = cut ?? last;
        if (resumeAt) {
          next = { copy: resumeAt.copy, index: dev.indexOf(resumeAt.source) };
          if (!cut) advance();
        }
        // Later copies are perturbations of the first copy's real vectors: embed those again
        // (nothing is written) for the first copies the store holds in full.
        for (const b of built.filter((c) => c.copy === 0))
          await embedFirstCopy(encodedSegmentsOf(b.tenant, b.source, 0), b.source);
        log(
          `scale: growing ${dataDir} from ${records} records in ${built.length} conversations` +
            (cut ? ` (${cut.conversation} was cut short and is written again)` : ""),
        );
      }
    }
    let flushedAt = records;
    let stopped = false;
    for (const size of sizes) {
      let writeSeconds = 0;
      let writeVectors = 0;
      const recordsBefore = records;
      // Whole copies of the dev set, as a store's sizes are counted in them.
      while (records < size || next.index !== 0) {
        if (options.signal?.aborted) {
          stopped = true;
          break;
        }
        const r = await buildOne(dev[next.index] as LocomoConversation, next.copy);
        writeSeconds += r.seconds;
        writeVectors += r.vectors;
        if (!r.complete) {
          stopped = true;
          break;
        }
        advance();
        // A kill between flushes costs a rebuild of the touched tenants' indexes at the next open.
        if (records - flushedAt >= FLUSH_EVERY_RECORDS) {
          await stores.vectors.flush();
          flushedAt = records;
        }
      }
      if (stopped) {
        await stores.vectors.flush();
        log(
          `scale: stopped at ${records} records in ${built.length} conversations` +
            (options.growStore ? `; run again with --grow-store ${dataDir} to carry on` : ""),
        );
        break;
      }
      await stores.vectors.flush();
      // The size is what the store holds, not what was written: a record written again (the same
      // id: the same text in the same tenant) is one record. Copies of a conversation must differ
      // (scale-data.ts disguiseOf); a count below the written one says they did not.
      const storedPerTenant = new Map<string, number>();
      for (const tenant of recordsPerTenant.keys())
        storedPerTenant.set(tenant, await stores.graph.countRecords(tenant));
      const storedRecords = [...storedPerTenant.values()].reduce((a, b) => a + b, 0);
      if (storedRecords !== records)
        log(`scale: ${records} records written, ${storedRecords} stored (records written again onto the same ids)`);
      log(`scale: ${storedRecords} records, ${turns} turns in ${built.length} conversations; querying`);

      // One search per tenant loads its vector index (a store loads a tenant's index on first use).
      const probe = new Float32Array(embedder.dimension);
      probe[0] = 1;
      const loadEveryTenant = async (): Promise<void> => {
        for (const tenant of recordsPerTenant.keys()) await stores.vectors.search(tenant, probe, 1);
      };
      const ask = async (
        tenantWide: boolean,
        count: number,
      ): Promise<{ total: number[]; routes: Map<RouteName, number[]>; embed: number[] }> => {
        const total: number[] = [];
        const embed: number[] = [];
        const routes = new Map<RouteName, number[]>();
        for (let i = 0; i < count; i++) {
          const b = built[Math.floor(rnd() * built.length)] as BuiltConversation;
          const q = b.source.questions[Math.floor(rnd() * b.source.questions.length)];
          if (!q) continue;
          const question = disguiseQuestion(disguiseOf(b.source, b.copy), q);
          const e0 = performance.now();
          await embedder.embed([question]);
          embed.push(performance.now() - e0);
          const t0 = performance.now();
          const result = await runQuery(
            { graph: stores.graph, vectors: stores.vectors, embedder },
            b.tenant,
            { question, ...(tenantWide ? {} : { conversation: b.conversation }) },
            settings,
          );
          total.push(performance.now() - t0);
          for (const [route, ms] of Object.entries(result.cost.routeMs) as [RouteName, number][]) {
            const list = routes.get(route) ?? [];
            list.push(ms);
            routes.set(route, list);
          }
          bar?.update(records, { phase: tenantWide ? "tenant-wide queries" : "conversation queries" });
        }
        return { total, routes, embed };
      };
      const summarise = (r: { total: number[]; routes: Map<RouteName, number[]> }): QueryLatency => ({
        ...latency(r.total),
        routes: Object.fromEntries([...r.routes].map(([route, v]) => [route, latency(v)])),
      });
      // Warm-up (JIT, caches) not measured. Every tenant's index is loaded first: a store opened by
      // --reuse-store loads a tenant's index on its first search, which put a 0.5 s load into the
      // measured queries' p99 (the cold start below times those loads on their own).
      // Under residency caps smaller than the store, the loads evict (and the measured queries
      // load evicted tenants again: their cost is in the query figures, counted in `residency`).
      // Then the warm-up a query process runs before it serves (warm-up.ts: the o200k table, the
      // gazetteer's cities): without it the first measured question naming a region loaded the
      // cities (0.26 s in one 300-question run where every other question took under 50 ms).
      await loadEveryTenant();
      await warmUpQueries({ graph: stores.graph, vectors: stores.vectors, embedder }, settings);
      await ask(false, Math.min(WARM_UP_QUERIES, queries));
      await ask(true, Math.min(WARM_UP_QUERIES, queries));
      const hnswBefore = hnswOf(stores.vectors);
      const queryCounters = hnswBefore ? { ...hnswBefore.residency } : undefined;
      const conv = await ask(false, queries);
      const wide = await ask(true, queries);
      const embedLatency = latency([...conv.embed, ...wide.embed]);
      const mem = process.memoryUsage();
      const split = residentSplit();
      const queryConv = summarise(conv);
      const queryWide = summarise(wide);
      const afterQueries = hnswBefore?.resident;

      // Cold start: close, reopen, load every tenant's index from its file (within the caps).
      await stores.close();
      const disk = store === "embedded" ? diskBytes(dataDir) : undefined;
      const c0 = performance.now();
      stores = await openScaleStores();
      await loadEveryTenant();
      const coldStartMs = performance.now() - c0;
      const hnsw = hnswOf(stores.vectors);
      const residency =
        hnswBefore && queryCounters && afterQueries && hnsw
          ? {
              caps: hnsw.residencyCaps,
              afterQueries,
              afterColdStart: { ...hnsw.resident, rssBytes: process.memoryUsage().rss },
              queryLoads: hnswBefore.residency.loads - queryCounters.loads,
              queryEvictions: hnswBefore.residency.evictions - queryCounters.evictions,
              coldStartLoads: hnsw.residency.loads,
              coldStartEvictions: hnsw.residency.evictions,
              loadMsPer1000Vectors:
                hnsw.residency.loadedVectors > 0
                  ? (hnsw.residency.loadMs / hnsw.residency.loadedVectors) * 1000
                  : undefined,
            }
          : undefined;

      const ratio = (p: number | undefined): number | undefined =>
        p !== undefined && embedLatency.p95 ? p / embedLatency.p95 : undefined;
      results.push({
        records: storedRecords,
        turns,
        conversations: built.length,
        tenants: storedPerTenant.size,
        largestTenantRecords: Math.max(...storedPerTenant.values()),
        write: {
          seconds: writeSeconds,
          recordsPerSecond: writeSeconds > 0 ? (records - recordsBefore) / writeSeconds : 0,
          vectorsPerSecond: writeSeconds > 0 ? writeVectors / writeSeconds : 0,
        },
        query: { conversation: queryConv, tenant: queryWide },
        questionEmbedding: embedLatency,
        p95OverEmbedding: { conversation: ratio(queryConv.p95), tenant: ratio(queryWide.p95) },
        memory: {
          rssBytes: mem.rss,
          heapUsedBytes: mem.heapUsed,
          externalBytes: mem.external,
          anonBytes: split?.anonBytes ?? null,
          fileBytes: split?.fileBytes ?? null,
        },
        disk: disk === undefined ? null : { bytes: disk, bytesPerRecord: disk / storedRecords },
        coldStartMs,
        ...(residency ? { residency } : {}),
      });
      const last = results[results.length - 1] as ScaleSizeResult;
      log(
        `scale: ${storedRecords} records: query p95 conversation ${last.query.conversation.p95?.toFixed(1)} ms, ` +
          `tenant ${last.query.tenant.p95?.toFixed(1)} ms, embedding p95 ${last.questionEmbedding.p95?.toFixed(1)} ms`,
      );
      writeReport();
    }
  } finally {
    bar?.stop();
    if (store === "neo4j") {
      // Erase the run's tenants (graph and vectors); a failure is reported with the prefix to erase by hand.
      try {
        for (const tenant of touched) {
          await stores.graph.deleteTenant(tenant);
          await stores.vectors.deleteTenant(tenant);
        }
      } catch (err) {
        log(`scale: cleanup of tenants ${tenantPrefix}* failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    await stores.close().catch(() => {});
    if (!options.embedder) await embedder.close?.();
    if (!kept) rmSync(dataDir, { recursive: true, force: true });
  }

  const { report, markdown, files } = writeReport();
  return { report, markdown, files };
};

/** The embedded HNSW store behind a vector port (tracing off), for its residency counters. */
const hnswOf = (vectors: unknown): HnswVectorStore | undefined =>
  vectors instanceof HnswVectorStore ? vectors : undefined;

const ROUTES: RouteName[] = ["dense", "raw-dense", "lexical", "raw-lexical", "entity", "topic", "time", "event-frame"];

export const renderScaleMarkdown = (r: ScaleBenchReport): string => {
  const mb = (b: number): string => fmt(b / 2 ** 20, 1);
  const main = markdownTable(
    [
      "records",
      "turns",
      "tenants (largest)",
      "conv. query p50/p95/p99 ms",
      "tenant query p50/p95/p99 ms",
      "question embedding p50/p95 ms",
      "p95 / embedding p95 (conv., tenant)",
      "write records/s",
      "RSS MiB (anon + file)",
      "disk bytes/record",
      "cold start ms",
    ],
    r.sizes.map((s) => [
      fmtInt(s.records),
      fmtInt(s.turns),
      `${s.tenants} (${fmtInt(s.largestTenantRecords)})`,
      `${fmt(s.query.conversation.p50, 1)} / ${fmt(s.query.conversation.p95, 1)} / ${fmt(s.query.conversation.p99, 1)}`,
      `${fmt(s.query.tenant.p50, 1)} / ${fmt(s.query.tenant.p95, 1)} / ${fmt(s.query.tenant.p99, 1)}`,
      `${fmt(s.questionEmbedding.p50, 1)} / ${fmt(s.questionEmbedding.p95, 1)}`,
      `${fmt(s.p95OverEmbedding.conversation, 2)}, ${fmt(s.p95OverEmbedding.tenant, 2)}`,
      // A size measured on a kept store (--reuse-store) wrote nothing: no rate, rather than 0.
      s.write.seconds > 0 ? fmt(s.write.recordsPerSecond, 0) : "–",
      s.memory.anonBytes === null || s.memory.fileBytes === null
        ? mb(s.memory.rssBytes)
        : `${mb(s.memory.rssBytes)} (${mb(s.memory.anonBytes)} + ${mb(s.memory.fileBytes)})`,
      s.disk ? fmtInt(s.disk.bytesPerRecord) : "–",
      fmt(s.coldStartMs, 0),
    ]),
  );
  const routes = markdownTable(
    ["records", "scope", ...ROUTES.map((x) => `${x} p50/p95`)],
    r.sizes.flatMap((s) =>
      (["conversation", "tenant"] as const).map((scope) => [
        fmtInt(s.records),
        scope,
        ...ROUTES.map((x) => {
          const l = s.query[scope].routes[x];
          return l ? `${fmt(l.p50, 1)} / ${fmt(l.p95, 1)}` : "–";
        }),
      ]),
    ),
  );
  const withResidency = r.sizes.filter((s) => s.residency);
  const residency = markdownTable(
    [
      "records",
      "caps (points, tenants)",
      "resident after queries (tenants, points)",
      "loads / evictions in the measured queries",
      "cold start: loads / evictions, resident after (tenants, points), RSS MiB",
      "load ms per 1,000 points",
    ],
    withResidency.map((s) => {
      const x = s.residency as NonNullable<ScaleSizeResult["residency"]>;
      return [
        fmtInt(s.records),
        `${fmtInt(x.caps.vectors)}, ${fmtInt(x.caps.tenants)}`,
        `${x.afterQueries.tenants}, ${fmtInt(x.afterQueries.vectors)}`,
        `${x.queryLoads} / ${x.queryEvictions}`,
        `${x.coldStartLoads} / ${x.coldStartEvictions}, ${x.afterColdStart.tenants}, ${fmtInt(x.afterColdStart.vectors)}, ${mb(x.afterColdStart.rssBytes)}`,
        fmt(x.loadMsPer1000Vectors, 1),
      ];
    }),
  );
  const c = r.config;
  return [
    `# bench scale (${c.store})`,
    "",
    `${c.date}, commit ${c.gitCommit ?? "?"}${c.gitDirty ? " (dirty)" : ""}, Node ${c.node}, ${c.cpus} CPUs, load ${c.loadAverage.before.map((x) => x.toFixed(1)).join("/")} → ${c.loadAverage.after.map((x) => x.toFixed(1)).join("/")}; embedder ${c.embedder}; ${c.wallSeconds.toFixed(0)} s.`,
    "",
    `Data: ${c.reused ? "a store an earlier run built and kept (--reuse-store; nothing written or embedded in this run): " : ""}` +
      `copies of ${c.dataFile} (sha256 ${c.dataSha256.slice(0, 12)}) with other speaker names, places and dates, ` +
      `${c.segmentTurns}-turn segments, extractive encoder, written through the indexer (indexSegment) over ${c.tenants} tenants ` +
      `(conversation copies round-robin). Vectors: real embeddings for the first copy` +
      `${c.reused ? "" : ` (${c.realEmbedded.records} records, ${c.realEmbedded.turns} turns)`}; every later text gets the real vector of its position in the first copy plus Gaussian ` +
      `noise of norm ${c.noise} (cosine to it ≈ ${(1 / Math.sqrt(1 + c.noise ** 2)).toFixed(2)}), normalised. ` +
      `${c.queries} conversation-scoped and ${c.queries} tenant-wide LoCoMo questions (disguised like their conversation) per size, ` +
      `after ${WARM_UP_QUERIES} unmeasured warm-up queries; query time includes the question's embedding.`,
    "",
    main,
    "",
    "## Per route (ms)",
    "",
    routes,
    "",
    ...(withResidency.length > 0
      ? [
          "## HNSW index residency",
          "",
          "Cold start loads every tenant's index once; under caps smaller than the store the earliest loaded are evicted again.",
          "",
          residency,
          "",
        ]
      : []),
  ].join("\n");
};
