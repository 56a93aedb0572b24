import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { z } from "zod";
import { TenantNameSchema } from "./tenant-name.ts";

/**
 * The embedded store's SQLite memory defaults (config.cache): a 64 MiB page cache and reads of up
 * to 2047 MiB of the file through a memory map (SQLite's largest map).
 */
export const SQLITE_DEFAULTS = { pageCacheMiB: 64, mmapMiB: 2047, checkpointMs: 250 } as const;

/**
 * How many HNSW tenant indexes, and points in all, the embedded store keeps in memory (config.cache;
 * the reasons for these sizes are at DEFAULT_MAX_RESIDENT_VECTORS in the HNSW adapter).
 */
export const HNSW_RESIDENCY_DEFAULTS = { vectors: 1_000_000, tenants: 1_000 } as const;
/** Default of config vectors.splitKindsAt (HnswVectorStore's DEFAULT_SPLIT_KINDS_AT says why). */
export const HNSW_SPLIT_KINDS_AT = 8192;

const num = z.coerce.number();
const port = num.int("must be a whole number").min(0, "must be 0 to 65535").max(65535, "must be 0 to 65535");
/**
 * An on/off setting. From the environment any value turns it on except 0, false, no and off (the
 * variables this replaces were read as "set or not").
 */
const flag = z.preprocess(
  (v) => (typeof v === "string" ? !/^(0|false|no|off)$/i.test(v.trim()) : v),
  z.boolean().default(false),
);

/** The API key configured when none is: fine on 127.0.0.1, refused by `memory serve` on any other address. */
export const DEFAULT_API_KEY = "dev-key-change-me";
/** Default request body limit (MEMORY_HTTP_MAX_BODY_BYTES): 5 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024;
export const MIN_API_KEY_LENGTH = 8;

// The issue names the rule, not the key: the key is a secret and must not reach logs.
const ApiKeySchema = z.string().min(MIN_API_KEY_LENGTH, `API keys must be at least ${MIN_API_KEY_LENGTH} characters`);

/**
 * The LLM (docs/design.md §5, Encoder and Query): which provider, and which stages use it. Defaults: no LLM,
 * the deterministic extractor and planner. The API key comes from MEMORY_LLM_API_KEY.
 */
export const LlmConfigSchema = z
  .object({
    provider: z.enum(["none", "openai", "local"]).default("none"),
    /** OpenAI-compatible endpoint (default: the OpenAI API). */
    baseUrl: z.string().url().optional(),
    model: z.string().min(1).default("gpt-4.1-mini"),
    apiKey: z.string().min(1).optional(),
    /** GGUF file for provider "local" (default: <modelDir>/smollm2-135m-instruct-q4_1/SmolLM2-135M-Instruct.Q4_1.gguf; see infra/models/fetch-llm.sh). */
    gguf: z.string().min(1).optional(),
    /** Per-call timeout; default 60 s for a remote endpoint, 10 min for a local CPU model. */
    timeoutMs: num.int().positive().optional(),
    maxRetries: num.int().min(0).max(10).default(3),
    /** Context window of the local model, in tokens. */
    contextSize: num.int().min(512).default(4096),
    /** CPU threads of the local model (default: what node-llama-cpp picks). */
    threads: num.int().positive().optional(),
    encoder: z.enum(["extractive", "llm"]).default("extractive"),
    planner: z.enum(["deterministic", "llm"]).default("deterministic"),
    /** Segments of one buffer release encoded in one call (LlmEncoder.encodeBatch). */
    batchSegments: num.int().min(1).max(16).default(1),
    /** Hard cap of the disambiguation context, in tokens. */
    contextTokenCap: num.int().min(50).default(300),
  })
  .refine((l) => l.provider !== "none" || (l.encoder !== "llm" && l.planner !== "llm"), {
    message: "llm.encoder=llm or llm.planner=llm needs llm.provider openai or local",
  })
  .default({
    provider: "none",
    model: "gpt-4.1-mini",
    maxRetries: 3,
    contextSize: 4096,
    encoder: "extractive",
    planner: "deterministic",
    batchSegments: 1,
    contextTokenCap: 300,
  });

/**
 * The distributed runtime (docs/design.md §2, §3): Kafka, the schema registry and the topic names.
 * A topic's name is prefix + its versioned name (MEMORY_TOPIC_PREFIX isolates test runs);
 * each name can be replaced as a whole (MEMORY_TOPIC_TURNS, ...).
 */
