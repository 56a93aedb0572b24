/**
 * `Llm` over any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp server,
 * Ollama, LiteLLM, ...), with JSON-schema structured output, a per-request timeout, bounded
 * retries with exponential back-off on 408/429/5xx and network errors (Retry-After honoured),
 * and usage from the server's `usage` block, else counted with the o200k tokenizer.
 */
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import { reportUsage, UNATTRIBUTED } from "../../llm-metering.ts";
import type { Llm, LlmRequest, LlmResponse, LlmUsage, LlmUsageSink, MeteredLlmRequest } from "../../ports.ts";
import { countTokens } from "../../tokens.ts";

export interface OpenAiLlmOptions {
  model: string;
  /** Default: the OpenAI API. Any OpenAI-compatible base URL (ending in /v1 for most servers). */
  baseUrl?: string;
  /** Default: a placeholder (local servers usually need none); config falls back to OPENAI_API_KEY. */
  apiKey?: string;
  /** Per HTTP attempt. Default 60 s. */
  timeoutMs?: number;
  /** Retries after the first attempt. Default 3. */
  maxRetries?: number;
  /** First back-off; doubles per retry. Default 500 ms. */
  backoffMs?: number;
  /** Cap of one back-off and of an honoured Retry-After. Default 30 s. */
  maxBackoffMs?: number;
  temperature?: number;
  /** Output tokens when the request sets none. Default 2048. */
  maxTokens?: number;
  /** OpenAI's newer models take max_completion_tokens; most compatible servers take max_tokens. */
  maxTokensField?: "max_tokens" | "max_completion_tokens";
  /** Send the schema with strict: true when it fits Structured Outputs' subset. Default true. */
  strictSchema?: boolean;
  usageSink?: LlmUsageSink;
  /** Test hook. */
  sleep?: (ms: number) => Promise<void>;
}

export class LlmRequestError extends Error {
  constructor(
    message: string,
    readonly status: number | undefined,
    readonly attempts: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "LlmRequestError";
  }
}

const RETRY_STATUSES = new Set([408, 409, 429]);
const retryableStatus = (status: number | undefined): boolean =>
  status !== undefined && (RETRY_STATUSES.has(status) || status >= 500);

/** Milliseconds a Retry-After (or OpenAI's retry-after-ms) header asks for, if any. */
export const retryAfterMs = (headers: Headers | undefined, now = Date.now()): number | undefined => {
  if (!headers) return undefined;
  const ms = headers.get("retry-after-ms");
  if (ms !== null && ms.trim() !== "" && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Number(ms);
  const ra = headers.get("retry-after");
  if (ra === null || ra.trim() === "") return undefined;
  const secs = Number(ra);
  if (Number.isFinite(secs)) return secs >= 0 ? secs * 1000 : undefined;
  const at = Date.parse(ra);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
};

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The schema in Structured Outputs' dialect: oneOf -> anyOf, string length bounds dropped (not
 * supported there). `strict` only when every object lists all its properties as required and
 * forbids additional ones.
 */
export const toOpenAiSchema = (schema: Json): { schema: Json; strict: boolean } => {
  let strict = true;
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (!isObj(node)) return node;
    const out: Json = {};
    for (const [k, v] of Object.entries(node)) {
      if (k === "minLength" || k === "maxLength") continue;
      out[k === "oneOf" ? "anyOf" : k] = k === "enum" || k === "const" ? v : walk(v);
    }
    if (out.type === "object" && isObj(out.properties)) {
      const keys = Object.keys(out.properties);
      const req = Array.isArray(out.required) ? out.required : [];
      if (out.additionalProperties !== false || keys.some((key) => !req.includes(key))) strict = false;
    }
    return out;
  };
  return { schema: walk(schema) as Json, strict };
};

const defaultSleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class OpenAiLlm implements Llm {
  readonly id: string;
  private readonly client: OpenAI;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(private readonly opts: OpenAiLlmOptions) {
    this.id = `openai:${opts.model}`;
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.maxRetries = Math.max(0, opts.maxRetries ?? 3);
    this.backoffMs = opts.backoffMs ?? 500;
    this.maxBackoffMs = opts.maxBackoffMs ?? 30_000;
    this.sleep = opts.sleep ?? defaultSleep;
    this.client = new OpenAI({
      apiKey: opts.apiKey ?? "no-key",
      ...(opts.baseUrl ? { baseURL: opts.baseUrl } : {}),
      timeout: this.timeoutMs,
      maxRetries: 0, // retries are ours: bounded, with back-off and Retry-After, and counted
    });
  }

  async complete(req: MeteredLlmRequest): Promise<LlmResponse> {
    const meta = req.meta ?? UNATTRIBUTED;
    const started = performance.now();
    const maxTokens = req.maxTokens ?? this.opts.maxTokens ?? 2048;
    const format = req.jsonSchema ? toOpenAiSchema(req.jsonSchema) : undefined;
    const body: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming = {
      model: this.opts.model,
      messages: [
        { role: "system", content: req.system },
        { role: "user", content: req.user },
      ],
      temperature: this.opts.temperature ?? 0,
      ...((this.opts.maxTokensField ?? "max_tokens") === "max_tokens"
        ? { max_tokens: maxTokens }
        : { max_completion_tokens: maxTokens }),
      ...(format
        ? {
            response_format: {
              type: "json_schema",
              json_schema: {
                name: "answer",
                schema: format.schema,
                strict: (this.opts.strictSchema ?? true) && format.strict,
              },
            },
          }
        : {}),
    };
    let attempts = 0;
    for (;;) {
      attempts++;
      try {
        const res = await this.client.chat.completions.create(body, { timeout: this.timeoutMs, maxRetries: 0 });
        const choice = res.choices[0];
        const text = choice?.message.content ?? "";
        if (text === "" && choice?.message.refusal)
          throw new LlmRequestError(`${this.id}: the model refused: ${choice.message.refusal}`, 200, attempts);
        const usage: LlmUsage =
          res.usage && Number.isFinite(res.usage.prompt_tokens) && Number.isFinite(res.usage.completion_tokens)
            ? { inputTokens: res.usage.prompt_tokens, outputTokens: res.usage.completion_tokens }
            : { inputTokens: this.countSent(req, format?.schema), outputTokens: countTokens(text) };
        reportUsage(this.opts.usageSink, {
          ...meta,
          llm: this.id,
          usage,
          ms: performance.now() - started,
          ok: true,
          attempts,
        });
        return { text, usage };
      } catch (err) {
        const status = err instanceof APIError ? err.status : undefined;
        const transient =
          err instanceof APIConnectionError && !(err instanceof APIUserAbortError) ? true : retryableStatus(status);
        if (transient && attempts <= this.maxRetries) {
          const backoff = Math.min(this.maxBackoffMs, this.backoffMs * 2 ** (attempts - 1));
          const asked = err instanceof APIError ? retryAfterMs(err.headers as Headers | undefined) : undefined;
          const wait = asked !== undefined ? Math.min(this.maxBackoffMs, asked) : backoff * (0.8 + 0.4 * Math.random());
          await this.sleep(wait);
          continue;
        }
        reportUsage(this.opts.usageSink, {
          ...meta,
          llm: this.id,
          usage: { inputTokens: 0, outputTokens: 0 },
          ms: performance.now() - started,
          ok: false,
          attempts,
        });
        throw this.describe(err, attempts);
      }
    }
  }

  /** o200k count of what was sent: both messages and the schema (when the server reports no usage). */
  private countSent(req: LlmRequest, schema: Json | undefined): number {
    return countTokens(req.system) + countTokens(req.user) + (schema ? countTokens(JSON.stringify(schema)) : 0);
  }

  private describe(err: unknown, attempts: number): Error {
    if (err instanceof LlmRequestError) return err;
    const where = `${this.id} at ${this.client.baseURL}`;
    const tries = `${attempts} attempt${attempts === 1 ? "" : "s"}`;
    if (err instanceof APIConnectionTimeoutError)
      return new LlmRequestError(`${where}: timed out after ${this.timeoutMs} ms (${tries})`, undefined, attempts, {
        cause: err,
      });
    if (err instanceof APIError && err.status !== undefined)
      return new LlmRequestError(`${where}: HTTP ${err.status} (${tries}): ${err.message}`, err.status, attempts, {
        cause: err,
      });
    const msg = err instanceof Error ? err.message : String(err);
    return new LlmRequestError(`${where}: ${msg} (${tries})`, undefined, attempts, { cause: err });
  }
}
