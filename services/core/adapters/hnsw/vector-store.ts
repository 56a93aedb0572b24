import { createHash } from "node:crypto";
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import hnswlib, { type HierarchicalNSW } from "hnswlib-node";
import { HNSW_RESIDENCY_DEFAULTS, HNSW_SPLIT_KINDS_AT } from "../../config.ts";
import type { VectorFilter, VectorHit, VectorItem, VectorKind, VectorPayload, VectorStore } from "../../ports.ts";
import { compileFilter } from "../../vector-filter.ts";
import { migrate, openSqlite, type SqliteDatabase } from "../sqlite-db.ts";
import { VECTOR_MIGRATIONS } from "./schema.ts";
import { VectorBlock } from "./vector-block.ts";

export interface HnswVectorStoreOptions {
  /** Close the database in close() (default false: whoever opened the shared handle closes it). */
  ownsDb?: boolean;
  /** HNSW graph degree (default DEFAULT_HNSW_M). */
  m?: number;
  /** Build-time candidate list size (default DEFAULT_HNSW_EF_CONSTRUCTION). */
  efConstruction?: number;
  /** Search-time candidate list size, at least k (default 64). */
  efSearch?: number;
  /**
   * A filtered search admitting at most this many items is answered exactly (default 2048); one
   * whose candidate list (kind, conversation or entity postings) is longer than
   * ADMISSIBLE_SCAN_FACTOR times this goes to the filtered HNSW walk without counting them.
   */
  bruteForceLimit?: number;
  /** Capacity a new index starts with; it doubles when full (default 1024). */
  initialCapacity?: number;
  /** Seed of the HNSW level generator, for reproducible graphs (default 100). */
  seed?: number;
  /**
   * A tenant index is rebuilt without its deleted points once they make up this share of the
   * points it holds (default 0.2; 1: only when every point is deleted). hnswlib only marks a
   * deleted point: its vector stays in memory and in the index file until a new point takes its
   * slot. purgeDeleted() (after an erasure) removes deleted vectors whatever the share.
   */
  compactDeletedRatio?: number;
  /**
   * Tenant indexes kept in memory hold at most this many points in all (default
   * DEFAULT_MAX_RESIDENT_VECTORS); past it the least recently used are written to their files
   * (when changed) and dropped, and read back on their next use. A tenant larger than the cap
   * stays in memory alone.
   */
  maxResidentVectors?: number;
  /** At most this many tenant indexes in memory (default DEFAULT_MAX_RESIDENT_TENANTS), as above. */
  maxResidentTenants?: number;
  /**
   * A tenant of at least this many points gets one HNSW graph per kind, records and raw turns,
   * instead of one for both (default DEFAULT_SPLIT_KINDS_AT): from the write that brings it there,
   * or when its graphs are built anyway. See IndexParts.
   */
  splitKindsAt?: number;
  /**
   * A tenant holding at least this many points gets its new graphs (a split into a graph per kind,
   * a compaction) built in the background, and an erasure's deleted vectors zeroed there, a slice
   * of REBUILD_SLICE_MS at a time between turns of the event loop, while its graphs keep serving
   * (default DEFAULT_REBUILD_IN_BACKGROUND_AT); a smaller one's are built by the call that needs
   * them. See startRebuild.
   */
  rebuildInBackgroundAt?: number;
  /** Longest background work holds the event loop at a time, ms (default REBUILD_SLICE_MS; 0: one point per turn). */
  rebuildSliceMs?: number;
}

/**
 * Default of HnswVectorStoreOptions.splitKindsAt. Every tenant-wide query searches records and raw
 * turns apart; in one graph of both, a kind's search walks past the other kind's points until it
 * has enough of its own: on a 100K-record store (tenants of ~19K points, half of each kind) 0.51 ms
 * a search against 0.13 ms in a graph of the kind alone (docs/benchmarks.md). A graph costs ~2.5 MiB
 * however small (hnswlib's label locks, see DEFAULT_MAX_RESIDENT_VECTORS), so small tenants keep
 * one: below ~4K points a kind's search is exact anyway (bruteForceLimit), and at 8K a second
 * graph adds about 8% to the tenant's memory.
 */
export const DEFAULT_SPLIT_KINDS_AT: number = HNSW_SPLIT_KINDS_AT;

/**
 * Default of HnswVectorStoreOptions.rebuildInBackgroundAt. Built by the write itself, the split of
 * an 8,192-point tenant held the event loop for 1.2-2.4 s, and the compaction after an erasure of a
 * quarter of a 12,000-point tenant 2.7 s (every tenant's queries waited); in the background they
 * cost the same CPU in slices. Below ~2K points a build takes a few hundred milliseconds at most
 * and is done at once.
 */
export const DEFAULT_REBUILD_IN_BACKGROUND_AT = 2048;

/** Longest background work holds the event loop at a time (about 30-150 points per slice). */
export const REBUILD_SLICE_MS = 10;

/**
 * What zeroing one deleted point costs, in inserts of a point into a fresh graph: hnswlib's update
 * repairs the links of the point's neighbours and of theirs. 1,200 points zeroed in a 12,000-point
 * tenant took 4.6 ms each against 0.30 ms an insert of its compaction (random 384-d vectors, a
 * scratch timing; docs/erasure.md has more): a purge compacts instead once the deleted points
 * would cost more to zero than the live ones to insert.
 */
export const ZEROING_COST_IN_INSERTS = 12;

/**
 * ef of a search of one kind in its own graph, times k. The filtered walk in one graph of both
 * kinds (ef 2k) goes on past the other kind's points until it holds 2k of its own, so it explores
 * more than its ef says; in the kind's graph ef 2k gave recall@40 0.960-0.976 against that walk's
 * 0.972-0.991, 3k 0.977-0.988, 4k 0.992-0.997 at 0.31-0.38 ms a search against ~0.5 ms (the
 * 100K-record scale store, two tenants, both kinds; docs/benchmarks.md). 4k: never below before.
 */
const KIND_GRAPH_EF_FACTOR = 4;

/**
 * A filter whose candidate list (VectorBlock.source) holds at most this many times bruteForceLimit
 * items is checked item by item to learn whether it admits few enough for the exact path; a longer
 * list goes to the filtered HNSW walk at once (checking it would cost a scan of that length per
 * search, which is what grows with the tenant).
 */
export const ADMISSIBLE_SCAN_FACTOR = 8;

/**
 * Build parameters, chosen by measured recall@10 against exact search (build-recall.ts;
 * docs/benchmarks.md, scale section): on 20,000 perturbed dev embeddings, efConstruction 100
 * keeps recall within half a point of 200 (filtered and unfiltered, both above 0.95) at about half
 * the insert cost; a lower degree (m 12) falls below 0.95.
 */
export const DEFAULT_HNSW_M = 16;
export const DEFAULT_HNSW_EF_CONSTRUCTION = 100;

/** Default of HnswVectorStoreOptions.compactDeletedRatio. */
export const DEFAULT_COMPACT_DELETED_RATIO = 0.2;

/**
 * Defaults of the residency caps. A resident point costs about 4 KB with 384-d vectors (hnswlib's
 * copy and links, about 2.3 KB, the VectorBlock copy, 1.5 KB, and its payload), so 1,000,000 points
 * are about 4 GiB; an index also costs about 2.5 MiB however small (hnswlib's 65,536 label locks),
 * so 1,000 tenants are about 2.5 GiB before their points. Both are above what a dev machine holds:
 * a small deployment keeps every index in memory as before. Figures in docs/benchmarks.md.
 */
export const DEFAULT_MAX_RESIDENT_VECTORS: number = HNSW_RESIDENCY_DEFAULTS.vectors;
export const DEFAULT_MAX_RESIDENT_TENANTS: number = HNSW_RESIDENCY_DEFAULTS.tenants;

interface Entry {
  id: string;
  payload: VectorPayload;
}

const KINDS: readonly VectorKind[] = ["record", "turn"];

/**
 * A tenant's HNSW graphs: one of every point, or (a tenant of at least splitKindsAt points) one per
 * kind, each holding the labels of its kind only. A tenant is split by the write that brings it to
 * splitKindsAt (its graphs built again from SQLite, once), and its layout is chosen by its size
 * whenever its graphs are built anyway (a rebuild, a compaction). A load reads the files of
 * either layout when they are current, so a store written before the split keeps one graph per
 * tenant until that tenant's next write: no rebuild on a query's path.
 */
type IndexParts = { split: false; all: HierarchicalNSW } | { split: true; byKind: Record<VectorKind, HierarchicalNSW> };

const graphsOf = (p: IndexParts): HierarchicalNSW[] => (p.split ? KINDS.map((k) => p.byKind[k]) : [p.all]);

/** The graph that holds (or would hold) points of a kind. */
const graphOf = (p: IndexParts, kind: VectorKind): HierarchicalNSW => (p.split ? p.byKind[kind] : p.all);

/** How many of these entries are of each kind. */
const countKinds = (entries: Iterable<Entry>): Record<VectorKind, number> => {
  const counts: Record<VectorKind, number> = { record: 0, turn: 0 };
  for (const e of entries) counts[e.payload.kind]++;
  return counts;
};