export const KafkaConfigSchema = z
  .object({
    /** Comma-separated bootstrap brokers (KAFKA_BROKERS). */
    brokers: z.string().min(1).default("127.0.0.1:19092"),
    /** Confluent-compatible schema registry (SCHEMA_REGISTRY_URL). */
    registryUrl: z.string().url().default("http://127.0.0.1:18081"),
    topicPrefix: z.string().default(""),
    /** Partitions of topics created at start-up; changelogs get as many as their input topic. */
    partitions: num.int().min(1).default(3),
    /**
     * Replication of the topics created at start-up (MEMORY_KAFKA_REPLICATION). 1 fits the local
     * single broker; production: 3, with minInsyncReplicas 2.
     */
    replicationFactor: num.int().min(1).default(1),
    /** min.insync.replicas of the created topics (MEMORY_KAFKA_MIN_INSYNC_REPLICAS); unset: the broker's default. */
    minInsyncReplicas: num.int().min(1).optional(),
    /**
     * Creating topics with replication 1 on a cluster of several brokers is refused unless this
     * is set (MEMORY_KAFKA_ALLOW_SINGLE_REPLICA): one broker lost would lose the data.
     */
    allowSingleReplica: flag,
    /**
     * A dependency (Neo4j, the registry, an LLM) failing for longer than this makes a stage not
     * ready (/readyz 503, metric memory_dependency_down, a log line) while it keeps retrying
     * (MEMORY_DEPENDENCY_DOWN_LIMIT_MS).
     */
    dependencyDownLimitMs: num.int().min(0).default(60_000),
    /** Longest wait between retries of an input failing for a transient reason (MEMORY_STAGE_RETRY_MAX_MS). */
    retryMaxBackoffMs: num.int().min(10).default(30_000),
    clientId: z.string().min(1).default("memory"),
    /** Stage instance id: part of the transactional ids, stable across restarts (e.g. the pod name). */
    instanceId: z.string().min(1).default("0"),
    /** Consumer session timeout: how soon a crashed stage's partitions move to another member. */
    sessionTimeoutMs: num.int().min(6000).default(30_000),
    /** Messages per stage transaction (MEMORY_STAGE_MAX_CHUNK). */
    maxChunk: num.int("must be a whole number").min(1).default(50),
    /** kafkajs's own debug log (KAFKAJS_DEBUG: any value but 0/false/no/off turns it on). */
    debug: flag,
    /**
     * The indexer also consumes the sensory topic and writes raw turns as they arrive, queryable
     * within seconds instead of at segment close (MEMORY_RAW_TURNS_AT_ONCE; 0/false/no/off: not).
     */
    rawTurnsAtOnce: z
      .preprocess((v) => (typeof v === "string" ? !/^(0|false|no|off)$/i.test(v.trim()) : v), z.boolean())
      .default(true),
    /**
     * Texts per embedding call of the indexer's records consumer (MEMORY_INDEXER_EMBED_SLICE). Its
     * raw-turn consumer shares the one model, which runs a call at a time: an arriving turn waits
     * for one slice at most, not for a whole segment's records (services/indexer/sliced-embedder.ts).
     */
    indexerEmbedSlice: num.int("must be a whole number").min(1).default(8),
    /**
     * Input partitions the indexer's raw-turn consumer handles at the same time
     * (MEMORY_RAW_TURN_PARTITIONS_AT_ONCE): a turn then waits for its own partition's chunk only,
     * not for every partition's chunk of the fetch one after another.
     */
    rawTurnPartitionsAtOnce: num.int("must be a whole number").min(1).default(3),
    /**
     * Input partitions the indexer's records consumer handles at the same time
     * (MEMORY_RECORDS_PARTITIONS_AT_ONCE): one segment's store round trips then overlap another
     * partition's embedding. Each partition keeps its order, and a tenant's erasure is per
     * partition (services/indexer/erase-in-stores.ts), so it is as safe as more instances.
     */
    recordsPartitionsAtOnce: num.int("must be a whole number").min(1).default(1),
    /**
     * The longest one step of the indexer's records consumer waits while raw-turn writes run
     * (MEMORY_RAW_TURNS_FIRST_MAX_WAIT_MS; services/indexer/freshness-gate.ts): raw turns go first,
     * and a steady stream of them still cannot hold the records back for longer than this per step.
     */
    rawTurnsFirstMaxWaitMs: num.int("must be a whole number").min(0).default(1000),
    topics: z
      .object({
        turns: z.string().min(1).default("memory.turns.v1"),
        sensory: z.string().min(1).default("memory.sensory.v1"),
        segments: z.string().min(1).default("memory.segments.v1"),
        records: z.string().min(1).default("memory.records.v1"),
        updateQueue: z.string().min(1).default("memory.update-queue.v1"),
        dlq: z.string().min(1).default("memory.dlq.v1"),
      })
      .default({
        turns: "memory.turns.v1",
        sensory: "memory.sensory.v1",
        segments: "memory.segments.v1",
        records: "memory.records.v1",
        updateQueue: "memory.update-queue.v1",
        dlq: "memory.dlq.v1",
      }),
  })
  .default({
    brokers: "127.0.0.1:19092",
    registryUrl: "http://127.0.0.1:18081",
    topicPrefix: "",
    partitions: 3,
    replicationFactor: 1,
    allowSingleReplica: false,
    dependencyDownLimitMs: 60_000,
    retryMaxBackoffMs: 30_000,
    clientId: "memory",
    instanceId: "0",
    sessionTimeoutMs: 30_000,
    maxChunk: 50,
    indexerEmbedSlice: 8,
    rawTurnPartitionsAtOnce: 3,
    recordsPartitionsAtOnce: 1,
    rawTurnsFirstMaxWaitMs: 1000,
    debug: false,
    rawTurnsAtOnce: true,
    topics: {
      turns: "memory.turns.v1",
      sensory: "memory.sensory.v1",
      segments: "memory.segments.v1",
      records: "memory.records.v1",
      updateQueue: "memory.update-queue.v1",
      dlq: "memory.dlq.v1",
    },
  });
export type KafkaConfig = z.infer<typeof KafkaConfigSchema>;

