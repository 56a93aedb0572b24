/**
 * LLM adapters: the usage sink they report every call to (cost per stage and per tenant), and the
 * factory that builds the configured one (`llm.provider`: none | openai | local).
 *
 * The `Llm` port carries no stage or tenant, so a caller that wants its calls attributed passes a
 * `MeteredLlmRequest` (an `LlmRequest` with `meta`); adapters read `meta` when present.
 */
import { join } from "node:path";
import type { Config } from "../config.ts";
import type { Llm, LlmRequest, LlmUsage } from "../ports.ts";

/** Who a call is for: the pipeline stage (encoder, planner, answer) and the tenant. */
export interface LlmCallMeta {
  stage: string;
  tenant: string;
}

export interface MeteredLlmRequest extends LlmRequest {
  meta?: LlmCallMeta;
}

/** Reads the meta of a request that may carry one. */
export const metaOf = (req: LlmRequest): LlmCallMeta | undefined => (req as MeteredLlmRequest).meta;

/** One completed (or failed) LLM call, as an adapter reports it. */
export interface LlmUsageEvent {
  stage: string;
  tenant: string;
  /** Adapter id, e.g. "openai:gpt-4.1-mini" or "llama:gemma-3-270m-q4_k_m". */
  llm: string;
  usage: LlmUsage;
  /** Wall time of the call, retries and back-off included. */
  ms: number;
  ok: boolean;
  /** HTTP attempts (openai) or 1 (local). */
  attempts: number;
}

export type LlmUsageSink = (event: LlmUsageEvent) => void;

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

/** An Llm that may hold resources (a loaded model). */
export type ClosableLlm = Llm & { close?(): Promise<void> };

export type LlmConfig = Config["llm"];

/** The GGUF the local provider loads when `llm.gguf` is not set (see infra/models/fetch-llm.sh). */
export const DEFAULT_GGUF = join("smollm2-135m-instruct-q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf");

export interface CreateLlmOptions {
  /** Where relative defaults resolve (config.modelDir). */
  modelDir: string;
  usageSink?: LlmUsageSink;
}

/**
 * Builds the configured LLM, or undefined for provider "none". The local adapter (and with it
 * node-llama-cpp) is imported only when asked for.
 */
export const createLlm = async (llm: LlmConfig, opts: CreateLlmOptions): Promise<ClosableLlm | undefined> => {
  switch (llm.provider) {
    case "none":
      return undefined;
    case "openai": {
      const { OpenAiLlm } = await import("./openai/llm.ts");
      return new OpenAiLlm({
        model: llm.model,
        ...(llm.baseUrl ? { baseUrl: llm.baseUrl } : {}),
        ...(llm.apiKey ? { apiKey: llm.apiKey } : {}),
        timeoutMs: llm.timeoutMs ?? 60_000,
        maxRetries: llm.maxRetries,
        ...(opts.usageSink ? { usageSink: opts.usageSink } : {}),
      });
    }
    case "local": {
      const { LlamaLlm } = await import("./llama/llm.ts");
      return LlamaLlm.load({
        modelPath: llm.gguf ?? join(opts.modelDir, DEFAULT_GGUF),
        contextSize: llm.contextSize,
        // A small CPU model takes minutes on a long segment.
        timeoutMs: llm.timeoutMs ?? 600_000,
        ...(llm.threads ? { threads: llm.threads } : {}),
        ...(opts.usageSink ? { usageSink: opts.usageSink } : {}),
      });
    }
  }
};