/** Grows a graph (doubling at least) so that `incoming` more points fit. */
const ensureRoom = (graph: HierarchicalNSW, incoming: number): void => {
  const needed = graph.getCurrentCount() + incoming;
  if (needed > graph.getMaxElements()) graph.resizeIndex(Math.max(needed, graph.getMaxElements() * 2));
};

/** Whether a write gives a point the tenant holds another kind than it has. */
const changesKind = (t: TenantIndex, applied: readonly { label: number; item: VectorItem }[]): boolean =>
  applied.some(({ label, item }) => {
    const kind = t.entries.get(label)?.payload.kind;
    return kind !== undefined && kind !== item.payload.kind;
  });

/** Points the graphs hold, deleted ones included (they hold memory until their slot is reused). */
const heldPoints = (p: IndexParts): number => graphsOf(p).reduce((n, g) => n + g.getCurrentCount(), 0);

interface TenantIndex {
  parts: IndexParts;
  /** Live labels -> id and payload (the filter callback's lookup). */
  entries: Map<number, Entry>;
  labels: Map<string, number>;
  /** Changed since the index file was last written. */
  dirty: boolean;
  /** Deleted labels whose vectors are already overwritten (see scrubDeleted). */
  scrubbed: Set<number>;
  /**
   * The live vectors again, contiguous: the filtered exact path scores them in one pass, and
   * getVectors copies them from here.
   */
  block: VectorBlock;
  /** Points this index counted for in residentVectors when last weighed (see weigh). */
  weight: number;
  /** New graphs being built in the background (startRebuild); the tenant's graphs serve until they are done. */
  rebuilding?: RebuildJob;
  /**
   * Its graphs are being built in the background after a load found no current file (a crash
   * since the last flush): `parts` is an empty stand-in, searches are exact over the block, and
   * writes and deletes go to the block and the job alone until the job swaps its graphs in.
   */
  graphless?: true;
}

/**
 * Graphs built in the background from the tenant's live rows: a split into a graph per kind (the
 * tenant reached splitKindsAt), a compaction (its deleted points passed compactDeletedRatio, or an
 * erasure's purge), or a load's (no current file; TenantIndex.graphless). `added`: the labels
 * already in them.
 */
interface RebuildJob {
  why: "split" | "compaction" | "load";
  /** The layout it builds: a graph per kind, or one. */
  split: boolean;
  /** Its graphs, made at its first slice: a job waiting its turn (inSlices) holds no memory. */
  parts?: IndexParts;
  added: Set<number>;
  /** Settles when the job has ended: swapped in, dropped, or failed. */
  ended: Promise<void>;
  /** Why it failed, when it did (its graphs were not swapped in). */
  failed?: unknown;
}

interface TenantRow {
  next_label: number;
  version: number;
  flushed_version: number;
}

/** The index file of a tenant in a store's `vectors` folder (the tenant name never appears on disk). */
export const hnswFileOf = (vectorsDir: string, tenant: string): string =>
  join(vectorsDir, `${tenantFileStem(tenant)}.hnsw`);

/** The index file of one kind's graph of a tenant whose points are split by kind (IndexParts). */
export const hnswKindFileOf = (vectorsDir: string, tenant: string, kind: VectorKind): string =>
  join(vectorsDir, `${tenantFileStem(tenant)}.${kind}.hnsw`);

const tenantFileStem = (tenant: string): string => createHash("sha256").update(tenant).digest("hex").slice(0, 32);

const toBlob = (v: Float32Array): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);

const fromBlob = (b: Buffer): Float32Array => {
  const copy = new Uint8Array(b.byteLength);
  copy.set(b);
  return new Float32Array(copy.buffer);
};

/**
 * The vector of a row read for a caller: a view on the blob's own memory when it is 4-byte
 * aligned (a blob read by better-sqlite3 is a fresh Buffer nobody else holds, so the view is the
 * caller's alone), else a copy (fromBlob). A get of the few hundred vectors a query reranks
 * allocated and copied each vector twice.
 */
const vectorOfBlob = (b: Buffer): Float32Array =>
  b.byteOffset % Float32Array.BYTES_PER_ELEMENT === 0 && b.byteLength % Float32Array.BYTES_PER_ELEMENT === 0
    ? new Float32Array(b.buffer, b.byteOffset, b.byteLength / Float32Array.BYTES_PER_ELEMENT)
    : fromBlob(b);

/** A copy of JSON-like data (objects, arrays, primitives): what a payload is. */
const copyData = <T>(value: T): T => {
  if (Array.isArray(value)) return value.map(copyData) as T;
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) out[key] = copyData((value as Record<string, unknown>)[key]);
  return out as T;
};

/**
 * A hit's own copy of a stored payload, so that a caller changing it cannot change the index's
 * filter data. A payload is JSON data (it is stored as JSON), and copying it field by field costs
 * about a tenth of structuredClone, which a query paid for every hit of its four dense searches.
 */
const copyPayload = (payload: VectorPayload): VectorPayload => copyData(payload);

/** Share of an index's points that are marked deleted (hnswlib counts them until a slot is reused). */
const deletedShare = (t: TenantIndex): number => {
  const held = heldPoints(t.parts);
  return held === 0 ? 0 : (held - t.entries.size) / held;
};

const checkVector = (v: Float32Array, what: string): void => {
  if (v.length === 0) throw new Error(`HnswVectorStore: ${what} is empty`);
  for (let i = 0; i < v.length; i++) {
    if (!Number.isFinite(v[i])) throw new Error(`HnswVectorStore: ${what} has a non-finite value at ${i}`);
  }
};

/**
 * The query scaled to unit length in double precision. A plain loop: Float64Array.from with a
 * mapping function took ~20 µs for 384 values against ~2, on every search.
 */
const unitQuery = (v: Float32Array): Float64Array => {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += (v[i] as number) ** 2;
  const n = Math.sqrt(s) || 1;
  const out = new Float64Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = (v[i] as number) / n;
  return out;
};

/**
 * VectorStore over hnswlib-node: one HNSW index (cosine space; score = cosine similarity) per
 * tenant, so a search can only ever touch that tenant's index; a large tenant's index is one graph
 * per kind (IndexParts).
 *
 * Durability: the `vectors` table in SQLite (shared `memory.db`) is the source of truth (id, label,
 * payload, vector). Index files `<dataDir>/vectors/<sha256(tenant)[:32]>.hnsw` (a tenant split by
 * kind: `….record.hnsw` and `….turn.hnsw`) are a cache written
 * on flush()/close() (write to a temp file, then rename). On first use of a tenant after a start the
 * file is read only if it was written at the tenant's current write version and it holds every label
 * of the table; otherwise (missing, stale after a crash, count mismatch, unreadable) the index is
 * rebuilt from SQLite. Writes commit to SQLite first, then update the in-memory index.
 *
 * Dimension: taken from the first vectors written and kept in `vector_meta`; any other dimension
 * throws (until the store holds no vectors at all).
 *
 * Usage: `new HnswVectorStore(openSqlite(dataDir), dataDir)` (shared handle, closed by its opener)
 * or `HnswVectorStore.open(dataDir)` (own handle, closed by close()).
 */
export class HnswVectorStore implements VectorStore {
  readonly db: SqliteDatabase;
  readonly dir: string;
  /** How many tenant indexes were rebuilt from SQLite (observability and tests). */
  rebuilds = 0;
  /** How many tenant indexes were rebuilt to drop deleted points, and how long that took in all. */
  readonly compactions = { count: 0, ms: 0 };
  /** How many times deleted points' vectors were zeroed in place (purgeDeleted below the ratio). */
  readonly scrubs = { count: 0, ms: 0 };
  /**
   * Residency: tenant indexes brought into memory (from their file or rebuilt), the points they
   * held and the time that took in all; indexes dropped to stay within the caps, and how many of
   * those were written first.
   */
  readonly residency = { loads: 0, loadedVectors: 0, loadMs: 0, evictions: 0, evictionWrites: 0 };
  private readonly opts: Required<Omit<HnswVectorStoreOptions, "ownsDb">>;
  private readonly ownsDb: boolean;
  /** Resident tenant indexes, least recently used first (a use moves a tenant to the end). */
  private readonly indexes = new Map<string, TenantIndex>();
  /** Points held by the resident indexes (deleted ones too: they hold memory until reused). */
  private residentVectors = 0;
  /** Tenants an operation is using: never evicted until it ends (see hold). */
  private readonly held = new Map<string, number>();
  /** Background rebuilds under way (startRebuild). */
  private readonly rebuildsUnderWay = new Set<Promise<void>>();
  /** The background work under way (inSlices), which the next waits for. */
  private backgroundTurn: Promise<unknown> = Promise.resolve();
  /** Tenants whose graphs failed to build in the background after a load: the next load builds them itself. */
  private readonly loadFailed = new Set<string>();
  private dim: number | undefined;
  private closed = false;

