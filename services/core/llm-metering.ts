/**
 * LLM metering, the port side: what every adapter uses to report its calls (the unattributed
 * default, a sink that never breaks a call) and the sinks a process wires up (Prometheus metrics,
 * a tee). Adapters import this module, never the factory or each other.
 */
import type { LlmCallMeta, LlmUsage, LlmUsageEvent, LlmUsageSink } from "./ports.ts";

/** Stage / tenant used when a request carries no meta. */
export const UNATTRIBUTED: LlmCallMeta = { stage: "unattributed", tenant: "unknown" };

/** A sink must never break a call: its errors are swallowed. */
export const reportUsage = (sink: LlmUsageSink | undefined, event: LlmUsageEvent): void => {
  if (!sink) return;
  try {
    sink(event);
  } catch {
    // metrics are best effort
  }
};

/** What a metrics registry needs to take LLM usage (platform/metrics.ts `Metrics` fits). */
export interface LlmMetricsTarget {
  llmCall(stage: string, tenant: string, usage: LlmUsage, opts?: { construction?: boolean }): void;
  stageEvent?(stage: string, outcome: "ok" | "error" | "dlq", seconds?: number): void;
}

export const isLlmMetricsTarget = (o: unknown): o is LlmMetricsTarget =>
  typeof o === "object" && o !== null && typeof (o as { llmCall?: unknown }).llmCall === "function";

/**
 * Usage sink into Prometheus metrics: calls and tokens per stage and tenant
 * (memory_llm_calls_total, memory_llm_tokens_total) and the call's latency as the stage
 * `llm:<stage>` of memory_stage_latency_seconds. Construction tokens are not added here: the
 * runtime counts them from the encoder's returned cost (no double count).
 */
export const metricsUsageSink =
  (metrics: LlmMetricsTarget): LlmUsageSink =>
  (e) => {
    metrics.llmCall(e.stage, e.tenant, e.usage);
    metrics.stageEvent?.(`llm:${e.stage}`, e.ok ? "ok" : "error", e.ms / 1000);
  };

/** Fan one event out to several sinks. */
export const teeUsageSinks =
  (...sinks: readonly (LlmUsageSink | undefined)[]): LlmUsageSink =>
  (e) => {
    for (const s of sinks) reportUsage(s, e);
  };
