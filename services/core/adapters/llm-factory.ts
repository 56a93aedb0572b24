/**
 * The factory that builds the configured LLM adapter (`llm.provider`: none | openai | local): the
 * one place that knows every LLM adapter. Metering (the request's meta, the usage sink) is part of
 * the port (ports.ts) and its helpers live in core/llm-metering.ts, so adapters never import this.
 */
import { join } from "node:path";
import type { Config } from "../config.ts";
import type { Llm, LlmUsageSink } from "../ports.ts";

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