  constructor(db: SqliteDatabase, dataDir: string, options: HnswVectorStoreOptions = {}) {
    this.db = db;
    this.dir = join(dataDir, "vectors");
    this.ownsDb = options.ownsDb ?? false;
    this.opts = {
      m: options.m ?? DEFAULT_HNSW_M,
      efConstruction: options.efConstruction ?? DEFAULT_HNSW_EF_CONSTRUCTION,
      efSearch: options.efSearch ?? 64,
      bruteForceLimit: options.bruteForceLimit ?? 2048,
      initialCapacity: options.initialCapacity ?? 1024,
      seed: options.seed ?? 100,
      compactDeletedRatio: options.compactDeletedRatio ?? DEFAULT_COMPACT_DELETED_RATIO,
      maxResidentVectors: options.maxResidentVectors ?? DEFAULT_MAX_RESIDENT_VECTORS,
      maxResidentTenants: options.maxResidentTenants ?? DEFAULT_MAX_RESIDENT_TENANTS,
      splitKindsAt: options.splitKindsAt ?? DEFAULT_SPLIT_KINDS_AT,
      rebuildInBackgroundAt: options.rebuildInBackgroundAt ?? DEFAULT_REBUILD_IN_BACKGROUND_AT,
      rebuildSliceMs: options.rebuildSliceMs ?? REBUILD_SLICE_MS,
    };
    if (!(this.opts.rebuildSliceMs >= 0)) {
      throw new Error(`HnswVectorStore: rebuildSliceMs must be >= 0, got ${this.opts.rebuildSliceMs}`);
    }
    if (!(this.opts.compactDeletedRatio > 0 && this.opts.compactDeletedRatio <= 1)) {
      throw new Error(`HnswVectorStore: compactDeletedRatio must be in (0, 1], got ${this.opts.compactDeletedRatio}`);
    }
    for (const cap of ["maxResidentVectors", "maxResidentTenants", "splitKindsAt", "rebuildInBackgroundAt"] as const) {
      const v = this.opts[cap];
      if (!(Number.isInteger(v) && v >= 1))
        throw new Error(`HnswVectorStore: ${cap} must be a whole number >= 1, got ${v}`);
    }
    migrate(db, "vectors", VECTOR_MIGRATIONS);
    mkdirSync(this.dir, { recursive: true });
    const row = db.prepare<[], { value: string }>("SELECT value FROM vector_meta WHERE key = 'dimension'").get();
    this.dim = row ? Number(row.value) : undefined;
  }

  /** A store with its own handle on `<dataDir>/memory.db`, closed by close(). */
  static open(dataDir: string, options: Omit<HnswVectorStoreOptions, "ownsDb"> = {}): HnswVectorStore {
    return new HnswVectorStore(openSqlite(dataDir), dataDir, { ...options, ownsDb: true });
  }

  /** What is in memory now: tenant indexes and the points they hold. */
  get resident(): { tenants: number; vectors: number } {
    return { tenants: this.indexes.size, vectors: this.residentVectors };
  }

  /** The residency caps in force. */
  get residencyCaps(): { vectors: number; tenants: number } {
    return { vectors: this.opts.maxResidentVectors, tenants: this.opts.maxResidentTenants };
  }

  /** The store's vector dimension, undefined before the first write. */
  get dimension(): number | undefined {
    return this.dim;
  }

  private check(): void {
    if (this.closed) throw new Error("HnswVectorStore is closed");
  }

  private fileOf(tenant: string): string {
    return hnswFileOf(this.dir, tenant);
  }

  /** The files of a layout's graphs, by kind ("all": the one graph of every point). */
  private filesOf(tenant: string, split: boolean): Map<VectorKind | "all", string> {
    return split
      ? new Map(KINDS.map((k) => [k, hnswKindFileOf(this.dir, tenant, k)]))
      : new Map([["all", this.fileOf(tenant)]]);
  }

  /** Every index file a tenant may have, of either layout. */
  private allFilesOf(tenant: string): string[] {
    return [...this.filesOf(tenant, false).values(), ...this.filesOf(tenant, true).values()];
  }

  /** Removes the tenant's files of the layout it does not have (left from before its graphs were built again). */
  private removeOtherLayout(tenant: string, split: boolean): void {
    for (const file of this.filesOf(tenant, !split).values()) rmSync(file, { force: true });
  }