export const ConfigSchema = z.object({
  dataDir: z.string().default("./data"),
  modelDir: z.string().default("./models"),
  /**
   * The sentence embedder (all-MiniLM-L6-v2 under modelDir): the model file (MEMORY_EMBEDDER_VARIANT:
   * fp32, or int8 — the dynamically quantised file, see docs/benchmarks.md for its recall) and the
   * onnxruntime intra-op threads (MEMORY_EMBEDDER_THREADS). Unset, each process picks its own:
   * 2 where one process embeds alone (embedded runtime, query service, CLI), 1 in a pipeline stage
   * process (composition/parts.ts: STAGE_EMBEDDER_THREADS).
   */
  embedder: z
    .object({
      variant: z.enum(["fp32", "int8"]).default("fp32"),
      threads: num.int("must be a whole number").min(1).optional(),
    })
    .default({ variant: "fp32" }),
  /**
   * A second embedding model as a second opinion on the order of a query's candidates
   * (services/query/second-opinion.ts; docs/design.md, "Second opinion"): bge-small-en-v1.5 under
   * modelDir/bge-small-en-v1.5 (fetched from Maven Central by the setup step). On
   * (MEMORY_SECOND_OPINION), the indexer stores its vector of every record and raw turn beside the
   * first model's, and the query fuses the candidates' order by it into the routes' as one more
   * list of weight `weight` (MEMORY_SECOND_OPINION_WEIGHT). `variant`: which model file
   * (MEMORY_SECOND_OPINION_VARIANT; int8 by default, 0.77x the first model's time a text). Off by
   * default: it about doubles the build's embedding work (every text is embedded by both models).
   */
  secondOpinion: z
    .object({
      enabled: flag,
      variant: z.enum(["fp32", "int8"]).default("int8"),
      weight: num.positive().default(4),
    })
    .prefault({}),
  http: z
    .object({
      host: z.string().default("127.0.0.1"),
      port: num.int("must be a whole number").min(0).max(65535).default(8787),
      /** Request body limit in bytes; larger bodies get 413. */
      maxBodyBytes: num
        .int("must be a whole number of bytes")
        .min(1024, "must be at least 1024 bytes")
        .default(DEFAULT_MAX_BODY_BYTES),
      /** Failed authentications per client address per minute before 429 (0: no limit). */
      authFailuresPerMinute: num.int("must be a whole number").min(0, "must be 0 (no limit) or more").default(20),
    })
    .default({ host: "127.0.0.1", port: 8787, maxBodyBytes: DEFAULT_MAX_BODY_BYTES, authFailuresPerMinute: 20 }),
  /**
   * API key -> tenant. The tenant always comes from the credential, never from a body; its name
   * must follow the tenant-name alphabet (services/core/tenant-name.ts).
   */
  apiKeys: z.record(ApiKeySchema, TenantNameSchema).default({ [DEFAULT_API_KEY]: "default" }),
  /**
   * HMAC secret of record-listing cursors, shared by every instance (MEMORY_CURSOR_SECRET). Unset:
   * derived from the API keys (cursorSecretOf), which instances of one deployment share.
   */
  cursorSecret: z.string().min(16, "must be at least 16 characters").optional(),
  sensory: z
    .object({
      keepRate: num.gt(0).max(1).default(0.7),
      /**
       * Turn compressor (docs/compressor.md). kind "auto": the ONNX token classifier when its
       * model folder holds a manifest.json, else the statistical default; "onnx" fails at start
       * when the model is missing. modelDir is relative to the top-level modelDir unless absolute.
       * executionProvider "cuda" fails loudly when CUDA is unavailable (no silent CPU fallback).
       */
      compressor: z
        .object({
          kind: z.enum(["auto", "statistical", "onnx"]).default("auto"),
          modelDir: z.string().min(1).default("llmlingua-2-bert-base-multilingual-cased-meetingbank"),
          executionProvider: z.enum(["cpu", "cuda"]).default("cpu"),
        })
        .default({
          kind: "auto",
          modelDir: "llmlingua-2-bert-base-multilingual-cased-meetingbank",
          executionProvider: "cpu",
        }),
    })
    .default({
      keepRate: 0.7,
      compressor: {
        kind: "auto",
        modelDir: "llmlingua-2-bert-base-multilingual-cased-meetingbank",
        executionProvider: "cpu",
      },
    }),
  segmenter: z
    .object({
      threshold: num.default(0.55),
      hardCapTokens: num.int().positive().default(2000),
      bufferTokens: num.int().nonnegative().default(512),
      idleTimeoutMs: num
        .int()
        .positive()
        .default(30 * 60_000),
      /**
       * Which signals cut a segment (docs/segmenter.md): the similarity gate alone, attention alone,
       * or both (the gate proposes, the encoder's attention confirms or vetoes). The default is the
       * measured one (docs/segmenter.md).
       */
      boundaries: z.enum(["gate", "attention", "both"]).default("gate"),
    })
    .default({
      threshold: 0.55,
      hardCapTokens: 2000,
      bufferTokens: 512,
      idleTimeoutMs: 30 * 60_000,
      boundaries: "gate",
    }),
  query: z
    .object({
      budget: num.int().positive().default(1000),
      rrfK: num.positive().default(60),
      mmrLambda: num.min(0).max(1).default(0.7),
      /** Hits each route contributes to the fusion. */
      routeDepth: num.int().positive().default(40),
      /** Fused candidates that go on to diversity and packing. */
      candidates: num.int().positive().default(80),
    })
    .prefault({}),
  runtime: z.object({ queueCapacity: num.int().positive().default(64) }).default({ queueCapacity: 64 }),
  /**
   * In-memory caches, each bounded by entries whatever the number of tenants (least recently used
   * dropped first; what is dropped is read again from its store or recomputed):
   * - embeddingEntries: vectors of recent texts a process's embedder keeps (one cache per process,
   *   all tenants share it; about 1.5 KB per entry with the 384-d model). At least 256: a Kafka
   *   stage's chunk of turns must fit, it is embedded in one call and then read back.
   * - conversationStates: conversations whose segmenter and encoder state the embedded runtime keeps
   *   in memory (the state is in its SQLite store too). A conversation pushed out with an open
   *   segment has it closed as an idle one would be. At least 64 (two inbox batches of conversations).
   * - attentionPairs: turn-pair attention shares the segmenter memoises (boundaries attention / both).
   * - sqlitePageCacheMiB: the embedded store's SQLite page cache (one connection per process).
   * - sqliteReadMemoEntries: results of the reads every query repeats that the embedded store keeps
   *   until the data changes, in each of its two memos (a scope's known entity and topic names;
   *   its record count), keyed by tenant and conversation (unchanged-data-memo.ts).
   * - neo4jReadMemoEntries: the same for the Neo4j store, in each of its four memos (known names,
   *   record counts, the lexical routes' record and turn scopes), kept until a write stamps the
   *   tenant again (tenant-stamp-memo.ts).
   * - sqliteMmapMiB: how much of the SQLite file is read through a memory map (0: none; SQLite caps
   *   it at 2047). Mapped pages count in RSS as file-backed, reclaimable pages; a disk read error
   *   on a mapped page ends the process (SIGBUS) instead of failing the one call.
   *   docs/benchmarks.md ("Write rate at 100K", "Query cost at 100K") has the measurements.
   * - sqliteCheckpointMs: the embedded store's write-ahead log is copied into memory.db by a worker
   *   thread at most this often while it is written (0: no worker; the commit that takes the log
   *   past 10,000 pages copies it, on the event loop: 0.6-0.8 s on a 100K-record store).
   *   adapters/sqlite-checkpoints.ts says how; docs/benchmarks.md ("Erasure in steps, checkpoints on a worker thread").
   * - hnswResidentVectors, hnswResidentTenants: the embedded store's HNSW tenant indexes kept in
   *   memory, by the points they hold in all (about 4 KB each with 384-d vectors) and by count
   *   (about 2.5 MiB each however small). Past either, the least recently used index is written to
   *   its file (when changed) and dropped, and read back from it on its next use; one tenant larger
   *   than the cap stays in memory alone. docs/benchmarks.md ("Bounded residency") has the cost.
   */
  cache: z
    .object({
      embeddingEntries: num.int("must be a whole number").min(256).default(4096),
      conversationStates: num.int("must be a whole number").min(64).default(10_000),
      attentionPairs: num.int("must be a whole number").min(64).default(4096),
      sqlitePageCacheMiB: num.int("must be a whole number").min(2).default(SQLITE_DEFAULTS.pageCacheMiB),
      sqliteMmapMiB: num.int("must be a whole number").min(0).max(2047).default(SQLITE_DEFAULTS.mmapMiB),
      sqliteCheckpointMs: num.int("must be a whole number").min(0).default(SQLITE_DEFAULTS.checkpointMs),
      sqliteReadMemoEntries: num.int("must be a whole number").min(1).default(1024),
      neo4jReadMemoEntries: num.int("must be a whole number").min(1).default(1024),
      hnswResidentVectors: num.int("must be a whole number").min(1).default(HNSW_RESIDENCY_DEFAULTS.vectors),
      hnswResidentTenants: num.int("must be a whole number").min(1).default(HNSW_RESIDENCY_DEFAULTS.tenants),
    })
    .default({
      embeddingEntries: 4096,
      conversationStates: 10_000,
      attentionPairs: 4096,
      sqlitePageCacheMiB: SQLITE_DEFAULTS.pageCacheMiB,
      sqliteMmapMiB: SQLITE_DEFAULTS.mmapMiB,
      sqliteCheckpointMs: SQLITE_DEFAULTS.checkpointMs,
      sqliteReadMemoEntries: 1024,
      neo4jReadMemoEntries: 1024,
      hnswResidentVectors: HNSW_RESIDENCY_DEFAULTS.vectors,
      hnswResidentTenants: HNSW_RESIDENCY_DEFAULTS.tenants,
    }),
  /**
   * The embedded HNSW vector index: a tenant's index is rebuilt without deleted points once they
   * are this share of its points (erasure always rebuilds it; see docs/erasure.md); a tenant of at
   * least splitKindsAt points when its index is built has one graph per kind, records and raw
   * turns, so that a kind's search walks its own points only (vector-store.ts IndexParts).
   */
  vectors: z
    .object({
      compactDeletedRatio: num.gt(0).max(1).default(0.2),
      splitKindsAt: num.int("must be a whole number").min(1).default(HNSW_SPLIT_KINDS_AT),
    })
    .default({ compactDeletedRatio: 0.2, splitKindsAt: HNSW_SPLIT_KINDS_AT }),
  /** Sleep-time consolidation: when it runs on its own, and how update candidates are chosen. */
  consolidation: z
    .object({
      /** Daily off-peak window in UTC, "HH:MM-HH:MM" (may wrap past midnight); "" for none. */
      window: z
        .string()
        .trim()
        .regex(/^$|^\d{1,2}:\d{2}\s*-\s*\d{1,2}:\d{2}$/, 'expected "HH:MM-HH:MM" (UTC) or ""')
        .default(""),
      /** Also run after this many minutes without ingest, when the inbox lag is low (0: never). */
      idleMinutes: num.min(0).default(30),
      /** Most unprocessed inbox entries for the idle trigger. */
      maxInboxLag: num.int().min(0).default(0),
      /** Cosine similarity that makes an older record an update candidate. */
      similarityThreshold: num.min(0).max(1).default(0.8),
      /** Groups (and tenants) consolidated at the same time. */
      concurrency: num.int().positive().default(4),
      /** How often the scheduler checks its triggers. */
      checkIntervalMs: num.int().positive().default(60_000),
      /**
       * Distributed consolidator only: also run while the total consumer lag of the upstream stage
       * groups is at or below this (the pipeline has caught up). Unset: no lag trigger.
       */
      lagThreshold: num.int().min(0).optional(),
      /** Distributed consolidator only: its consumer group on the update queue (the topic prefix is prepended). */
      consumerGroup: z.string().trim().min(1).default("memory-consolidator"),
    })
    .default({
      window: "",
      idleMinutes: 30,
      maxInboxLag: 0,
      similarityThreshold: 0.8,
      concurrency: 4,
      checkIntervalMs: 60_000,
      consumerGroup: "memory-consolidator",
    }),
  llm: LlmConfigSchema,
  kafka: KafkaConfigSchema,
  /**
   * Where records and vectors live (services/composition/stores.ts). kind "embedded": SQLite and
   * HNSW files in dataDir, one writer process; "neo4j": the graph and the vectors in Neo4j, shared
   * by any number of processes (the distributed services). vectors replaces the kind's own vector
   * store: "qdrant" (qdrant.url) with either kind; "hnsw" only with embedded, "neo4j" only with neo4j.
   */
  store: z
    .object({
      kind: z.enum(["embedded", "neo4j"]).default("embedded"),
      vectors: z.enum(["hnsw", "neo4j", "qdrant"]).optional(),
    })
    .prefault({}),
  neo4j: z
    .object({
      uri: z.string().min(1).default("bolt://127.0.0.1:7687"),
      user: z.string().min(1).default("neo4j"),
      password: z.string().default(""),
      /** Default: the server's default database. */
      database: z.string().min(1).optional(),
    })
    .prefault({}),
  qdrant: z
    .object({
      /** e.g. http://127.0.0.1:6333 */
      url: z.string().url().optional(),
      apiKey: z.string().min(1).optional(),
      /** One collection for every tenant (see adapters/qdrant/vector-store.ts). */
      collection: z.string().min(1).default("memory_vectors"),
    })
    .prefault({}),
  /**
   * A process's /metrics, /healthz and /readyz endpoint. Unset port: each process's default (stage
   * processes 9101-9104, the query service 9105; the gateway serves /metrics on its HTTP port).
   * Unset host: 127.0.0.1 (the gateway: its HTTP host).
   */
  metrics: z.object({ host: z.string().min(1).optional(), port: port.optional() }).prefault({}),
  /** The gateway's gRPC listener. Unset host: the HTTP host. */
  grpc: z.object({ host: z.string().min(1).optional(), port: port.default(50051) }).prefault({}),
  /** The query service: where it listens, and where the gateway reaches it. */
  queryService: z
    .object({
      host: z.string().min(1).default("127.0.0.1"),
      port: port.default(50052),
      /** host:port the gateway calls. */
      address: z
        .string()
        .regex(/^\S+:\d{1,5}$/, "expected host:port")
        .default("127.0.0.1:50052"),
    })
    .prefault({}),
  /**
   * Shared secret between the gateway and the query service (sent as a bearer token; the query
   * service then refuses calls without it). Unset: no check.
   */
  internalToken: z.string().min(1).optional(),
});
export type Config = z.infer<typeof ConfigSchema>;

