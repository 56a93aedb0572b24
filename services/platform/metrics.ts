import { Counter, collectDefaultMetrics, Histogram, Registry } from "prom-client";

export type StageOutcome = "ok" | "error" | "dlq";
export type QueryOutcome = "ok" | "error";
export type TokenDirection = "input" | "output";

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

export interface MetricsOptions {
  /** Collect the process/runtime metrics (CPU, memory, event loop, GC) on this registry. Default true. */
  defaultMetrics?: boolean;
  /** Labels added to every series of this registry (e.g. { service: "gateway" }). */
  defaultLabels?: Record<string, string>;
}

/** Latency buckets (seconds) for pipeline stages: from sub-millisecond handlers to slow LLM calls. */
const STAGE_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Latency buckets (seconds) for queries and HTTP requests. */
const REQUEST_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * The service's Prometheus metrics, on a registry of their own (never the global one), so that
 * several instances (tests, embedded runtimes) can coexist in one process. All names are memory_*.
 */
export class Metrics {
  readonly registry: Registry;

  private readonly stageEvents: Counter<"stage" | "outcome">;
  private readonly stageLatency: Histogram<"stage">;
  private readonly segmentsClosed: Counter<"reason">;
  private readonly recordsWrittenTotal: Counter;
  private readonly embeddingCalls: Counter;
  private readonly embeddedTexts: Counter;
  private readonly queries: Counter<"outcome">;
  private readonly queryLatency: Histogram;
  private readonly httpRequests: Counter<"route" | "method" | "status">;
  private readonly httpLatency: Histogram<"route" | "method">;
  private readonly constructionTokensTotal: Counter<"stage" | "tenant" | "direction">;
  private readonly llmTokensTotal: Counter<"stage" | "tenant" | "direction">;
  private readonly llmCallsTotal: Counter<"stage" | "tenant">;

  constructor(options: MetricsOptions = {}) {
    const registry = new Registry();
    this.registry = registry;
    if (options.defaultLabels) registry.setDefaultLabels(options.defaultLabels);
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: "memory_" });
    const registers = [registry];

    this.stageEvents = new Counter({
      name: "memory_stage_events_total",
      help: "Events processed by a pipeline stage, by outcome (ok, error, dlq = sent to the dead-letter queue).",
      labelNames: ["stage", "outcome"],
      registers,
    });
    this.stageLatency = new Histogram({
      name: "memory_stage_latency_seconds",
      help: "Time a pipeline stage spent on one event.",
      labelNames: ["stage"],
      buckets: STAGE_BUCKETS,
      registers,
    });
    this.segmentsClosed = new Counter({
      name: "memory_segments_closed_total",
      help: "Segments closed by the segmenter, by reason (gate, hard-cap, session-end, idle, flush).",
      labelNames: ["reason"],
      registers,
    });
    this.recordsWrittenTotal = new Counter({
      name: "memory_records_written_total",
      help: "Memory records written by the indexer.",
      registers,
    });
    this.embeddingCalls = new Counter({
      name: "memory_embedding_calls_total",
      help: "Calls to the embedding model.",
      registers,
    });
    this.embeddedTexts = new Counter({
      name: "memory_embedded_texts_total",
      help: "Texts embedded (a call may embed several).",
      registers,
    });
    this.queries = new Counter({
      name: "memory_queries_total",
      help: "Memory queries, by outcome.",
      labelNames: ["outcome"],
      registers,
    });
    this.queryLatency = new Histogram({
      name: "memory_query_latency_seconds",
      help: "End-to-end latency of a memory query.",
      buckets: REQUEST_BUCKETS,
      registers,
    });
    this.httpRequests = new Counter({
      name: "memory_http_requests_total",
      help: "HTTP requests, by route pattern, method and status code.",
      labelNames: ["route", "method", "status"],
      registers,
    });
    this.httpLatency = new Histogram({
      name: "memory_http_request_duration_seconds",
      help: "HTTP request latency, by route pattern and method.",
      labelNames: ["route", "method"],
      buckets: REQUEST_BUCKETS,
      registers,
    });
    this.constructionTokensTotal = new Counter({
      name: "memory_construction_tokens_total",
      help: "LLM tokens spent writing memory (construction), by stage, tenant and direction.",
      labelNames: ["stage", "tenant", "direction"],
      registers,
    });
    this.llmTokensTotal = new Counter({
      name: "memory_llm_tokens_total",
      help: "All LLM tokens, by stage, tenant and direction (input, output).",
      labelNames: ["stage", "tenant", "direction"],
      registers,
    });
    this.llmCallsTotal = new Counter({
      name: "memory_llm_calls_total",
      help: "LLM calls, by stage and tenant.",
      labelNames: ["stage", "tenant"],
      registers,
    });
  }

  /** One event handled by a stage; `seconds` is how long it took, when known. */
  stageEvent(stage: string, outcome: StageOutcome, seconds?: number): void {
    this.stageEvents.inc({ stage, outcome });
    if (seconds !== undefined && Number.isFinite(seconds) && seconds >= 0)
      this.stageLatency.observe({ stage }, seconds);
  }

  segmentClosed(reason: string): void {
    this.segmentsClosed.inc({ reason });
  }

  recordsWritten(n: number): void {
    if (n > 0) this.recordsWrittenTotal.inc(n);
  }

  /** `calls` embedding calls that embedded `texts` texts in all. */
  embedding(calls: number, texts: number): void {
    if (calls > 0) this.embeddingCalls.inc(calls);
    if (texts > 0) this.embeddedTexts.inc(texts);
  }

  query(outcome: QueryOutcome, seconds: number): void {
    this.queries.inc({ outcome });
    if (Number.isFinite(seconds) && seconds >= 0) this.queryLatency.observe(seconds);
  }

  /** One HTTP request; `route` is the route pattern (e.g. /v1/records/:id), never the raw path. */
  httpRequest(route: string, method: string, status: number, seconds: number): void {
    this.httpRequests.inc({ route, method, status: String(status) });
    if (Number.isFinite(seconds) && seconds >= 0) this.httpLatency.observe({ route, method }, seconds);
  }

  /** One LLM call and its tokens. Calls made while writing memory also count as construction tokens. */
  llmCall(stage: string, tenant: string, usage: TokenUsage, opts: { construction?: boolean } = {}): void {
    this.llmCallsTotal.inc({ stage, tenant });
    this.addTokens(this.llmTokensTotal, stage, tenant, usage);
    if (opts.construction) this.addTokens(this.constructionTokensTotal, stage, tenant, usage);
  }

  /** Construction tokens alone (when the LLM call itself is counted elsewhere). */
  constructionTokens(stage: string, tenant: string, usage: TokenUsage): void {
    this.addTokens(this.constructionTokensTotal, stage, tenant, usage);
  }

  /** Prometheus text exposition of every metric in this registry. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private addTokens(
    counter: Counter<"stage" | "tenant" | "direction">,
    stage: string,
    tenant: string,
    usage: TokenUsage,
  ): void {
    if (usage.inputTokens > 0) counter.inc({ stage, tenant, direction: "input" }, usage.inputTokens);
    if (usage.outputTokens > 0) counter.inc({ stage, tenant, direction: "output" }, usage.outputTokens);
  }
}