  private ensureDimension(n: number): number {
    if (this.dim === n) return n;
    if (this.dim !== undefined) {
      const any = this.db.prepare("SELECT 1 FROM vectors LIMIT 1").get();
      if (any) {
        throw new Error(
          `HnswVectorStore: vector dimension ${n} does not match the store's dimension ${this.dim} ` +
            "(set by the first vectors written; a different embedder needs a new data folder)",
        );
      }
      for (const t of this.indexes.values()) {
        t.rebuilding = undefined;
        delete t.graphless;
        t.parts = { split: false, all: this.newIndex(n, this.opts.initialCapacity) };
        t.block = new VectorBlock(n);
        this.weigh(t);
      }
    }
    this.db
      .prepare(
        "INSERT INTO vector_meta (key, value) VALUES ('dimension', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      )
      .run(String(n));
    this.dim = n;
    return n;
  }

  /** An empty graph with room for `count` points and a quarter more. */
  private graphFor(count: number): HierarchicalNSW {
    return this.newIndex(this.dim as number, Math.max(this.opts.initialCapacity, Math.ceil(count * 1.25)));
  }

  private newIndex(dim: number, capacity: number): HierarchicalNSW {
    const index = new hnswlib.HierarchicalNSW("cosine", dim);
    index.initIndex({
      maxElements: Math.max(1, capacity),
      m: this.opts.m,
      efConstruction: this.opts.efConstruction,
      randomSeed: this.opts.seed,
      allowReplaceDeleted: true,
    });
    return index;
  }

  /**
   * Runs `use` with the tenant held: however the caps press, its index is not evicted before `use`
   * ends (a promise: when it settles). Every store call that uses an index holds its tenant. The
   * calls are synchronous from their load to their last use of the index today, so only the
   * tenant's own loads and growth could evict it, and makeRoom spares that one anyway; the hold
   * keeps that true should a call ever await in between.
   */
  private hold<T>(tenant: string, use: () => T): T {
    this.held.set(tenant, (this.held.get(tenant) ?? 0) + 1);
    const release = (): void => {
      const n = (this.held.get(tenant) ?? 1) - 1;
      if (n > 0) this.held.set(tenant, n);
      else this.held.delete(tenant);
    };
    let result: T;
    try {
      result = use();
    } catch (err) {
      release();
      throw err;
    }
    if (result instanceof Promise) return result.finally(release) as T;
    release();
    return result;
  }

  /** Brings residentVectors up to date with the points the tenant's index holds now. */
  private weigh(t: TenantIndex): void {
    // A rebuild under way holds its graphs' points too: the tenant's memory about doubles meanwhile.
    // A graphless tenant holds its points in its vector block alone until its graphs are in.
    const job = t.rebuilding?.parts;
    const now = (t.graphless ? t.entries.size : heldPoints(t.parts)) + (job ? heldPoints(job) : 0);
    this.residentVectors += now - t.weight;
    t.weight = now;
  }

  /** Drops a tenant's index from memory without writing it (its file or SQLite has the truth). */
  private forget(tenant: string): void {
    const t = this.indexes.get(tenant);
    if (!t) return;
    this.indexes.delete(tenant);
    this.residentVectors -= t.weight;
  }

  /**
   * Evicts least recently used indexes, never `keep` nor a held tenant, until `keep` with
   * `incoming` more points fits the caps (or nothing else is left to evict: a tenant larger than
   * the cap stays alone). A changed index is written to its file first, as flush() writes it, so
   * that its next load reads the file instead of rebuilding it.
   */
  private makeRoom(keep: string, incoming: number): void {
    const caps = this.opts;
    const fits = (): boolean =>
      this.indexes.size + (this.indexes.has(keep) ? 0 : 1) <= caps.maxResidentTenants &&
      this.residentVectors + incoming <= caps.maxResidentVectors;
    if (fits()) return;
    for (const [tenant, t] of this.indexes) {
      if (fits()) return;
      // Nor one being rebuilt: evicted, its rebuild would be lost and start over. A graphless
      // tenant whose build has not started yet goes (its file is behind anyway; nothing is lost).
      const unstarted = t.graphless && t.rebuilding?.parts === undefined;
      if (tenant === keep || this.held.has(tenant) || (t.rebuilding && !unstarted)) continue;
      if (t.dirty && !t.graphless) {
        const meta = this.tenantRow(tenant);
        if (meta) {
          try {
            this.writeIndex(tenant, t, meta.version);
            this.residency.evictionWrites++;
          } catch {
            // Not written: its file stays behind the tenant's write version, so the next load
            // rebuilds the index from SQLite (the truth) instead of reading the file.
            for (const file of this.allFilesOf(tenant)) rmSync(`${file}.tmp`, { force: true });
          }
        }
      }
      this.forget(tenant);
      this.residency.evictions++;
    }
  }

  /** The tenant's in-memory index: cached, else read from its file when current, else rebuilt from SQLite. */
  private load(tenant: string): TenantIndex | undefined {
    const cached = this.indexes.get(tenant);
    if (cached) {
      // Most recently used goes last (Map keeps insertion order): makeRoom evicts from the front.
      this.indexes.delete(tenant);
      this.indexes.set(tenant, cached);
      return cached;
    }
    const started = performance.now();
    const count = this.db
      .prepare<[string], { n: number }>("SELECT COUNT(*) AS n FROM vectors WHERE tenant = ?")
      .get(tenant)?.n;
    if (!count || this.dim === undefined) return undefined;
    this.makeRoom(tenant, count);
    const entries = new Map<number, Entry>();
    const labels = new Map<string, number>();
    const block = new VectorBlock(this.dim, count);
    // Rows one at a time, each copied into the block as it comes (iterate, not all): a row's
    // blob Buffer dies young instead of all of the tenant's (~33 MB for 22K points) staying alive
    // until the last row is read, which cost old-generation collections. The filler gives the
    // state a block.put of each row in this order gives (memoised posting keys, inverse norms
    // four at a time).
    const fill = block.filler();
    const rows = this.db
      .prepare<[string], { id: string; label: number; payload: string; vector: Buffer }>(
        "SELECT id, label, payload, vector FROM vectors WHERE tenant = ?",
      )
      .iterate(tenant);
    for (const r of rows) {
      const payload = JSON.parse(r.payload) as VectorPayload;
      entries.set(r.label, { id: r.id, payload });
      labels.set(r.id, r.label);
      // A view where it can be: the filler copies the vector into the block.
      const v = vectorOfBlob(r.vector);
      if (v.length !== this.dim) {
        throw new Error(
          `HnswVectorStore: stored vector of tenant ${tenant} has dimension ${v.length}, expected ${this.dim}`,
        );
      }
      fill.put(r.label, v, payload);
    }
    fill.done();
    // The files of either layout when current: a tenant whose size now calls for the other layout
    // changes at its next write or rebuild, not on a read's path (see IndexParts).
    const split = entries.size >= this.opts.splitKindsAt;
    const read = this.readFiles(tenant, entries, [split, !split]);
    // No current file (a crash since the last flush): a large tenant's graphs are built in the
    // background, its searches exact meanwhile; a rebuild on this call held the event loop for
    // 3.1-3.8 s per 22K-point tenant of the 100K store, at the first query after a restart.
    const background = !read && entries.size >= this.opts.rebuildInBackgroundAt && !this.loadFailed.delete(tenant);
    const built = read ?? (background ? this.standIn() : this.rebuildFromTable(tenant, entries, split));
    const t: TenantIndex = {
      parts: built.parts,
      entries,
      labels,
      dirty: built.dirty,
      scrubbed: new Set(),
      block,
      weight: 0,
      ...(background ? { graphless: true as const } : {}),
    };
    this.indexes.set(tenant, t);
    if (background) this.startRebuild(tenant, t, "load", split);
    this.weigh(t);
    this.residency.loads++;
    this.residency.loadedVectors += entries.size;
    this.residency.loadMs += performance.now() - started;
    return t;
  }

  /**
   * The graphs of the first of these layouts (split or not) whose files hold every live point,
   * when the files reflect the tenant's current write version.
   */
  private readFiles(
    tenant: string,
    entries: ReadonlyMap<number, Entry>,
    layouts: readonly boolean[],
  ): { parts: IndexParts; dirty: boolean } | undefined {
    const meta = this.tenantRow(tenant);
    if (!meta || meta.version !== meta.flushed_version || this.dim === undefined) return undefined;
    for (const split of layouts) {
      const files = this.filesOf(tenant, split);
      if (!split) {
        const all = this.readGraph(files.get("all") as string, entries, undefined);
        if (all) return { parts: { split: false, all }, dirty: false };
        continue;
      }
      const record = this.readGraph(files.get("record") as string, entries, "record");
      const turn = record && this.readGraph(files.get("turn") as string, entries, "turn");
      if (record && turn) return { parts: { split: true, byKind: { record, turn } }, dirty: false };
    }
    return undefined;
  }

  /**
   * One graph from its file, holding exactly the live points of `kind` (every kind: undefined);
   * points the file holds that are no longer live are marked deleted. Undefined when missing,
   * unreadable or short of a live point.
   */
  private readGraph(
    file: string,
    entries: ReadonlyMap<number, Entry>,
    kind: VectorKind | undefined,
  ): HierarchicalNSW | undefined {
    if (!existsSync(file) || this.dim === undefined) return undefined;
    try {
      const index = new hnswlib.HierarchicalNSW("cosine", this.dim);
      index.readIndexSync(file, true);
      if (index.getNumDimensions() !== this.dim) return undefined;
      const ids = index.getIdsList();
      const inFile = new Set(ids);
      const live = (label: number): boolean => {
        const e = entries.get(label);
        return e !== undefined && (kind === undefined || e.payload.kind === kind);
      };
      let expected = 0;
      for (const [label, e] of entries) {
        if (kind !== undefined && e.payload.kind !== kind) continue;
        if (!inFile.has(label)) return undefined;
        expected++;
      }
      let stale = 0;
      for (const label of ids) {
        if (live(label)) continue;
        stale++;
        try {
          index.markDelete(label);
        } catch {
          // already marked deleted in the file
        }
      }
      if (ids.length - stale !== expected) return undefined;
      return index;
    } catch {
      return undefined;
    }
  }

  /** An empty graph standing in for a graphless tenant's (TenantIndex.graphless); never written. */
  private standIn(): { parts: IndexParts; dirty: boolean } {
    return { parts: { split: false, all: this.newIndex(this.dim as number, 1) }, dirty: true };
  }

  private rebuildFromTable(
    tenant: string,
    entries: ReadonlyMap<number, Entry>,
    split: boolean,
  ): { parts: IndexParts; dirty: boolean } {
    this.rebuilds++;
    return { parts: this.buildParts(tenant, entries, split), dirty: true };
  }

  /** Fresh graphs of the tenant's rows of the `vectors` table, in the layout asked. */
  private buildParts(tenant: string, entries: ReadonlyMap<number, Entry>, split: boolean): IndexParts {
    if (!split) return { split: false, all: this.buildFromTable(tenant, entries.size) };
    const counts = countKinds(entries.values());
    return {
      split: true,
      byKind: {
        record: this.buildFromTable(tenant, counts.record, "record"),
        turn: this.buildFromTable(tenant, counts.turn, "turn"),
      },
    };
  }

  /** A fresh graph holding the tenant's rows of the `vectors` table (of one kind, when given). */
  private buildFromTable(tenant: string, count: number, kind?: VectorKind): HierarchicalNSW {
    const dim = this.dim as number;
    const index = this.graphFor(count);
    const rows =
      kind === undefined
        ? this.db
            .prepare<[string], { label: number; vector: Buffer }>("SELECT label, vector FROM vectors WHERE tenant = ?")
            .iterate(tenant)
        : this.db
            .prepare<[string, string], { label: number; vector: Buffer }>(
              "SELECT label, vector FROM vectors WHERE tenant = ? AND kind = ?",
            )
            .iterate(tenant, kind);
    for (const r of rows) {
      const v = vectorOfBlob(r.vector);
      if (v.length !== dim)
        throw new Error(
          `HnswVectorStore: stored vector of tenant ${tenant} has dimension ${v.length}, expected ${dim}`,
        );
      index.addPoint(Array.from(v), r.label);
    }
    return index;
  }

  private tenantRow(tenant: string): TenantRow | undefined {
    return this.db
      .prepare<[string], TenantRow>("SELECT next_label, version, flushed_version FROM vector_tenants WHERE tenant = ?")
      .get(tenant);
  }

  async upsert(tenant: string, items: readonly VectorItem[]): Promise<void> {
    this.check();
    if (items.length === 0) return;
    this.hold(tenant, () => this.upsertHeld(tenant, items));
  }

  private upsertHeld(tenant: string, items: readonly VectorItem[]): void {
    const first = items[0] as VectorItem;
    for (const item of items) {
      if (item.payload.tenant !== tenant) {
        throw new Error(
          `HnswVectorStore: item ${item.id} has payload tenant "${item.payload.tenant}", upsert is for "${tenant}"`,
        );
      }
      checkVector(item.vector, `vector of ${item.id}`);
      if (item.second) checkVector(item.second, `second-opinion vector of ${item.id}`);
      if (item.vector.length !== first.vector.length) {
        throw new Error(
          `HnswVectorStore: vectors of one upsert differ in dimension (${first.vector.length} and ${item.vector.length})`,
        );
      }
    }
    const dim = this.ensureDimension(first.vector.length);
    const existing = this.load(tenant);
    const getLabel = this.db.prepare<[string, string], { label: number }>(
      "SELECT label FROM vectors WHERE tenant = ? AND id = ?",
    );
    const put = this.db.prepare<[string, string, number, string, string, string, Buffer, Buffer | null]>(
      `INSERT INTO vectors (tenant, id, label, kind, conversation, payload, vector, second) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (tenant, id) DO UPDATE SET kind = excluded.kind, conversation = excluded.conversation,
         payload = excluded.payload, vector = excluded.vector, second = excluded.second`,
    );
    const planned = this.db.transaction(() => {
      this.db
        .prepare(
          "INSERT INTO vector_tenants (tenant, next_label, version, flushed_version) VALUES (?, 0, 0, -1) ON CONFLICT DO NOTHING",
        )
        .run(tenant);
      let next = (this.tenantRow(tenant) as TenantRow).next_label;
      const out: { label: number; item: VectorItem }[] = [];
      for (const item of items) {
        const label = getLabel.get(tenant, item.id)?.label ?? next++;
        put.run(
          tenant,
          item.id,
          label,
          item.payload.kind,
          item.payload.conversation,
          JSON.stringify(item.payload),
          toBlob(item.vector),
          item.second ? toBlob(item.second) : null,
        );
        out.push({ label, item });
      }
      this.db
        .prepare("UPDATE vector_tenants SET next_label = ?, version = version + 1 WHERE tenant = ?")
        .run(next, tenant);
      return out;
    })();
    // SQLite holds the truth now; bring the in-memory index up to date (or drop it, so that it is rebuilt).
    // The growth may push other tenants out (never this one: it is held).
    this.makeRoom(tenant, planned.length);
    // One entry per label, the last written (SQLite holds the last too): an id given twice in a
    // batch with two kinds would otherwise be added to both graphs of a split tenant.
    const applied = [...new Map(planned.map((p) => [p.label, p])).values()];
    // A point that changes kind in a tenant split by kind would move between graphs: rare (ids of
    // records and of raw turns differ), so the tenant's graphs are rebuilt from SQLite, which has
    // the truth, at their next use.
    if (existing?.parts.split && changesKind(existing, applied)) {
      this.forget(tenant);
      return;
    }
    const t: TenantIndex = existing ?? {
      // A new tenant's layout by what its first write brings.
      parts:
        applied.length >= this.opts.splitKindsAt
          ? {
              split: true,
              byKind: {
                record: this.newIndex(dim, this.opts.initialCapacity),
                turn: this.newIndex(dim, this.opts.initialCapacity),
              },
            }
          : { split: false, all: this.newIndex(dim, this.opts.initialCapacity) },
      entries: new Map(),
      labels: new Map(),
      dirty: true,
      scrubbed: new Set(),
      block: new VectorBlock(dim),
      weight: 0,
    };
    this.indexes.set(tenant, t);
    try {
      // Grown to splitKindsAt by this write: the graph per kind from now on. A small tenant's are
      // built here from SQLite (as a compaction is) after the batch, which the one graph is not
      // given first; a larger one's in the background (startRebuild), the one graph serving meanwhile.
      const fresh = applied.filter(({ label }) => !t.entries.has(label)).length;
      // A graphless tenant's points go to the block and to the job building its graphs alone.
      const graphs = t.graphless === undefined;
      const reached = graphs && !t.parts.split && t.entries.size + fresh >= this.opts.splitKindsAt;
      const splitting = reached && t.entries.size + fresh < this.opts.rebuildInBackgroundAt;
      // A point changing kind could sit in two of the new graphs: the rebuild starts over.
      if (t.rebuilding && changesKind(t, applied)) this.dropRebuild(t);
      const intoGraphs = graphs && !splitting;
      if (intoGraphs)
        for (const graph of graphsOf(t.parts))
          ensureRoom(graph, applied.filter(({ item }) => graphOf(t.parts, item.payload.kind) === graph).length);
      for (const { label, item } of applied) {
        if (intoGraphs) {
          const graph = graphOf(t.parts, item.payload.kind);
          if (t.entries.has(label)) graph.addPoint(Array.from(item.vector), label);
          else graph.addPoint(Array.from(item.vector), label, true);
        }
        const payload = structuredClone(item.payload);
        t.entries.set(label, { id: item.id, payload });
        t.labels.set(item.id, label);
        t.block.put(label, item.vector, payload);
      }
      if (t.rebuilding) this.mirrorIntoRebuild(t.rebuilding, applied);
      if (splitting) {
        this.replaceParts(t, this.buildParts(tenant, t.entries, true));
        this.rebuilds++;
      } else if (!graphs) this.keepBuilding(tenant, t);
      else if (reached && !t.rebuilding) this.startRebuild(tenant, t, "split", true);
      // A compaction dropped by a change of kind starts again.
      else if (!t.rebuilding && this.compactionDue(t)) this.compact(tenant, t);
      t.dirty = true;
      this.weigh(t);
    } catch (err) {
      this.forget(tenant);
      throw err;
    }
  }

  async search(tenant: string, vector: Float32Array, k: number, filter?: VectorFilter): Promise<VectorHit[]> {
    this.check();
    const limit = Math.floor(k);
    if (!(limit > 0)) return [];
    return this.hold(tenant, () => this.searchHeld(tenant, vector, limit, filter));
  }

  private searchHeld(tenant: string, vector: Float32Array, limit: number, filter?: VectorFilter): VectorHit[] {
    const t = this.load(tenant);
    if (!t || t.entries.size === 0) return [];
    if (vector.length !== this.dim) {
      throw new Error(
        `HnswVectorStore: query vector has dimension ${vector.length}, the store holds dimension ${this.dim}`,
      );
    }
    checkVector(vector, "query vector");
    const query = unitQuery(vector);
    const predicate = compileFilter(filter);
    let found: { label: number; score: number }[];
    if (t.graphless) {
      // Its graphs are being built: every admissible point scored, exact (a few ms per 20K points).
      const slots = t.block.admissible(filter, predicate ?? (() => true));
      found = t.block.topK(query, slots, Math.min(limit, slots.length));
    } else if (!predicate) {
      found = this.searchGraphs(t, undefined, query, limit, undefined, 1);
    } else {
      // The filter's candidates (VectorBlock.source: its smallest posting list) bound what it
      // admits without visiting the rest of the tenant; past the exact limit the HNSW walk checks
      // the filter per visited point instead.
      const source = t.block.source(filter);
      if (source.bound === 0) return [];
      const limitOfScan = this.opts.bruteForceLimit * (source.complete ? 1 : ADMISSIBLE_SCAN_FACTOR);
      const slots = source.bound <= limitOfScan ? t.block.admissibleFrom(source, predicate) : undefined;
      if (slots && slots.length === 0) return [];
      if (slots && slots.length <= this.opts.bruteForceLimit) {
        // Few admissible items: exact scores (a restrictive filter would starve the HNSW walk).
        found = t.block.topK(query, slots, Math.min(limit, slots.length));
      } else {
        const allowed = source.complete
          ? VectorBlock.member(source)
          : (label: number): boolean => {
              const p = t.block.payloadOf(label);
              return p !== undefined && predicate(p);
            };
        const kk = Math.min(limit, slots ? slots.length : source.bound);
        // In a kind's own graph a filter of the kind alone needs no check per visited point.
        const kindOnly = filter?.kind !== undefined && compileFilter({ ...filter, kind: undefined }) === undefined;
        found =
          t.parts.split && filter?.kind !== undefined && kindOnly
            ? this.searchGraphs(t, filter.kind, query, kk, undefined, KIND_GRAPH_EF_FACTOR)
            : this.searchGraphs(t, filter?.kind, query, kk, allowed, 2, slots && this.kindCounts(t, slots));
      }
    }
    const hits: VectorHit[] = [];
    for (const f of found) {
      const e = t.entries.get(f.label);
      if (e) hits.push({ id: e.id, score: f.score, payload: copyPayload(e.payload) });
    }
    hits.sort((a, b) => b.score - a.score);
    return hits;
  }

  /**
   * The best `limit` points of the graphs holding `kind` (every graph: undefined), each searched
   * with ef = max(efSearch, efFactor × its k), `allowed` checked per visited point when given; the
   * lists of two graphs merged by score. A graph is asked for no more points than it holds live.
   */
  private searchGraphs(
    t: TenantIndex,
    kind: VectorKind | undefined,
    query: Float64Array,
    limit: number,
    allowed: ((label: number) => boolean) | undefined,
    efFactor: number,
    admitted?: Readonly<Record<VectorKind, number>>,
  ): { label: number; score: number }[] {
    const parts = t.parts;
    // Each graph searched with the kind it holds (undefined: every kind).
    const graphs: [HierarchicalNSW, VectorKind | undefined][] = !parts.split
      ? [[parts.all, undefined]]
      : (kind === undefined ? KINDS : [kind]).map((k) => [parts.byKind[k], k]);
    const point = Array.from(query);
    const found: { label: number; score: number }[] = [];
    for (const [graph, graphKind] of graphs) {
      const live = graphKind === undefined ? t.entries.size : t.block.source({ kind: graphKind }).bound;
      // A graph asked for more than its filter admits is walked whole (hnswlib's filtered walk ends
      // when it holds k): where the admitted items are known, their count per kind bounds k.
      const kk = Math.min(limit, live, graphKind !== undefined && admitted ? admitted[graphKind] : limit);
      if (kk <= 0) continue;
      graph.setEf(Math.max(this.opts.efSearch, kk * efFactor));
      const r = allowed ? graph.searchKnn(point, kk, allowed) : graph.searchKnn(point, kk);
      for (const [i, label] of r.neighbors.entries()) found.push({ label, score: 1 - (r.distances[i] as number) });
    }
    if (graphs.length === 1) return found;
    return found.sort((a, b) => b.score - a.score || a.label - b.label).slice(0, limit);
  }

  /** How many of these block slots hold each kind (for searchGraphs' bound per graph). */
  private kindCounts(t: TenantIndex, slots: Int32Array): Record<VectorKind, number> {
    const counts: Record<VectorKind, number> = { record: 0, turn: 0 };
    if (!t.parts.split) return counts;
    for (const slot of slots) {
      const kind = t.block.payloadOf(t.block.labelAt(slot))?.kind;
      if (kind !== undefined) counts[kind]++;
    }
    return counts;
  }

  /** Items in the order asked (first occurrence), from SQLite; unknown ids are skipped. */
  async get(tenant: string, ids: readonly string[]): Promise<VectorItem[]> {
    this.check();
    if (ids.length === 0) return [];
    const wanted = [...new Set(ids)];
    const rows = this.db
      .prepare<[string, string], { id: string; payload: string; vector: Buffer; second: Buffer | null }>(
        "SELECT id, payload, vector, second FROM vectors WHERE tenant = ? AND id IN (SELECT value FROM json_each(?))",
      )
      .all(tenant, JSON.stringify(wanted));
    const byId = new Map(rows.map((r) => [r.id, r]));
    const out: VectorItem[] = [];
    for (const id of wanted) {
      const r = byId.get(id);
      if (!r) continue;
      const item: VectorItem = { id, vector: vectorOfBlob(r.vector), payload: JSON.parse(r.payload) as VectorPayload };
      if (r.second) item.second = vectorOfBlob(r.second);
      out.push(item);
    }
    return out;
  }

  /** The second-opinion vectors of these ids, from SQLite (only a query's candidates ask: ~80 ids). */
  async getSecondVectors(tenant: string, ids: readonly string[]): Promise<ReadonlyMap<string, Float32Array>> {
    this.check();
    const out = new Map<string, Float32Array>();
    if (ids.length === 0) return out;
    const rows = this.db
      .prepare<[string, string], { id: string; second: Buffer }>(
        "SELECT id, second FROM vectors WHERE tenant = ? AND second IS NOT NULL AND id IN (SELECT value FROM json_each(?))",
      )
      .all(tenant, JSON.stringify([...new Set(ids)]));
    for (const r of rows) out.set(r.id, vectorOfBlob(r.second));
    return out;
  }

  /** A page of the ids without a second-opinion vector, by the (tenant, id) key: no index of its own. */
  async idsWithoutSecond(tenant: string, after: string | undefined, limit: number): Promise<string[]> {
    this.check();
    return this.db
      .prepare<[string, string, number], { id: string }>(
        "SELECT id FROM vectors WHERE tenant = ? AND id > ? AND second IS NULL ORDER BY id LIMIT ?",
      )
      .all(tenant, after ?? "", limit)
      .map((r) => r.id);
  }

  /**
   * An UPDATE of the rows alone: no index, label or payload changes, so the tenant's index and its
   * file stay as they are, and a row deleted meanwhile is not written back.
   */
  async setSecondVectors(tenant: string, vectors: ReadonlyMap<string, Float32Array>): Promise<number> {
    this.check();
    for (const [id, v] of vectors) checkVector(v, `second-opinion vector of ${id}`);
    const set = this.db.prepare<[Buffer, string, string]>("UPDATE vectors SET second = ? WHERE tenant = ? AND id = ?");
    return this.db.transaction(() => {
      let n = 0;
      for (const [id, v] of vectors) n += set.run(toBlob(v), tenant, id).changes;
      return n;
    })();
  }

  /** The tenants holding any item, in byte order (SQLite's BINARY collation compares UTF-8 bytes). */
  async tenantsNamed(prefix: string): Promise<string[]> {
    this.check();
    return this.db
      .prepare<[string, string], { tenant: string }>(
        `SELECT tenant FROM vector_tenants t WHERE substr(tenant, 1, length(?)) = ?
           AND EXISTS (SELECT 1 FROM vectors v WHERE v.tenant = t.tenant) ORDER BY tenant`,
      )
      .all(prefix, prefix)
      .map((r) => r.tenant);
  }

  /**
   * The vectors alone, as get() reads them (the payload's JSON is not parsed): from the tenant's
   * resident block when its index is in memory (a copy of each vector as stored; a SQLite read was
   * ~3.5 µs an id, the largest store cost of a tenant-wide query's reranks), else from SQLite. A
   * resident index is this process's own copy of the table (every write goes through it), so an id
   * it lacks is not in the table either; such ids are still read from SQLite, as before.
   */
  async getVectors(tenant: string, ids: readonly string[]): Promise<ReadonlyMap<string, Float32Array>> {
    this.check();
    const out = new Map<string, Float32Array>();
    if (ids.length === 0) return out;
    const wanted = [...new Set(ids)];
    const t = this.indexes.get(tenant);
    if (!t) return this.readVectors(tenant, wanted, out);
    const found: string[] = [];
    const slots: number[] = [];
    const missing: string[] = [];
    for (const id of wanted) {
      const label = t.labels.get(id);
      const slot = label === undefined ? -1 : t.block.slotOfLabel(label);
      if (slot < 0) missing.push(id);
      else {
        found.push(id);
        slots.push(slot);
      }
    }
    const copies = t.block.copiesOf(slots);
    for (const [j, id] of found.entries()) out.set(id, copies[j] as Float32Array);
    return missing.length > 0 ? this.readVectors(tenant, missing, out) : out;
  }

  /** Adds the stored vectors of these (distinct) ids to `out`, read from SQLite. */
  private readVectors(
    tenant: string,
    ids: readonly string[],
    out: Map<string, Float32Array>,
  ): Map<string, Float32Array> {
    const rows = this.db
      .prepare<[string, string], { id: string; vector: Buffer }>(
        "SELECT id, vector FROM vectors WHERE tenant = ? AND id IN (SELECT value FROM json_each(?))",
      )
      .all(tenant, JSON.stringify(ids));
    for (const r of rows) out.set(r.id, vectorOfBlob(r.vector));
    return out;
  }

  async delete(tenant: string, ids: readonly string[]): Promise<void> {
    this.check();
    if (ids.length === 0) return;
    this.hold(tenant, () => this.deleteHeld(tenant, ids));
  }

  private deleteHeld(tenant: string, ids: readonly string[]): void {
    const t = this.load(tenant);
    const del = this.db.prepare<[string, string], { label: number }>(
      "DELETE FROM vectors WHERE tenant = ? AND id = ? RETURNING label",
    );
    const removed = this.db.transaction(() => {
      const labels: number[] = [];
      for (const id of new Set(ids)) {
        const r = del.get(tenant, id);
        if (r) labels.push(r.label);
      }
      if (labels.length > 0) {
        this.db.prepare("UPDATE vector_tenants SET version = version + 1 WHERE tenant = ?").run(tenant);
      }
      return labels;
    })();
    if (!t || removed.length === 0) return;
    // A rebuild under way goes on: what it holds already is deleted there too (its rows are gone
    // from SQLite, so it reads no other), and a purge zeroes them once its graphs are in. Dropped
    // and started again instead, a rebuild never finished under a steady trickle of deletes (an
    // erasure's records and raw turns are deleted by two consumers), nor did a purge waiting on it.
    const job = t.rebuilding;
    try {
      for (const label of removed) {
        const e = t.entries.get(label);
        if (!e) continue;
        if (!t.graphless) graphOf(t.parts, e.payload.kind).markDelete(label);
        if (job?.parts && job.added.has(label)) graphOf(job.parts, e.payload.kind).markDelete(label);
        t.entries.delete(label);
        t.labels.delete(e.id);
        t.block.remove(label);
      }
      t.dirty = true;
      // A graphless tenant weighs its live points (weigh); others keep the deleted ones until compacted.
      this.weigh(t);
      if (!t.rebuilding && this.compactionDue(t)) this.compact(tenant, t);
    } catch (err) {
      this.forget(tenant);
      throw err;
    }
  }

  /**
   * New graphs for a tenant (a split, a compaction): nothing deleted in them is scrubbed yet, a
   * rebuild under way is moot, and they are written at the next flush.
   */
  private replaceParts(t: TenantIndex, parts: IndexParts): void {
    t.rebuilding = undefined;
    delete t.graphless;
    t.parts = parts;
    t.scrubbed.clear();
    t.dirty = true;
    this.weigh(t);
  }

  /** A graphless tenant's graphs built again after their job was dropped: it has no others. */
  private keepBuilding(tenant: string, t: TenantIndex): RebuildJob {
    return t.rebuilding ?? this.startRebuild(tenant, t, "load", t.entries.size >= this.opts.splitKindsAt);
  }

  /** Drops a rebuild under way (its graphs no longer count for the tenant's memory). */
  private dropRebuild(t: TenantIndex): void {
    if (!t.rebuilding) return;
    t.rebuilding = undefined;
    this.weigh(t);
  }

  /**
   * Builds new graphs for a tenant in the background: filled from SQLite a slice at a time between
   * turns of the event loop, while its graphs keep answering and writes go to both
   * (mirrorIntoRebuild); the last slice swaps them in. A delete marks its points deleted in the
   * new graphs too (a purge waits for them, then zeroes those). A point changing kind drops the job
   * (it could sit in two graphs): a split starts again at the next write, a compaction when next
   * due, a graphless tenant's at once. A close ends it; a tenant being rebuilt is not evicted.
   */
  private startRebuild(tenant: string, t: TenantIndex, why: RebuildJob["why"], split: boolean): RebuildJob {
    let settle = (): void => {};
    const job: RebuildJob = { why, split, added: new Set(), ended: new Promise<void>((resolve) => (settle = resolve)) };
    t.rebuilding = job;
    const run = this.runRebuild(tenant, t, job).catch((err: unknown) => {
      // Not swapped in: the tenant's graphs stay, and the next write or purge tries again.
      job.failed = err;
      if (this.indexes.get(tenant) !== t || t.rebuilding !== job) return;
      if (!t.graphless) this.dropRebuild(t);
      else {
        // No graphs to fall back on: the next use loads the tenant again and builds them itself.
        this.loadFailed.add(tenant);
        this.forget(tenant);
      }
    });
    this.rebuildsUnderWay.add(run);
    void run.finally(() => {
      this.rebuildsUnderWay.delete(run);
      settle();
    });
    return job;
  }

  /** A write's points, in the graphs of the rebuild under way too (the tenant's have them already). */
  private mirrorIntoRebuild(job: RebuildJob, applied: readonly { label: number; item: VectorItem }[]): void {
    // Not started yet: it reads them from SQLite, as written now.
    const parts = job.parts;
    if (!parts) return;
    for (const { label, item } of applied) {
      const graph = graphOf(parts, item.payload.kind);
      // A label already there gets its new vector, in its own slot.
      ensureRoom(graph, job.added.has(label) ? 0 : 1);
      graph.addPoint(Array.from(item.vector), label);
      job.added.add(label);
    }
  }

  private async runRebuild(tenant: string, t: TenantIndex, job: RebuildJob): Promise<void> {
    const page = this.db.prepare<[string, number, number], { label: number; kind: VectorKind; vector: Buffer }>(
      "SELECT label, kind, vector FROM vectors WHERE tenant = ? AND label > ? ORDER BY label LIMIT ?",
    );
    const PAGE = 64;
    let rows: { label: number; kind: VectorKind; vector: Buffer }[] = [];
    let at = 0;
    let after = -1;
    let last = false;
    let parts: IndexParts | undefined;
    const busy = await this.inSlices(
      () => !this.closed && this.indexes.get(tenant) === t && t.rebuilding === job,
      () => {
        if (!parts) {
          // Its turn has come: its graphs, sized for the tenant's points now.
          const counts = countKinds(t.entries.values());
          parts = job.split
            ? { split: true, byKind: { record: this.graphFor(counts.record), turn: this.graphFor(counts.turn) } }
            : { split: false, all: this.graphFor(t.entries.size) };
          job.parts = parts;
        }
        if (at === rows.length) {
          if (last) return false;
          rows = page.all(tenant, after, PAGE);
          at = 0;
          last = rows.length < PAGE;
          if (rows.length === 0) return false;
        }
        const r = rows[at++] as (typeof rows)[number];
        // Written since the job started: mirrored already, with its latest vector. Deleted since
        // the page was read: left out.
        if (!job.added.has(r.label) && t.entries.has(r.label)) {
          const graph = graphOf(parts, r.kind);
          ensureRoom(graph, 1);
          graph.addPoint(Array.from(vectorOfBlob(r.vector)), r.label);
          job.added.add(r.label);
        }
        after = r.label;
        return !(last && at === rows.length);
      },
      () => {
        this.weigh(t);
        this.makeRoom(tenant, 0);
      },
    );
    if (busy === undefined || !parts) return;
    // Every live point is in: read from SQLite, or mirrored by a write since.
    this.replaceParts(t, parts);
    if (job.why !== "compaction") this.rebuilds++;
    else {
      this.compactions.count++;
      this.compactions.ms += busy;
    }
    // Points deleted while it ran are marked deleted in the new graphs: enough of them, and they
    // are compacted in turn. Its own graphs are in whatever that does: a failure is not its.
    try {
      if (this.compactionDue(t)) this.compact(tenant, t);
    } catch {
      // The graphs just swapped in stay; the next delete or purge compacts them.
    }
  }

  /**
   * Runs `step` until it returns false, at most rebuildSliceMs at a time (one step at least) between
   * turns of the event loop, `afterSlice` after each slice, while `current()` holds. Resolves to the
   * time the steps took in all when they ran to the end, undefined when stopped. One such run at a
   * time in the store, the others waiting their turn: ten tenants rebuilt at once after a restart
   * each took a slice per turn, so a query waited ~100 ms between two turns, and the ten graphs
   * built side by side took longer in all than one after another.
   */
  private inSlices(current: () => boolean, step: () => boolean, afterSlice?: () => void): Promise<number | undefined> {
    const run = this.backgroundTurn.then(() => this.slices(current, step, afterSlice));
    this.backgroundTurn = run.catch(() => undefined);
    return run;
  }

  private async slices(
    current: () => boolean,
    step: () => boolean,
    afterSlice?: () => void,
  ): Promise<number | undefined> {
    let busy = 0;
    for (;;) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (!current()) return undefined;
      const started = performance.now();
      const until = started + this.opts.rebuildSliceMs;
      let more = true;
      // Checked after every step: one insert takes 0.1-0.5 ms, a zeroing a few ms.
      do more = step();
      while (more && performance.now() < until);
      busy += performance.now() - started;
      afterSlice?.();
      if (!more) return busy;
    }
  }

