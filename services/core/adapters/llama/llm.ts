/**
 * `Llm` over a local GGUF model with node-llama-cpp on the CPU (its prebuilt binary from the npm
 * registry; nothing is built or downloaded at run time). A JSON schema becomes a grammar
 * (LlamaJsonSchemaGrammar), so the output always parses (unless cut by maxTokens). Calls run one
 * at a time on one context sequence whose history is cleared before each call, so the sequence's
 * token meter, read as a difference, is exactly the prompt tokens evaluated (input) and the
 * tokens generated (output).
 */
import { existsSync } from "node:fs";
import { basename } from "node:path";
import type {
  GbnfJsonObjectSchema,
  Llama,
  LlamaContext,
  LlamaContextSequence,
  LlamaGrammar,
  LlamaModel,
} from "node-llama-cpp";
import { reportUsage, UNATTRIBUTED } from "../../llm-metering.ts";
import type { Llm, LlmResponse, LlmUsage, LlmUsageSink, MeteredLlmRequest } from "../../ports.ts";

export interface LlamaLlmOptions {
  modelPath: string;
  /** Context window in tokens. Default 4096. */
  contextSize?: number;
  /** CPU threads. Default: node-llama-cpp's choice. */
  threads?: number;
  /** Whole-call limit. Default 120 s. */
  timeoutMs?: number;
  /** 0 = greedy (default). */
  temperature?: number;
  /** Output tokens when the request sets none. Default 1024. */
  maxTokens?: number;
  usageSink?: LlmUsageSink;
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

type NodeLlamaCpp = typeof import("node-llama-cpp");

/** node-llama-cpp's grammar takes oneOf, not anyOf; everything else used here maps one to one. */
export const toGbnfSchema = (schema: Json): GbnfJsonObjectSchema => {
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (!isObj(node)) return node;
    const out: Json = {};
    for (const [k, v] of Object.entries(node)) out[k === "anyOf" ? "oneOf" : k] = k === "enum" ? v : walk(v);
    return out;
  };
  return walk(schema) as GbnfJsonObjectSchema;
};

export class LlamaLlm implements Llm {
  readonly id: string;
  private readonly grammars = new Map<string, LlamaGrammar>();
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(
    private readonly lib: NodeLlamaCpp,
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly sequence: LlamaContextSequence,
    private readonly opts: LlamaLlmOptions,
  ) {
    this.id = `llama:${basename(opts.modelPath).replace(/\.gguf$/i, "")}`;
  }

  /** Loads the model (CPU only; fails rather than build or download anything). */
  static async load(opts: LlamaLlmOptions): Promise<LlamaLlm> {
    if (!existsSync(opts.modelPath))
      throw new Error(
        `local LLM: GGUF not found at ${opts.modelPath} (run: bash infra/models/fetch-llm.sh, or set MEMORY_LLM_GGUF)`,
      );
    const lib = await import("node-llama-cpp");
    const llama = await lib.getLlama({ gpu: false, build: "never", logLevel: lib.LlamaLogLevel.error });
    const model = await llama.loadModel({ modelPath: opts.modelPath });
    const context = await model.createContext({
      contextSize: opts.contextSize ?? 4096,
      sequences: 1,
      ...(opts.threads ? { threads: opts.threads } : {}),
    });
    return new LlamaLlm(lib, llama, model, context, context.getSequence(), opts);
  }

  /** Token count of a text in the model's own tokenizer. */
  countTokens(text: string): number {
    return this.model.tokenize(text).length;
  }

  complete(req: MeteredLlmRequest): Promise<LlmResponse> {
    const run = this.queue.then(() => this.run(req));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private grammar(schema: Json): LlamaGrammar {
    const key = JSON.stringify(schema);
    let g = this.grammars.get(key);
    if (!g) {
      // The grammar's layout (newlines, indentation) is left as node-llama-cpp writes it: forcing
      // compact JSON made a small model propose rejected tokens, each a full-vocabulary grammar
      // pass, and ran 3-4x slower for fewer tokens.
      g = new this.lib.LlamaJsonSchemaGrammar<GbnfJsonObjectSchema>(this.llama, toGbnfSchema(schema));
      this.grammars.set(key, g);
      if (this.grammars.size > 64) this.grammars.delete(this.grammars.keys().next().value as string);
    }
    return g;
  }

  private async run(req: MeteredLlmRequest): Promise<LlmResponse> {
    if (this.closed) throw new Error(`${this.id}: closed`);
    const meta = req.meta ?? UNATTRIBUTED;
    const started = performance.now();
    const sequence = this.sequence;
    await sequence.clearHistory();
    const before = sequence.tokenMeter.getState();
    const used = (): LlmUsage => {
      const d = sequence.tokenMeter.diff(before);
      return { inputTokens: d.usedInputTokens, outputTokens: d.usedOutputTokens };
    };
    // forceAddSystemPrompt: chat wrappers without a system role (Gemma) would drop it otherwise;
    // with it they prepend the system text to the user turn.
    const session = new this.lib.LlamaChatSession({
      contextSequence: sequence,
      systemPrompt: req.system,
      forceAddSystemPrompt: true,
    });
    const timeoutMs = this.opts.timeoutMs ?? 120_000;
    const signal = AbortSignal.timeout(timeoutMs);
    const report = (usage: LlmUsage, ok: boolean): void =>
      reportUsage(this.opts.usageSink, {
        ...meta,
        llm: this.id,
        usage,
        ms: performance.now() - started,
        ok,
        attempts: 1,
      });
    try {
      const grammar = req.jsonSchema ? this.grammar(req.jsonSchema) : undefined;
      const text = await session.prompt(req.user, {
        maxTokens: req.maxTokens ?? this.opts.maxTokens ?? 1024,
        temperature: this.opts.temperature ?? 0,
        signal,
        ...(grammar ? { grammar } : {}),
      });
      const usage = used();
      report(usage, true);
      return { text, usage };
    } catch (err) {
      report(used(), false);
      if (signal.aborted) throw new Error(`${this.id}: timed out after ${timeoutMs} ms`, { cause: err });
      throw new Error(`${this.id}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    } finally {
      session.dispose({ disposeSequence: false });
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue;
    this.sequence.dispose();
    await this.context.dispose();
    await this.model.dispose();
    await this.llama.dispose();
  }
}
