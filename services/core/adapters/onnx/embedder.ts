/**
 * Sentence embedder on onnxruntime-node (CPU): a BERT encoder exported to ONNX (see
 * infra/models/fetch-embedder.sh), the model's own WordPiece tokenizer (tokenizer.json via
 * @huggingface/tokenizers), mean pooling over the attention mask and L2 normalisation, as
 * the sentence-transformers model card says. Settings (variant files, max sequence length,
 * pooling) come from the model folder's manifest.json; the dimension comes from the model.
 */
import { constants } from "node:fs";
import { access, readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { InferenceSession, type Tensor } from "onnxruntime-node";
import type { Embedder, EmbedderStats } from "../../ports.ts";
import { int64Batch } from "./int64-batch.ts";
import { sharedSessionOptions } from "./session-options.ts";

export type OnnxVariant = "fp32" | "int8";

export interface OnnxEmbedderOptions {
  /** intra-op threads of the onnxruntime session (default 2). */
  threads?: number;
  /** Texts per forward pass at most (default 32); a pass holds texts of similar length (see lengthBatches). */
  batchSize?: number;
  /** Model file to use; default: the manifest's default_variant. */
  variant?: OnnxVariant;
}

/** The parts of models/<name>/manifest.json the loader reads. */
export interface EmbedderManifest {
  name: string;
  variants: Partial<Record<OnnxVariant, string>>;
  default_variant: OnnxVariant;
  tokenizer: string;
  tokenizer_config: string;
  max_seq_length: number;
  pooling: "mean" | "cls";
  normalize: boolean;
  output: string;
}

export const SETUP_HINT = "Run `npm run setup` (node scripts/setup.mjs), which fetches and converts the model.";

const DEFAULT_THREADS = 2;
const DEFAULT_BATCH = 32;
/**
 * A forward pass computes every position of its padded [batch, longest] tensor. Texts sorted
 * longest first start a new pass once the next one is shorter than this share of the pass's
 * longest, so padding is at most a quarter of a pass (the dev conversations' turns in passes of 32
 * in arrival order: 2.2× their real tokens computed; grouped: 1.1×).
 */
const MIN_LENGTH_SHARE = 0.75;
/** Texts longer than this many characters per allowed token are cut at a space before tokenising. */
const CHARS_PER_TOKEN_BOUND = 16;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

const isVariant = (v: unknown): v is OnnxVariant => v === "fp32" || v === "int8";

/** Validates the manifest and returns the fields the loader uses; throws naming the bad field. */
export const parseManifest = (raw: unknown, where: string): EmbedderManifest => {
  const bad = (field: string): never => {
    throw new Error(`invalid embedder manifest ${where}: bad or missing "${field}". ${SETUP_HINT}`);
  };
  if (!isRecord(raw)) return bad("(root)");
  const variantsRaw = raw.variants;
  if (!isRecord(variantsRaw)) return bad("variants");
  const variants: Partial<Record<OnnxVariant, string>> = {};
  for (const [k, v] of Object.entries(variantsRaw)) {
    if (isVariant(k) && typeof v === "string" && v.length > 0) variants[k] = v;
  }
  if (!isVariant(raw.default_variant) || variants[raw.default_variant] === undefined) bad("default_variant");
  const maxLen = raw.max_seq_length;
  if (typeof maxLen !== "number" || !Number.isInteger(maxLen) || maxLen < 3) bad("max_seq_length");
  if (raw.pooling !== "mean" && raw.pooling !== "cls") bad("pooling (mean or cls)");
  if (typeof raw.normalize !== "boolean") bad("normalize");
  for (const f of ["name", "tokenizer", "tokenizer_config", "output"] as const) {
    if (typeof raw[f] !== "string" || raw[f] === "") bad(f);
  }
  return {
    name: raw.name as string,
    variants,
    default_variant: raw.default_variant as OnnxVariant,
    tokenizer: raw.tokenizer as string,
    tokenizer_config: raw.tokenizer_config as string,
    max_seq_length: maxLen as number,
    pooling: raw.pooling as "mean" | "cls",
    normalize: raw.normalize as boolean,
    output: raw.output as string,
  };
};

const mustExist = async (path: string, what: string, modelDir: string): Promise<void> => {
  try {
    await access(path, constants.R_OK);
  } catch {
    throw new Error(`Embedding model not found: ${what} missing at ${path} (model folder ${modelDir}). ${SETUP_HINT}`);
  }
};

const readJson = async (path: string): Promise<unknown> => JSON.parse(await readFile(path, "utf8")) as unknown;

interface Encoded {
  index: number;
  ids: number[];
}

/**
 * Production embedder. Create with {@link loadOnnxEmbedder}; sessions are created once.
 * embed() calls are serialised (one forward pass at a time) so the configured thread count holds.
 */
export class OnnxEmbedder implements Embedder {
  readonly id: string;
  readonly dimension: number;
  readonly maxLength: number;
  readonly batchSize: number;
  readonly variant: OnnxVariant;
  private readonly session: InferenceSession;
  private readonly tokenizer: Tokenizer;
  private readonly manifest: EmbedderManifest;
  private readonly sepId: number;
  private readonly counters: EmbedderStats = { calls: 0, texts: 0, ms: 0 };
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  /** Use {@link loadOnnxEmbedder}. */
  constructor(
    session: InferenceSession,
    tokenizer: Tokenizer,
    manifest: EmbedderManifest,
    init: { variant: OnnxVariant; dimension: number; batchSize: number; sepId: number },
  ) {
    this.session = session;
    this.tokenizer = tokenizer;
    this.manifest = manifest;
    this.variant = init.variant;
    this.dimension = init.dimension;
    this.batchSize = init.batchSize;
    this.maxLength = manifest.max_seq_length;
    this.sepId = init.sepId;
    this.id = `onnx:${manifest.name}:${init.variant}`;
  }

  stats(): EmbedderStats {
    return { ...this.counters };
  }

  /**
   * Token ids as the model sees them: [CLS] ... [SEP], truncated to the manifest's max length
   * (the [SEP] is kept, as the Python tokenizers' truncation does).
   */
  tokenIds(text: string): number[] {
    const max = this.maxLength;
    // Very long inputs: tokenise a prefix cut at a plain whitespace (a token boundary for
    // BERT's pre-tokeniser, so the prefix's tokens are exactly the text's first tokens);
    // fall back to the whole text if the prefix does not yield enough tokens.
    const limit = max * CHARS_PER_TOKEN_BOUND;
    let ids: number[] | undefined;
    if (text.length > limit) {
      const cut = Math.max(
        text.lastIndexOf(" ", limit),
        text.lastIndexOf("\n", limit),
        text.lastIndexOf("\t", limit),
        text.lastIndexOf("\r", limit),
      );
      if (cut > 0) {
        const prefix = this.tokenizer.encode(text.slice(0, cut)).ids;
        if (prefix.length > max) ids = prefix;
      }
    }
    const all = ids ?? this.tokenizer.encode(text).ids;
    if (all.length <= max) return all;
    const out = all.slice(0, max - 1);
    out.push(this.sepId);
    return out;
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    if (this.closed) throw new Error("OnnxEmbedder is closed");
    const run = this.queue.then(() => this.embedNow(texts));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async embedNow(texts: readonly string[]): Promise<Float32Array[]> {
    const t0 = performance.now();
    try {
      const encoded: Encoded[] = texts.map((text, index) => ({ index, ids: this.tokenIds(text) }));
      // Longest first: similar lengths share a batch, so little padding.
      encoded.sort((a, b) => b.ids.length - a.ids.length || a.index - b.index);
      const out = new Array<Float32Array>(texts.length);
      for (const batch of lengthBatches(encoded, this.batchSize)) {
        const vectors = await this.forward(batch.map((e) => e.ids));
        batch.forEach((e, i) => {
          out[e.index] = vectors[i]!;
        });
      }
      return out;
    } finally {
      this.counters.calls += 1;
      this.counters.texts += texts.length;
      this.counters.ms += performance.now() - t0;
    }
  }

  /** One padded forward pass; returns pooled (and normalised) vectors in batch order. */
  private async forward(batch: readonly number[][]): Promise<Float32Array[]> {
    return forwardPass(this.session, this.manifest, batch, this.dimension);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue;
    await this.session.release();
  }
}

/**
 * Forward passes over texts sorted longest first: at most `batchSize` each, and a new one once a
 * text is shorter than MIN_LENGTH_SHARE of the pass's first (longest), so little of a pass is
 * padding. Exported for tests.
 */
export const lengthBatches = <T extends { ids: readonly number[] }>(sorted: readonly T[], batchSize: number): T[][] => {
  const out: T[][] = [];
  let cur: T[] = [];
  for (const e of sorted) {
    const longest = cur[0]?.ids.length ?? 0;
    if (cur.length > 0 && (cur.length >= batchSize || e.ids.length < MIN_LENGTH_SHARE * longest)) {
      out.push(cur);
      cur = [];
    }
    cur.push(e);
  }
  if (cur.length > 0) out.push(cur);
  return out;
};

const forwardPass = async (
  session: InferenceSession,
  manifest: EmbedderManifest,
  batch: readonly number[][],
  expectedDim: number | undefined,
): Promise<Float32Array[]> => {
  const b = batch.length;
  const tensors = int64Batch(batch);
  const seq = tensors.seq;
  const feeds: Record<string, Tensor> = {
    input_ids: tensors.inputIds,
    attention_mask: tensors.attentionMask,
    token_type_ids: tensors.zeros(),
  };
  const result = await session.run(feeds);
  const hidden = result[manifest.output];
  if (hidden === undefined || !(hidden.data instanceof Float32Array) || hidden.dims.length !== 3) {
    throw new Error(`embedder model did not return a float32 [batch, seq, hidden] "${manifest.output}"`);
  }
  const dim = hidden.dims[2]!;
  if (hidden.dims[0] !== b || hidden.dims[1] !== seq || (expectedDim !== undefined && dim !== expectedDim)) {
    throw new Error(`embedder output has shape [${hidden.dims.join(", ")}], expected [${b}, ${seq}, ${expectedDim}]`);
  }
  const h = hidden.data;
  const vectors: Float32Array[] = [];
  for (let r = 0; r < b; r++) {
    // Mean over real tokens (attention mask 1), or the [CLS] position alone for a model trained
    // with CLS pooling (bge-small-en-v1.5, the second-opinion model); accumulate in float64.
    const n = manifest.pooling === "cls" ? 1 : batch[r]!.length;
    const acc = new Float64Array(dim);
    for (let j = 0; j < n; j++) {
      const base = (r * seq + j) * dim;
      for (let k = 0; k < dim; k++) acc[k]! += h[base + k]!;
    }
    let norm = 0;
    for (let k = 0; k < dim; k++) {
      acc[k]! /= Math.max(n, 1);
      norm += acc[k]! * acc[k]!;
    }
    const scale = manifest.normalize ? 1 / Math.max(Math.sqrt(norm), 1e-12) : 1;
    const v = new Float32Array(dim);
    for (let k = 0; k < dim; k++) v[k] = acc[k]! * scale;
    vectors.push(v);
  }
  for (const t of Object.values(feeds)) t.dispose();
  hidden.dispose();
  return vectors;
};

/**
 * Loads models/<name> (manifest.json, the ONNX file of the chosen variant, tokenizer.json),
 * creates the session once and runs one warm-up pass that also reads the output dimension.
 * Throws an error naming the setup command when files are missing.
 */
export async function loadOnnxEmbedder(modelDir: string, opts: OnnxEmbedderOptions = {}): Promise<OnnxEmbedder> {
  const dir = resolve(modelDir);
  const manifestPath = join(dir, "manifest.json");
  await mustExist(manifestPath, "manifest.json", dir);
  const manifest = parseManifest(await readJson(manifestPath), manifestPath);

  const variant = opts.variant ?? manifest.default_variant;
  const file = manifest.variants[variant];
  if (file === undefined) {
    throw new Error(
      `embedder variant "${variant}" is not in ${manifestPath} (have: ${Object.keys(manifest.variants).join(", ")})`,
    );
  }
  const modelPath = join(dir, file);
  const tokenizerPath = join(dir, manifest.tokenizer);
  const tokenizerConfigPath = join(dir, manifest.tokenizer_config);
  await mustExist(modelPath, `${variant} model file ${file}`, dir);
  await mustExist(tokenizerPath, manifest.tokenizer, dir);
  await mustExist(tokenizerConfigPath, manifest.tokenizer_config, dir);

  const threads = opts.threads ?? DEFAULT_THREADS;
  const batchSize = opts.batchSize ?? DEFAULT_BATCH;
  if (!Number.isInteger(threads) || threads < 1) throw new Error(`threads must be a positive integer, got ${threads}`);
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new Error(`batchSize must be a positive integer, got ${batchSize}`);
  }

  const tokenizer = new Tokenizer(
    (await readJson(tokenizerPath)) as object,
    (await readJson(tokenizerConfigPath)) as object,
  );
  // The post-processor wraps every text as [CLS] ... [SEP]; the empty text shows the ids.
  const specials = tokenizer.encode("").ids;
  const sepId = specials[specials.length - 1];
  if (specials.length < 2 || sepId === undefined) {
    throw new Error(`tokenizer ${tokenizerPath} does not add [CLS]/[SEP] special tokens`);
  }

  const session = await InferenceSession.create(modelPath, sharedSessionOptions(threads));
  for (const name of ["input_ids", "attention_mask", "token_type_ids"]) {
    if (!session.inputNames.includes(name)) {
      await session.release();
      throw new Error(`${modelPath} has no input "${name}" (inputs: ${session.inputNames.join(", ")})`);
    }
  }
  // Warm-up pass on the empty sentence: reads the embedding dimension from the model output.
  let dimension: number;
  try {
    const [probe] = await forwardPass(session, manifest, [specials], undefined);
    dimension = probe!.length;
  } catch (err) {
    await session.release();
    throw err;
  }
  return new OnnxEmbedder(session, tokenizer, manifest, { variant, dimension, batchSize, sepId });
}