  /** Whether the tenant's deleted points have reached the share at which its graphs are compacted. */
  private compactionDue(t: TenantIndex): boolean {
    return deletedShare(t) >= this.opts.compactDeletedRatio;
  }

  /** The layout a compaction builds: one graph only well below the size that splits. */
  private compactedLayout(t: TenantIndex): boolean {
    // So that a tenant near splitKindsAt is not rebuilt in the other layout at every compaction
    // and the next write.
    return t.entries.size >= (t.parts.split ? this.opts.splitKindsAt / 2 : this.opts.splitKindsAt);
  }

  /**
   * A fresh index of the tenant's live points (read from SQLite, the source of truth), replacing one
   * that still holds deleted points: built here for a small tenant, in the background for a larger
   * one (startRebuild; returned). Written to the file at the next flush.
   */
  private compact(tenant: string, t: TenantIndex): RebuildJob | undefined {
    if (t.entries.size >= this.opts.rebuildInBackgroundAt)
      return this.startRebuild(tenant, t, "compaction", this.compactedLayout(t));
    this.compactHere(tenant, t);
    return undefined;
  }

  /** The deleted points still in the tenant's graphs whose vectors are not zeroed yet. */
  private unscrubbed(t: TenantIndex): { graph: HierarchicalNSW; label: number }[] {
    const out: { graph: HierarchicalNSW; label: number }[] = [];
    for (const graph of graphsOf(t.parts))
      for (const label of graph.getIdsList())
        if (!t.entries.has(label) && !t.scrubbed.has(label)) out.push({ graph, label });
    return out;
  }

