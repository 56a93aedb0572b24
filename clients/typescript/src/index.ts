/**
 * @streaming-memory/client: a typed client of the memory service's HTTP API (see README.md).
 *
 *   const memory = new MemoryClient({ baseUrl: "http://127.0.0.1:8787", apiKey: process.env.MEMORY_API_KEY });
 *   await memory.ingest("c1", turns);
 *   const { context } = await memory.query({ question: "When did Jon lose his job?", budget: 1000 });
 */
export { type BatchLimits, type BatchPlan, jsonBytes, type PlannedBatch, planBatches } from "./batching.ts";
export {
  DEFAULT_MAX_BODY_BYTES,
  IngestBatchError,
  type IngestRejection,
  type IngestReport,
  type IterateOptions,
  MemoryClient,
  type MemoryClientOptions,
} from "./client.ts";
export {
  errorCodeOf,
  type Issue,
  MemoryApiError,
  type MemoryApiErrorCode,
  type MemoryApiErrorInit,
  MemoryNetworkError,
} from "./errors.ts";
export { MAX_BATCH_TURNS, MAX_LIST_LIMIT } from "./generated/limits.ts";
export type { components, operations, paths } from "./generated/openapi.ts";
export {
  backoffMs,
  type FetchLike,
  parseRetryAfter,
  type RetryOptions,
  type RetryPolicy,
  retryDelayMs,
  retryingFetch,
  retryPolicy,
} from "./retry.ts";
export type * from "./types.ts";