/** Cross-field rules: the vector store fits the store kind, and Qdrant has an address. */
const ConfigRulesSchema = ConfigSchema.superRefine((c, ctx) => {
  const vectors = c.store.vectors;
  if (vectors === "hnsw" && c.store.kind !== "embedded")
    ctx.addIssue({ code: "custom", path: ["store", "vectors"], message: "hnsw needs store.kind embedded" });
  if (vectors === "neo4j" && c.store.kind !== "neo4j")
    ctx.addIssue({ code: "custom", path: ["store", "vectors"], message: "neo4j vectors need store.kind neo4j" });
  if (vectors === "qdrant" && c.qdrant.url === undefined)
    ctx.addIssue({
      code: "custom",
      path: ["qdrant", "url"],
      message: "required with store.vectors qdrant (set QDRANT_URL)",
    });
});

/** The vector store a configuration selects: the store kind's own unless store.vectors replaces it. */
export const vectorStoreKind = (config: Pick<Config, "store">): "hnsw" | "neo4j" | "qdrant" =>
  config.store.vectors ?? (config.store.kind === "neo4j" ? "neo4j" : "hnsw");

/** Every default (what an empty configuration means): the one place defaults are written. */
export const CONFIG_DEFAULTS: Config = ConfigSchema.parse({});