  /**
   * Overwrites the vector of every deleted point still in the index with zeros. hnswlib keeps a
   * deleted point (vector and links) until a new point takes its slot, and only updates a live
   * point's vector, hence unmark, update, mark again. For a large tenant, in slices between turns of
   * the event loop (false: stopped because its graphs changed meanwhile). Cheaper than a rebuild
   * while few points are deleted (ZEROING_COST_IN_INSERTS; figures in docs/erasure.md).
   */
  private async scrubDeleted(
    tenant: string,
    t: TenantIndex,
    todo: readonly { graph: HierarchicalNSW; label: number }[],
  ): Promise<boolean> {
    const zeros = new Array<number>(this.dim as number).fill(0);
    const parts = t.parts;
    let next = 0;
    const step = (): boolean => {
      const point = todo[next++];
      if (!point) return false;
      const { graph, label } = point;
      if (!t.entries.has(label) && !t.scrubbed.has(label)) {
        try {
          graph.unmarkDelete(label);
        } catch {
          // A new point took its slot since (allowReplaceDeleted): the vector is overwritten already.
          return next < todo.length;
        }
        graph.addPoint(zeros, label);
        graph.markDelete(label);
        t.scrubbed.add(label);
        t.dirty = true;
      }
      return next < todo.length;
    };
    let busy: number | undefined;
    if (t.entries.size < this.opts.rebuildInBackgroundAt) {
      const started = performance.now();
      while (step());
      busy = performance.now() - started;
    }
    // Not queued behind the rebuilds (inSlices): a purge zeroes while one runs, and rebuilds
    // chained by a trickle of deletes would otherwise keep swapping the graphs it zeroes.
    else busy = await this.slices(() => !this.closed && this.indexes.get(tenant) === t && t.parts === parts, step);
    if (busy === undefined) return false;
    this.scrubs.count++;
    this.scrubs.ms += busy;
    return true;
  }

