/**
 * Model I/O for an LLMLingua-2-style token classifier on onnxruntime-node: a BERT / XLM-RoBERTa
 * encoder with a 2-label token-classification head, exported to ONNX (docs/compressor.md), its
 * own tokenizer (tokenizer.json via @huggingface/tokenizers), and optionally the encoder's
 * self-attention probabilities (exported with output_attentions) for the segmenter's attention
 * boundary refinement. Settings come from the model folder's manifest.json.
 *
 * This file only tokenises, pads, batches and runs the model: the sensory compressor
 * (onnx-compressor.ts) and the attention boundaries (segmenter/attention-boundaries.ts) hold the
 * decision logic as pure functions.
 */
import { constants } from "node:fs";
import { access, readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { InferenceSession, type Tensor } from "onnxruntime-node";
import type { AttentionRequest, ClassifiedSequence, TokenClassifier, WordAggregation } from "../../ports.ts";
import { int64Batch } from "./int64-batch.ts";
import { sharedSessionOptions } from "./session-options.ts";

export type ExecutionProvider = "cpu" | "cuda";

/** models/<name>/manifest.json of a token classifier (see docs/compressor.md). */
export interface TokenClassifierManifest {
  name: string;
  /** ONNX file, relative to the folder. */
  model: string;
  tokenizer: string;
  /** Optional tokenizer_config.json (special-token names, casing); {} when absent. */
  tokenizer_config?: string;
  /** Model window in tokens, special tokens included (512 for LLMLingua-2). */
  max_seq_length: number;
  /** Number of labels of the classification head (2 for LLMLingua-2). */
  num_labels: number;
  /** Index of the "keep" label (1 for LLMLingua-2: probs[..., 1] is the keep probability). */
  keep_label: number;
  /** Name of the [batch, seq, num_labels] logits output (default "logits"). */
  logits_output: string;
  /** Whether the export has attention outputs. */
  output_attentions: boolean;
  /**
   * The attention outputs, lower layers first: each is either one layer [batch, heads, seq, seq]
   * (the Hugging Face / optimum layout: attentions.0 ... attentions.11) or all layers stacked
   * [batch, layers, heads, seq, seq]. Default: every output whose name starts with "attentions",
   * in numeric order.
   */
  attention_outputs?: string[];
  /** How sub-token keep probabilities become a word's probability (default "mean", as LLMLingua-2). */
  word_aggregation: WordAggregation;
}

export const COMPRESSOR_SETUP_HINT =
  "See docs/compressor.md for exporting microsoft/llmlingua-2-bert-base-multilingual-cased-meetingbank to ONNX.";

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Validates the manifest; throws naming the bad field. */
export const parseTokenClassifierManifest = (raw: unknown, where: string): TokenClassifierManifest => {
  const bad = (field: string): never => {
    throw new Error(`invalid token-classifier manifest ${where}: bad or missing "${field}". ${COMPRESSOR_SETUP_HINT}`);
  };
  if (!isRecord(raw)) return bad("(root)");
  const str = (f: string, fallback?: string): string => {
    const v = raw[f] ?? fallback;
    return typeof v === "string" && v.length > 0 ? v : bad(f);
  };
  const int = (f: string, min: number, fallback?: number): number => {
    const v = raw[f] ?? fallback;
    return typeof v === "number" && Number.isInteger(v) && v >= min ? v : bad(f);
  };
  const numLabels = int("num_labels", 2, 2);
  const keepLabel = int("keep_label", 0, 1);
  if (keepLabel >= numLabels) bad("keep_label (must be < num_labels)");
  const outputAttentions = raw.output_attentions ?? false;
  if (typeof outputAttentions !== "boolean") bad("output_attentions");
  const att = raw.attention_outputs;
  if (att !== undefined && !(Array.isArray(att) && att.every((a) => typeof a === "string" && a.length > 0))) {
    bad("attention_outputs");
  }
  const agg = raw.word_aggregation ?? "mean";
  if (agg !== "mean" && agg !== "first" && agg !== "max") bad("word_aggregation (mean | first | max)");
  const tokenizerConfig = raw.tokenizer_config;
  if (tokenizerConfig !== undefined && (typeof tokenizerConfig !== "string" || tokenizerConfig === "")) {
    bad("tokenizer_config");
  }
  return {
    name: str("name"),
    model: str("model", "model.onnx"),
    tokenizer: str("tokenizer", "tokenizer.json"),
    ...(typeof tokenizerConfig === "string" ? { tokenizer_config: tokenizerConfig } : {}),
    max_seq_length: int("max_seq_length", 3),
    num_labels: numLabels,
    keep_label: keepLabel,
    logits_output: str("logits_output", "logits"),
    output_attentions: outputAttentions as boolean,
    ...(att !== undefined ? { attention_outputs: att as string[] } : {}),
    word_aggregation: agg as WordAggregation,
  };
};

export interface TokenClassifierOptions {
  /** Default ["cpu"]. ["cuda", "cpu"] uses CUDA and fails loudly when it is unavailable. */
  executionProviders?: readonly ExecutionProvider[];
  /** intra-op threads of the session on CPU (default 2). */
  threads?: number;
  /** Sequences per session.run (default 16). */
  batchSize?: number;
}

/** intra-op threads and sequences per session.run when the options do not say. */
export const DEFAULT_THREADS = 2;
export const DEFAULT_BATCH = 16;
const PIECE_CACHE_LIMIT = 50_000;

const softmaxKeep = (logits: Float32Array, base: number, labels: number, keep: number): number => {
  let max = Number.NEGATIVE_INFINITY;
  for (let k = 0; k < labels; k++) max = Math.max(max, logits[base + k]!);
  let sum = 0;
  for (let k = 0; k < labels; k++) sum += Math.exp(logits[base + k]! - max);
  return Math.exp(logits[base + keep]! - max) / sum;
};

/** Numeric order of "attentions.10" after "attentions.9". */
const layerOrder = (a: string, b: string): number => {
  const na = Number(/(\d+)\D*$/.exec(a)?.[1] ?? Number.NaN);
  const nb = Number(/(\d+)\D*$/.exec(b)?.[1] ?? Number.NaN);
  if (Number.isFinite(na) && Number.isFinite(nb) && na !== nb) return na - nb;
  return a < b ? -1 : a > b ? 1 : 0;
};

/** A view of one attention output as layers of [batch, heads, seq, seq]. */
export interface LayerView {
  data: Float32Array;
  /** element offset of (batch b, this layer, head 0, 0, 0) = b * batchStride + layerOffset */
  batchStride: number;
  layerOffset: number;
  heads: number;
  seq: number;
}

const layerViews = (t: Tensor, name: string): LayerView[] => {
  if (!(t.data instanceof Float32Array)) throw new Error(`attention output "${name}" is not float32`);
  const d = t.dims;
  if (d.length === 4) {
    const [, h, s] = d as [number, number, number, number];
    return [{ data: t.data, batchStride: h * s * s, layerOffset: 0, heads: h, seq: s }];
  }
  if (d.length === 5) {
    const [, l, h, s] = d as [number, number, number, number, number];
    return Array.from({ length: l }, (_, i) => ({
      data: t.data as Float32Array,
      batchStride: l * h * s * s,
      layerOffset: i * h * s * s,
      heads: h,
      seq: s,
    }));
  }
  throw new Error(`attention output "${name}" has shape [${d.join(", ")}], expected 4 or 5 dimensions`);
};

/**
 * Mean over the given layers and all heads of batch row b, cropped to the first n positions:
 * row-major [n, n]. Pure apart from reading the tensors.
 */
export const meanAttention = (layers: readonly LayerView[], b: number, n: number): Float32Array => {
  const out = new Float64Array(n * n);
  let count = 0;
  for (const L of layers) {
    const { seq, heads } = L;
    for (let h = 0; h < heads; h++) {
      const base = b * L.batchStride + L.layerOffset + h * seq * seq;
      for (let i = 0; i < n; i++) {
        const row = base + i * seq;
        for (let j = 0; j < n; j++) out[i * n + j]! += L.data[row + j]!;
      }
      count++;
    }
  }
  const res = new Float32Array(n * n);
  for (let k = 0; k < n * n; k++) res[k] = out[k]! / Math.max(count, 1);
  return res;
};

/**
 * A loaded token classifier (the `TokenClassifier` port). Create with {@link loadTokenClassifier}.
 * run() calls are serialised (one session.run at a time) so the configured threads hold.
 */
export class OnnxTokenClassifier implements TokenClassifier {
  readonly name: string;
  readonly maxLength: number;
  /** Content tokens per sequence: maxLength minus the special tokens the tokenizer adds. */
  readonly capacity: number;
  readonly batchSize: number;
  readonly hasAttentions: boolean;
  readonly aggregation: WordAggregation;
  readonly executionProviders: readonly ExecutionProvider[];
  private readonly session: InferenceSession;
  private readonly tokenizer: Tokenizer;
  private readonly manifest: TokenClassifierManifest;
  private readonly prefix: number[];
  private readonly suffix: number[];
  private readonly padId: number;
  private readonly attentionNames: string[];
  private readonly feedTokenTypes: boolean;
  private readonly pieces = new Map<string, number[]>();
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  /** Use {@link loadTokenClassifier}. */
  constructor(
    session: InferenceSession,
    tokenizer: Tokenizer,
    manifest: TokenClassifierManifest,
    init: {
      prefix: number[];
      suffix: number[];
      padId: number;
      batchSize: number;
      attentionNames: string[];
      executionProviders: readonly ExecutionProvider[];
    },
  ) {
    this.session = session;
    this.tokenizer = tokenizer;
    this.manifest = manifest;
    this.name = manifest.name;
    this.maxLength = manifest.max_seq_length;
    this.prefix = init.prefix;
    this.suffix = init.suffix;
    this.capacity = manifest.max_seq_length - init.prefix.length - init.suffix.length;
    this.padId = init.padId;
    this.batchSize = init.batchSize;
    this.attentionNames = init.attentionNames;
    this.hasAttentions = init.attentionNames.length > 0;
    this.aggregation = manifest.word_aggregation;
    this.executionProviders = init.executionProviders;
    this.feedTokenTypes = session.inputNames.includes("token_type_ids");
  }

  /** Leading special tokens the model sees before the content (1 for [CLS] / <s>). */
  get prefixLength(): number {
    return this.prefix.length;
  }

  /**
   * Sub-token ids of one whitespace-free word, without special tokens. Tokenising word by
   * word gives the same pieces as tokenising the text: whitespace is a boundary for both
   * BERT's pre-tokeniser and SentencePiece's metaspace.
   */
  wordPieces(word: string): number[] {
    const hit = this.pieces.get(word);
    if (hit !== undefined) return hit;
    const ids = this.tokenizer.encode(word, { add_special_tokens: false }).ids;
    if (this.pieces.size >= PIECE_CACHE_LIMIT) this.pieces.clear();
    this.pieces.set(word, ids);
    return ids;
  }

  /**
   * Runs the classifier on content sequences (each at most `capacity` ids; the special tokens
   * are added here), several per session.run. Results are in input order.
   */
  async run(sequences: readonly (readonly number[])[], attention?: AttentionRequest): Promise<ClassifiedSequence[]> {
    if (this.closed) throw new Error(`token classifier ${this.name} is closed`);
    if (attention !== undefined && !this.hasAttentions) {
      throw new Error(
        `token classifier ${this.name} has no attention outputs (export it with output_attentions; see docs/compressor.md)`,
      );
    }
    for (const s of sequences) {
      if (s.length > this.capacity) {
        throw new Error(`sequence of ${s.length} tokens exceeds the model window (${this.capacity} content tokens)`);
      }
    }
    const job = this.queue.then(() => this.runNow(sequences, attention));
    this.queue = job.catch(() => undefined);
    return job;
  }

  private async runNow(
    sequences: readonly (readonly number[])[],
    attention: AttentionRequest | undefined,
  ): Promise<ClassifiedSequence[]> {
    const order = sequences.map((s, i) => ({ i, n: s.length }));
    // Longest first: similar lengths share a batch, so little padding.
    order.sort((a, b) => b.n - a.n || a.i - b.i);
    const out = new Array<ClassifiedSequence>(sequences.length);
    for (let start = 0; start < order.length; start += this.batchSize) {
      const slice = order.slice(start, start + this.batchSize);
      const results = await this.forward(
        slice.map((o) => sequences[o.i]!),
        attention,
      );
      slice.forEach((o, k) => {
        out[o.i] = results[k]!;
      });
    }
    return out;
  }

  private async forward(
    batch: readonly (readonly number[])[],
    attention: AttentionRequest | undefined,
  ): Promise<ClassifiedSequence[]> {
    const b = batch.length;
    const full = batch.map((ids) => [...this.prefix, ...ids, ...this.suffix]);
    const tensors = int64Batch(full, this.padId);
    const seq = tensors.seq;
    const feeds: Record<string, Tensor> = { input_ids: tensors.inputIds, attention_mask: tensors.attentionMask };
    if (this.feedTokenTypes) feeds.token_type_ids = tensors.zeros();
    const fetches = [this.manifest.logits_output, ...(attention ? this.attentionNames : [])];
    const result = await this.session.run(feeds, fetches);
    try {
      const logits = result[this.manifest.logits_output];
      const labels = this.manifest.num_labels;
      if (
        logits === undefined ||
        !(logits.data instanceof Float32Array) ||
        logits.dims.length !== 3 ||
        logits.dims[0] !== b ||
        logits.dims[1] !== seq ||
        logits.dims[2] !== labels
      ) {
        throw new Error(
          `token classifier output "${this.manifest.logits_output}" has shape [${logits?.dims.join(", ") ?? ""}], expected float32 [${b}, ${seq}, ${labels}]`,
        );
      }
      let layers: LayerView[] = [];
      if (attention) {
        for (const name of this.attentionNames) {
          const t = result[name];
          if (t === undefined) throw new Error(`attention output "${name}" missing from the model result`);
          layers.push(...layerViews(t, name));
        }
        for (const L of layers) {
          if (L.seq !== seq) throw new Error(`attention output has sequence length ${L.seq}, expected ${seq}`);
        }
        const upper = attention.upperLayers ?? Math.max(1, Math.floor(layers.length / 2));
        if (!Number.isInteger(upper) || upper < 1)
          throw new Error(`upperLayers must be a positive integer, got ${upper}`);
        layers = layers.slice(Math.max(0, layers.length - upper));
      }
      const data = logits.data;
      return full.map((ids, r) => {
        const content = ids.length - this.prefix.length - this.suffix.length;
        const keep = new Float32Array(content);
        for (let j = 0; j < content; j++) {
          keep[j] = softmaxKeep(data, (r * seq + this.prefix.length + j) * labels, labels, this.manifest.keep_label);
        }
        return attention
          ? { keep, attention: meanAttention(layers, r, ids.length), size: ids.length }
          : { keep, size: ids.length };
      });
    } finally {
      for (const t of Object.values(feeds)) t.dispose();
      for (const t of Object.values(result)) t.dispose();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue;
    await this.session.release();
  }
}

const mustExist = async (path: string, what: string, dir: string): Promise<void> => {
  try {
    await access(path, constants.R_OK);
  } catch {
    throw new Error(
      `Token classifier not found: ${what} missing at ${path} (model folder ${dir}). ${COMPRESSOR_SETUP_HINT}`,
    );
  }
};

const readJson = async (path: string): Promise<unknown> => JSON.parse(await readFile(path, "utf8")) as unknown;

const CUDA_HINT =
  'The CUDA execution provider needs onnxruntime-node\'s CUDA binaries (installed with ONNXRUNTIME_NODE_INSTALL=cuda12 at npm install time, not by the default setup), CUDA 12 and cuDNN 9 libraries on the library path, and a visible GPU. Use executionProvider "cpu" otherwise.';

/**
 * Loads a token classifier folder (manifest.json, the ONNX file, tokenizer.json), creates the
 * session once on the requested execution providers and checks inputs and outputs.
 * Asking for "cuda" where it is unavailable is an error, never a silent CPU fallback.
 */
export async function loadTokenClassifier(
  modelDir: string,
  opts: TokenClassifierOptions = {},
): Promise<OnnxTokenClassifier> {
  const dir = resolve(modelDir);
  const manifestPath = join(dir, "manifest.json");
  await mustExist(manifestPath, "manifest.json", dir);
  const manifest = parseTokenClassifierManifest(await readJson(manifestPath), manifestPath);
  const modelPath = join(dir, manifest.model);
  const tokenizerPath = join(dir, manifest.tokenizer);
  await mustExist(modelPath, `model file ${manifest.model}`, dir);
  await mustExist(tokenizerPath, manifest.tokenizer, dir);
  let tokenizerConfig: object = {};
  if (manifest.tokenizer_config !== undefined) {
    const p = join(dir, manifest.tokenizer_config);
    await mustExist(p, manifest.tokenizer_config, dir);
    tokenizerConfig = (await readJson(p)) as object;
  }

  const threads = opts.threads ?? DEFAULT_THREADS;
  const batchSize = opts.batchSize ?? DEFAULT_BATCH;
  if (!Number.isInteger(threads) || threads < 1) throw new Error(`threads must be a positive integer, got ${threads}`);
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new Error(`batchSize must be a positive integer, got ${batchSize}`);
  }
  const eps = opts.executionProviders ?? ["cpu"];
  if (eps.length === 0) throw new Error("executionProviders must not be empty");
  for (const ep of eps) {
    if (ep !== "cpu" && ep !== "cuda") throw new Error(`unknown execution provider "${String(ep)}" (cpu | cuda)`);
  }

  const tokenizer = new Tokenizer((await readJson(tokenizerPath)) as object, tokenizerConfig);
  // The post-processor wraps every text as <prefix> ... <suffix>; the empty text shows them.
  const specials = tokenizer.encode("").ids;
  if (specials.length < 2) throw new Error(`tokenizer ${tokenizerPath} does not add start/end special tokens`);
  const prefix = specials.slice(0, 1);
  const suffix = specials.slice(1);
  if (manifest.max_seq_length <= specials.length) {
    throw new Error(`max_seq_length ${manifest.max_seq_length} leaves no room for content in ${manifestPath}`);
  }
  const padToken = (tokenizerConfig as { pad_token?: unknown }).pad_token;
  const padId = (typeof padToken === "string" ? tokenizer.token_to_id(padToken) : undefined) ?? 0;

  let session: InferenceSession;
  try {
    session = await InferenceSession.create(modelPath, sharedSessionOptions(threads, [...eps]));
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    if (eps.includes("cuda")) {
      throw new Error(`CUDA execution provider requested for ${modelPath} but unavailable: ${msg}. ${CUDA_HINT}`);
    }
    throw new Error(`could not load token classifier ${modelPath}: ${msg}`);
  }
  const fail = async (msg: string): Promise<never> => {
    await session.release();
    throw new Error(`${modelPath}: ${msg}`);
  };
  for (const name of ["input_ids", "attention_mask"]) {
    if (!session.inputNames.includes(name)) await fail(`no input "${name}" (inputs: ${session.inputNames.join(", ")})`);
  }
  if (!session.outputNames.includes(manifest.logits_output)) {
    await fail(`no output "${manifest.logits_output}" (outputs: ${session.outputNames.join(", ")})`);
  }
  let attentionNames: string[] = [];
  if (manifest.output_attentions) {
    attentionNames =
      manifest.attention_outputs ?? session.outputNames.filter((n) => n.startsWith("attentions")).sort(layerOrder);
    if (attentionNames.length === 0)
      await fail('manifest says output_attentions but the model has no "attentions*" output');
    for (const n of attentionNames) {
      if (!session.outputNames.includes(n))
        await fail(`no attention output "${n}" (outputs: ${session.outputNames.join(", ")})`);
    }
  }
  return new OnnxTokenClassifier(session, tokenizer, manifest, {
    prefix,
    suffix,
    padId,
    batchSize,
    attentionNames,
    executionProviders: eps,
  });
}