type Json = Record<string, unknown>;

const setPath = (obj: Json, path: readonly string[], value: unknown): void => {
  let cur = obj;
  for (const p of path.slice(0, -1)) {
    const next = cur[p];
    if (typeof next !== "object" || next === null) cur[p] = {};
    cur = cur[p] as Json;
  }
  cur[path[path.length - 1] as string] = value;
};

/** Environment variables that override the file, by config path. */
const ENV_PATHS: Record<string, string[]> = {
  MEMORY_DATA_DIR: ["dataDir"],
  MEMORY_MODEL_DIR: ["modelDir"],
  MEMORY_EMBEDDER_VARIANT: ["embedder", "variant"],
  MEMORY_EMBEDDER_THREADS: ["embedder", "threads"],
  MEMORY_SECOND_OPINION: ["secondOpinion", "enabled"],
  MEMORY_SECOND_OPINION_VARIANT: ["secondOpinion", "variant"],
  MEMORY_SECOND_OPINION_WEIGHT: ["secondOpinion", "weight"],
  MEMORY_HTTP_HOST: ["http", "host"],
  MEMORY_HTTP_PORT: ["http", "port"],
  MEMORY_HTTP_MAX_BODY_BYTES: ["http", "maxBodyBytes"],
  MEMORY_AUTH_FAILURES_PER_MINUTE: ["http", "authFailuresPerMinute"],
  MEMORY_CURSOR_SECRET: ["cursorSecret"],
  MEMORY_KEEP_RATE: ["sensory", "keepRate"],
  MEMORY_COMPRESSOR: ["sensory", "compressor", "kind"],
  MEMORY_COMPRESSOR_DIR: ["sensory", "compressor", "modelDir"],
  MEMORY_COMPRESSOR_EP: ["sensory", "compressor", "executionProvider"],
  MEMORY_SEGMENT_THRESHOLD: ["segmenter", "threshold"],
  MEMORY_BUFFER_TOKENS: ["segmenter", "bufferTokens"],
  MEMORY_IDLE_TIMEOUT_MS: ["segmenter", "idleTimeoutMs"],
  MEMORY_SEGMENTER_BOUNDARIES: ["segmenter", "boundaries"],
  MEMORY_QUERY_BUDGET: ["query", "budget"],
  MEMORY_QUEUE_CAPACITY: ["runtime", "queueCapacity"],
  MEMORY_EMBEDDING_CACHE_ENTRIES: ["cache", "embeddingEntries"],
  MEMORY_CONVERSATION_CACHE_ENTRIES: ["cache", "conversationStates"],
  MEMORY_ATTENTION_CACHE_ENTRIES: ["cache", "attentionPairs"],
  MEMORY_SQLITE_CACHE_MIB: ["cache", "sqlitePageCacheMiB"],
  MEMORY_SQLITE_MMAP_MIB: ["cache", "sqliteMmapMiB"],
  MEMORY_SQLITE_CHECKPOINT_MS: ["cache", "sqliteCheckpointMs"],
  MEMORY_SQLITE_READ_MEMO_ENTRIES: ["cache", "sqliteReadMemoEntries"],
  MEMORY_NEO4J_READ_MEMO_ENTRIES: ["cache", "neo4jReadMemoEntries"],
  MEMORY_HNSW_RESIDENT_VECTORS: ["cache", "hnswResidentVectors"],
  MEMORY_HNSW_RESIDENT_TENANTS: ["cache", "hnswResidentTenants"],
  MEMORY_HNSW_COMPACT_RATIO: ["vectors", "compactDeletedRatio"],
  MEMORY_HNSW_SPLIT_KINDS_AT: ["vectors", "splitKindsAt"],
  MEMORY_CONSOLIDATION_WINDOW: ["consolidation", "window"],
  MEMORY_CONSOLIDATION_IDLE_MINUTES: ["consolidation", "idleMinutes"],
  MEMORY_CONSOLIDATION_MAX_LAG: ["consolidation", "maxInboxLag"],
  MEMORY_CONSOLIDATION_SIMILARITY: ["consolidation", "similarityThreshold"],
  MEMORY_CONSOLIDATION_CONCURRENCY: ["consolidation", "concurrency"],
  MEMORY_CONSOLIDATION_CHECK_INTERVAL_MS: ["consolidation", "checkIntervalMs"],
  MEMORY_CONSOLIDATION_LAG_THRESHOLD: ["consolidation", "lagThreshold"],
  MEMORY_CONSOLIDATOR_GROUP: ["consolidation", "consumerGroup"],
  MEMORY_LLM_PROVIDER: ["llm", "provider"],
  MEMORY_LLM_BASE_URL: ["llm", "baseUrl"],
  MEMORY_LLM_MODEL: ["llm", "model"],
  MEMORY_LLM_API_KEY: ["llm", "apiKey"],
  MEMORY_LLM_GGUF: ["llm", "gguf"],
  MEMORY_LLM_TIMEOUT_MS: ["llm", "timeoutMs"],
  MEMORY_LLM_MAX_RETRIES: ["llm", "maxRetries"],
  MEMORY_LLM_CONTEXT_SIZE: ["llm", "contextSize"],
  MEMORY_LLM_THREADS: ["llm", "threads"],
  MEMORY_LLM_ENCODER: ["llm", "encoder"],
  MEMORY_LLM_PLANNER: ["llm", "planner"],
  MEMORY_LLM_BATCH_SEGMENTS: ["llm", "batchSegments"],
  MEMORY_LLM_CONTEXT_TOKEN_CAP: ["llm", "contextTokenCap"],
  KAFKA_BROKERS: ["kafka", "brokers"],
  SCHEMA_REGISTRY_URL: ["kafka", "registryUrl"],
  MEMORY_TOPIC_PREFIX: ["kafka", "topicPrefix"],
  MEMORY_KAFKA_PARTITIONS: ["kafka", "partitions"],
  MEMORY_KAFKA_REPLICATION: ["kafka", "replicationFactor"],
  MEMORY_KAFKA_MIN_INSYNC_REPLICAS: ["kafka", "minInsyncReplicas"],
  MEMORY_KAFKA_ALLOW_SINGLE_REPLICA: ["kafka", "allowSingleReplica"],
  MEMORY_DEPENDENCY_DOWN_LIMIT_MS: ["kafka", "dependencyDownLimitMs"],
  MEMORY_STAGE_RETRY_MAX_MS: ["kafka", "retryMaxBackoffMs"],
  MEMORY_KAFKA_CLIENT_ID: ["kafka", "clientId"],
  MEMORY_KAFKA_INSTANCE_ID: ["kafka", "instanceId"],
  MEMORY_KAFKA_SESSION_TIMEOUT_MS: ["kafka", "sessionTimeoutMs"],
  MEMORY_TOPIC_TURNS: ["kafka", "topics", "turns"],
  MEMORY_TOPIC_SENSORY: ["kafka", "topics", "sensory"],
  MEMORY_TOPIC_SEGMENTS: ["kafka", "topics", "segments"],
  MEMORY_TOPIC_RECORDS: ["kafka", "topics", "records"],
  MEMORY_TOPIC_UPDATE_QUEUE: ["kafka", "topics", "updateQueue"],
  MEMORY_TOPIC_DLQ: ["kafka", "topics", "dlq"],
  MEMORY_STAGE_MAX_CHUNK: ["kafka", "maxChunk"],
  KAFKAJS_DEBUG: ["kafka", "debug"],
  MEMORY_RAW_TURNS_AT_ONCE: ["kafka", "rawTurnsAtOnce"],
  MEMORY_INDEXER_EMBED_SLICE: ["kafka", "indexerEmbedSlice"],
  MEMORY_RAW_TURN_PARTITIONS_AT_ONCE: ["kafka", "rawTurnPartitionsAtOnce"],
  MEMORY_RECORDS_PARTITIONS_AT_ONCE: ["kafka", "recordsPartitionsAtOnce"],
  MEMORY_RAW_TURNS_FIRST_MAX_WAIT_MS: ["kafka", "rawTurnsFirstMaxWaitMs"],
  MEMORY_STORE: ["store", "kind"],
  MEMORY_VECTOR_STORE: ["store", "vectors"],
  NEO4J_URI: ["neo4j", "uri"],
  NEO4J_USER: ["neo4j", "user"],
  NEO4J_PASSWORD: ["neo4j", "password"],
  NEO4J_DATABASE: ["neo4j", "database"],
  QDRANT_URL: ["qdrant", "url"],
  QDRANT_API_KEY: ["qdrant", "apiKey"],
  MEMORY_QDRANT_COLLECTION: ["qdrant", "collection"],
  MEMORY_METRICS_HOST: ["metrics", "host"],
  MEMORY_METRICS_PORT: ["metrics", "port"],
  MEMORY_GRPC_HOST: ["grpc", "host"],
  MEMORY_GRPC_PORT: ["grpc", "port"],
  MEMORY_QUERY_GRPC_HOST: ["queryService", "host"],
  MEMORY_QUERY_GRPC_PORT: ["queryService", "port"],
  MEMORY_QUERY_ADDR: ["queryService", "address"],
  MEMORY_INTERNAL_TOKEN: ["internalToken"],
};