  /**
   * After an erasure: no deleted vector of the tenant stays in its index, in memory or in its file,
   * whatever compactDeletedRatio says. The index is rebuilt from its live points when its deleted
   * points pass the ratio or would cost more to zero (ZEROING_COST_IN_INSERTS); otherwise their
   * vectors are zeroed in place. A large tenant's is done in the background (its graphs answer
   * meanwhile) and this call waits for it, and for a rebuild already under way. The file is then
   * rewritten (or removed when no live point is left).
   */
  async purgeDeleted(tenant: string): Promise<void> {
    this.check();
    await this.hold(tenant, () => this.purgeDeletedHeld(tenant));
  }

  private async purgeDeletedHeld(tenant: string): Promise<void> {
    // The rebuilds to wait for: the one under way when called (it may have taken a point deleted
    // before), a graphless tenant's build (its only graphs to come, its file behind) and those this
    // purge starts. One started since by a write or a delete reads SQLite, which holds no erased
    // row: the points deleted before are zeroed in the graphs serving meanwhile instead (waiting
    // for each, a trickle of deletes chaining compactions kept the purge waiting).
    const waitFor = new Set<RebuildJob>();
    const under = this.indexes.get(tenant)?.rebuilding;
    if (under) waitFor.add(under);
    // Compactions this purge started: once one fails, the next runs here (and throws what it throws).
    const started = new Set<RebuildJob>();
    let failed = false;
    for (;;) {
      // Closed meanwhile: the erasure did not finish (the caller can repeat it).
      this.check();
      const t = this.load(tenant);
      if (!t || t.entries.size === 0) {
        this.forget(tenant);
        for (const file of this.allFilesOf(tenant)) rmSync(file, { force: true });
        this.removeTempFiles(tenant);
        return;
      }
      try {
        if (t.graphless) waitFor.add(this.keepBuilding(tenant, t));
        const job = t.rebuilding;
        if (job && waitFor.has(job)) {
          // Once its graphs are in (or it is dropped), look again: the points deleted meanwhile
          // are marked deleted in them.
          await job.ended;
          if (job.failed !== undefined && started.has(job)) failed = true;
          continue;
        }
        const todo = this.unscrubbed(t);
        const deleted = todo.length;
        if (deleted === 0) break;
        const rebuild = this.compactionDue(t) || deleted * ZEROING_COST_IN_INSERTS >= t.entries.size;
        // With a rebuild under way (started since), zeroing: a compaction would take its place.
        if (rebuild && !job) {
          if (failed) {
            this.compactHere(tenant, t);
            break;
          }
          const mine = this.compact(tenant, t);
          if (mine) {
            started.add(mine);
            waitFor.add(mine);
          }
          continue;
        }
        if (await this.scrubDeleted(tenant, t, todo)) break;
      } catch (err) {
        // A half-patched index is not trusted: the next use rebuilds it from SQLite.
        this.forget(tenant);
        throw err;
      }
    }
    this.flushSync();
    const t = this.indexes.get(tenant);
    // No file of the other layout may keep an erased vector, written or not this time, nor a
    // temp file a crash left behind between a write and its rename.
    if (t) this.removeOtherLayout(tenant, t.parts.split);
    this.removeTempFiles(tenant);
  }