/**
 * Variables read when the first one is unset: OpenAI's own variable, which the OpenAI client
 * library reads, so a key set for other OpenAI tools works here too.
 */
const ENV_FALLBACKS: Record<string, string> = { MEMORY_LLM_API_KEY: "OPENAI_API_KEY" };

/** The JSON file a process reads when MEMORY_CONFIG is unset (relative to the working directory). */
export const DEFAULT_CONFIG_FILE = "memory.config.json";

/** "key1=tenantA,key2=tenantB" */
const parseApiKeys = (raw: string): Record<string, string> =>
  Object.fromEntries(
    raw
      .split(",")
      .map((pair) => pair.trim())
      .filter(Boolean)
      .map((pair) => {
        const i = pair.indexOf("=");
        if (i <= 0) throw new Error(`MEMORY_API_KEYS: expected key=tenant, got "${pair}"`);
        return [pair.slice(0, i), pair.slice(i + 1)];
      }),
  );

/** Where each configured value came from, by config path ("http.port"), for error messages. */
type Origins = Map<string, string>;

export interface LoadConfigOptions {
  /**
   * The JSON file read when MEMORY_CONFIG is unset. Default: none, so that a library call (a
   * test, the bench) never picks up a memory.config.json that happens to lie in the working
   * directory; process entry points pass DEFAULT_CONFIG_FILE (loadProcessConfig).
   */
  defaultFile?: string;
}

/**
 * Configuration from an optional JSON file (MEMORY_CONFIG; empty: none), then the environment,
 * then explicit overrides; validated as a whole so that a bad value fails at start, naming the
 * field and the variable (or file) it came from.
 */
export const loadConfig = (
  overrides: Json = {},
  env: NodeJS.ProcessEnv = process.env,
  options: LoadConfigOptions = {},
): Config => {
  const origins: Origins = new Map();
  const file = env.MEMORY_CONFIG ?? options.defaultFile ?? "";
  const raw: Json = file !== "" && existsSync(file) ? readConfigFile(file, origins) : {};
  for (const [name, path] of Object.entries(ENV_PATHS)) {
    const fallback = ENV_FALLBACKS[name];
    const [from, v] = present(env, name)
      ? [name, env[name]]
      : fallback && present(env, fallback)
        ? [fallback, env[fallback]]
        : [];
    if (from === undefined) continue;
    setPath(raw, path, v);
    origins.set(path.join("."), from);
  }
  if (env.MEMORY_API_KEYS) {
    raw.apiKeys = parseApiKeys(env.MEMORY_API_KEYS);
    origins.set("apiKeys", "MEMORY_API_KEYS");
  }
  // An override replaces a top-level value as a whole, and with it what the file and variables said.
  for (const key of Object.keys(overrides))
    for (const at of [...origins.keys()]) if (at === key || at.startsWith(`${key}.`)) origins.delete(at);
  const merged = { ...raw, ...overrides };
  const parsed = ConfigRulesSchema.safeParse(merged);
  if (!parsed.success) throw new Error(`invalid configuration: ${describeConfigIssues(parsed.error, origins)}`);
  return { ...parsed.data, dataDir: resolve(parsed.data.dataDir), modelDir: resolve(parsed.data.modelDir) };
};