  /** Removes the temp files of a tenant's index files (writeIndex's, left by a crash before the rename). */
  private removeTempFiles(tenant: string): void {
    for (const file of this.allFilesOf(tenant)) rmSync(`${file}.tmp`, { force: true });
  }

  /** A compaction on the event loop, whatever the tenant's size. */
  private compactHere(tenant: string, t: TenantIndex): void {
    const started = performance.now();
    this.replaceParts(t, this.buildParts(tenant, t.entries, this.compactedLayout(t)));
    this.compactions.count++;
    this.compactions.ms += performance.now() - started;
  }

  /** Erasure of a conversation: every item (record or raw turn) whose payload names it. */
  async deleteConversation(tenant: string, conversation: string): Promise<number> {
    return this.deleteWhere(tenant, " AND conversation = ?", conversation);
  }

  /** Erasure of raw turns alone: every item of kind "turn" of the conversation (or the tenant). */
  async deleteRawTurns(tenant: string, conversation?: string): Promise<number> {
    return conversation === undefined
      ? this.deleteWhere(tenant, " AND kind = 'turn'")
      : this.deleteWhere(tenant, " AND conversation = ? AND kind = 'turn'", conversation);
  }

  /** Deletes the tenant's items whose payload columns match `where` (after the tenant's); returns how many. */
  private async deleteWhere(tenant: string, where: string, ...params: string[]): Promise<number> {
    this.check();
    const ids = this.db
      .prepare<string[], { id: string }>(`SELECT id FROM vectors WHERE tenant = ?${where}`)
      .all(tenant, ...params)
      .map((r) => r.id);
    await this.delete(tenant, ids);
    return ids.length;
  }

  async deleteTenant(tenant: string): Promise<void> {
    this.check();
    this.db.transaction(() => {
      this.db.prepare("DELETE FROM vectors WHERE tenant = ?").run(tenant);
      this.db.prepare("DELETE FROM vector_tenants WHERE tenant = ?").run(tenant);
    })();
    this.forget(tenant);
    this.loadFailed.delete(tenant);
    for (const file of this.allFilesOf(tenant)) rmSync(file, { force: true });
    this.removeTempFiles(tenant);
  }

  async count(tenant: string): Promise<number> {
    this.check();
    return (
      this.db.prepare<[string], { n: number }>("SELECT COUNT(*) AS n FROM vectors WHERE tenant = ?").get(tenant)?.n ?? 0
    );
  }

  /**
   * Writes every changed tenant index to its file and records the write version it reflects, once
   * the background rebuilds under way have ended: a flushed store reads back in the layout its
   * tenants' sizes call for.
   */
  async flush(): Promise<void> {
    this.check();
    if (this.rebuildsUnderWay.size > 0) {
      await this.settled();
      // Closed meanwhile: close() wrote what was changed.
      if (this.closed) return;
    }
    this.flushSync();
  }

  /**
   * Writes the index files of at most `tenants` changed tenants, least recently used first; true
   * while changed ones are left (those being rebuilt are written once their graphs are in). Each
   * file is written on the event loop (~30-60 ms for a 22K-point tenant), hence a few at a time.
   */
  async flushSome(tenants: number): Promise<boolean> {
    this.check();
    return this.writeChanged(tenants, true);
  }

  private flushSync(): void {
    this.writeChanged(Number.POSITIVE_INFINITY, false);
  }

  /**
   * Writes the index files of at most `limit` changed tenants, least recently used first, and,
   * with `settledOnly`, none being rebuilt; true while changed ones are left unwritten. A graphless
   * tenant's file stays behind its version until its graphs are built.
   */
  private writeChanged(limit: number, settledOnly: boolean): boolean {
    let written = 0;
    let left = false;
    for (const [tenant, t] of this.indexes) {
      if (!t.dirty) continue;
      if (written >= limit || t.graphless || (settledOnly && t.rebuilding)) {
        left = true;
        continue;
      }
      const meta = this.tenantRow(tenant);
      if (!meta) continue;
      this.writeIndex(tenant, t, meta.version);
      written++;
    }
    return left;
  }

  /**
   * Writes a tenant's index to its file (a temp file, then a rename) and records the write version
   * it reflects (flush, and an eviction of a changed index).
   */
  private writeIndex(tenant: string, t: TenantIndex, version: number): void {
    mkdirSync(this.dir, { recursive: true });
    const files = this.filesOf(tenant, t.parts.split);
    const setFlushed = this.db.prepare("UPDATE vector_tenants SET flushed_version = ? WHERE tenant = ?");
    // Synchronous: nothing can change the index while it is written.
    for (const [kind, file] of files) {
      const graph = kind === "all" ? graphsOf(t.parts)[0] : graphOf(t.parts, kind);
      (graph as HierarchicalNSW).writeIndexSync(`${file}.tmp`);
    }
    // The files are replaced one by one: until all are, none counts as current (a crash in between
    // leads to a rebuild, never to one new file read with an old one, which could still hold an
    // erased point's vector at an unchanged version: a purge rewrites files at their version).
    setFlushed.run(-1, tenant);
    this.removeOtherLayout(tenant, t.parts.split);
    for (const file of files.values()) renameSync(`${file}.tmp`, file);
    setFlushed.run(version, tenant);
    t.dirty = false;
  }

  /**
   * Resolves when every background rebuild started so far has ended (done, or dropped because its
   * tenant changed under it). flush() waits for them; nothing else does.
   */
  async settled(): Promise<void> {
    // The rebuilds under way now, not those started meanwhile: writes that keep coming (or keep
    // dropping and restarting a split) must not hold a caller for as long as they last.
    await Promise.all([...this.rebuildsUnderWay]);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    try {
      if (this.db.open) this.flushSync();
    } finally {
      this.closed = true;
      this.indexes.clear();
      this.residentVectors = 0;
      if (this.ownsDb && this.db.open) this.db.close();
    }
  }
}