/** The configuration of a process: loadConfig with ./memory.config.json read when MEMORY_CONFIG is unset. */
export const loadProcessConfig = (overrides: Json = {}, env: NodeJS.ProcessEnv = process.env): Config =>
  loadConfig(overrides, env, { defaultFile: DEFAULT_CONFIG_FILE });

const present = (env: NodeJS.ProcessEnv, name: string): boolean => env[name] !== undefined && env[name] !== "";

const readConfigFile = (file: string, origins: Origins): Json => {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new Error(`invalid configuration: MEMORY_CONFIG file ${file}: ${(err as Error).message}`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json))
    throw new Error(`invalid configuration: MEMORY_CONFIG file ${file}: expected a JSON object`);
  const where = `file ${resolve(file)}`;
  const mark = (value: unknown, path: string): void => {
    if (typeof value === "object" && value !== null && !Array.isArray(value))
      for (const [k, v] of Object.entries(value)) mark(v, path === "" ? k : `${path}.${k}`);
    else origins.set(path, where);
  };
  mark(json, "");
  return json as Json;
};

/**
 * Where an issue's value came from: the variable (or file) that set its path or a path above it
 * (apiKeys.<key>: MEMORY_API_KEYS), else those that set paths below it (a rule over several fields).
 */
const originOf = (path: readonly PropertyKey[], origins: Origins): string | undefined => {
  const keys = path.map(String);
  for (let n = keys.length; n > 0; n--) {
    const at = origins.get(keys.slice(0, n).join("."));
    if (at !== undefined) return at;
  }
  const prefix = keys.length === 0 ? "" : `${keys.join(".")}.`;
  const below = new Set([...origins].filter(([k]) => k.startsWith(prefix)).map(([, v]) => v));
  return below.size > 0 ? [...below].join(", ") : undefined;
};

/**
 * Config issues in words, e.g. `apiKeys: API keys must be at least 8 characters (a key of 2
 * characters) [MEMORY_API_KEYS]`. zod reports a bad record key as "Invalid key in record" with the
 * key in the path; the key is a secret, so the path stops at the record and the nested reason is
 * given. Values are never printed (passwords and keys are settings too); the variable is.
 */
export const describeConfigIssues = (error: z.ZodError, origins: Origins = new Map()): string =>
  error.issues
    .map((issue) => {
      const from = originOf(issue.path, origins);
      const tail = from === undefined ? "" : ` [${from}]`;
      if (issue.code === "invalid_key") {
        const key = String(issue.path[issue.path.length - 1]);
        const where = issue.path.slice(0, -1).join(".");
        const reasons = issue.issues.map((i) => i.message).join(", ");
        return `${where}: ${reasons} (a key of ${key.length} characters)${tail}`;
      }
      return `${issue.path.join(".") || "(config)"}: ${issue.message}${tail}`;
    })
    .join("; ");

/**
 * The cursor HMAC secret: the configured one, else a SHA-256 of the sorted API keys, so every
 * instance configured with the same keys accepts the others' cursors without extra setup (set
 * MEMORY_CURSOR_SECRET where the query service does not see the public API keys).
 */
export const cursorSecretOf = (config: Pick<Config, "cursorSecret" | "apiKeys">): string =>
  config.cursorSecret ??
  createHash("sha256")
    .update("memory-cursor-v1")
    .update(JSON.stringify(Object.entries(config.apiKeys).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))), "utf8")
    .digest("hex");

const LOOPBACK = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|\[::1\]|localhost)$/i;

/** Whether a bind address only accepts local connections. */
export const isLoopbackHost = (host: string): boolean => LOOPBACK.test(host.trim());

/**
 * What serving with the default public API key means on this address: "refuse" anywhere but
 * loopback (anyone could read and write the default tenant), "warn" on loopback, "ok" without it.
 */
export const defaultKeyExposure = (config: Pick<Config, "apiKeys" | "http">): "ok" | "warn" | "refuse" => {
  if (!Object.hasOwn(config.apiKeys, DEFAULT_API_KEY)) return "ok";
  return isLoopbackHost(config.http.host) ? "warn" : "refuse";
};
