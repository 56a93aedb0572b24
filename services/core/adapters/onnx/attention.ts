/**
 * The segmenter's turn attention on onnxruntime-node (CPU): the embedder's own BERT encoder built
 * a second time as a graph that returns the upper layers' self-attention averaged over layers and
 * heads (infra/models/build-attention.sh writes attention.onnx and attention.json beside the
 * embedder's model.onnx). A window of consecutive turns is one sequence [CLS] turn1 turn2 ... [SEP];
 * turns that do not fit are cut (earlier turns keep their end, the last keeps its beginning: the
 * tokens next to the boundary between them). Layers, window length and tokenizer come from
 * attention.json; nothing is downloaded here.
 */
import { constants } from "node:fs";
import { access, readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { InferenceSession, type Tensor } from "onnxruntime-node";
import { z } from "zod";
import type { TurnAttention, TurnSpan, WindowAttention } from "../../ports.ts";
import { int64Batch } from "./int64-batch.ts";
import { sharedSessionOptions } from "./session-options.ts";

export const ATTENTION_SETUP_HINT =
  "Run `npm run setup` (node scripts/setup.mjs), which builds attention.onnx from the embedder's weights.";

/** The fields of attention.json the loader reads (written by convert_bert_to_onnx.py attention-manifest). */
export const AttentionManifestSchema = z.object({
  name: z.string().min(1),
  kind: z.literal("attention"),
  file: z.string().min(1),
  output: z.string().min(1),
  layers: z.array(z.number().int().nonnegative()).min(1),
  num_hidden_layers: z.number().int().positive(),
  max_seq_length: z.number().int().min(3),
  tokenizer: z.string().min(1),
  tokenizer_config: z.string().min(1),
});
export type AttentionManifest = z.infer<typeof AttentionManifestSchema>;

export interface OnnxTurnAttentionOptions {
  /** intra-op threads of the onnxruntime session (default 2). */
  threads?: number;
  /** Windows per forward pass (default 16). */
  batchSize?: number;
}

export interface TurnAttentionStats {
  calls: number;
  windows: number;
  ms: number;
}

/** Texts longer than this many characters per window token are cut at a space before tokenising. */
const CHARS_PER_TOKEN_BOUND = 16;

/**
 * How many tokens each turn keeps so that the window holds at most `capacity`: the shortest turns
 * keep all theirs, the rest share what is left equally (longer turns take the division's remainder).
 */
export const fitLengths = (lengths: readonly number[], capacity: number): number[] => {
  const out = lengths.map(() => 0);
  let remaining = capacity;
  const order = lengths.map((len, i) => ({ len, i })).sort((a, b) => a.len - b.len || a.i - b.i);
  order.forEach(({ len, i }, k) => {
    const share = Math.floor(remaining / (order.length - k));
    out[i] = Math.min(len, share);
    remaining -= out[i]!;
  });
  // Leftovers from the floor division go to the cut turns, in window order.
  for (let i = 0; i < out.length && remaining > 0; i++) {
    const extra = Math.min(lengths[i]! - out[i]!, remaining);
    out[i]! += extra;
    remaining -= extra;
  }
  return out;
};

/** The window's content ids and spans: earlier turns keep their end, the last its beginning. */
export const packWindow = (
  turns: readonly (readonly number[])[],
  capacity: number,
  prefixLength: number,
): { ids: number[]; spans: TurnSpan[] } => {
  const keep = fitLengths(
    turns.map((t) => t.length),
    capacity,
  );
  const ids: number[] = [];
  const spans: TurnSpan[] = [];
  turns.forEach((t, i) => {
    const n = keep[i]!;
    const part = i === turns.length - 1 ? t.slice(0, n) : t.slice(t.length - n);
    spans.push({ start: prefixLength + ids.length, end: prefixLength + ids.length + part.length });
    ids.push(...part);
  });
  return { ids, spans };
};

export class OnnxTurnAttention implements TurnAttention {
  readonly id: string;
  readonly capacity: number;
  private readonly counters: TurnAttentionStats = { calls: 0, windows: 0, ms: 0 };
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  /** Use {@link loadOnnxTurnAttention}. */
  constructor(
    private readonly session: InferenceSession,
    private readonly tokenizer: Tokenizer,
    private readonly manifest: AttentionManifest,
    private readonly specials: { cls: number; sep: number },
    private readonly batchSize: number,
  ) {
    this.capacity = manifest.max_seq_length - 2;
    this.id = `onnx-attention:${manifest.name}:layers-${manifest.layers.join("-")}`;
  }

  stats(): TurnAttentionStats {
    return { ...this.counters };
  }

  /** Content token ids of one turn (no specials), bounded in cost for very long texts. */
  private contentIds(text: string): number[] {
    const limit = this.capacity * CHARS_PER_TOKEN_BOUND;
    const cut = text.length > limit ? text.lastIndexOf(" ", limit) : -1;
    return this.tokenizer.encode(cut > 0 ? text.slice(0, cut) : text, { add_special_tokens: false }).ids;
  }

  async attend(windows: readonly (readonly string[])[]): Promise<WindowAttention[]> {
    if (this.closed) throw new Error("OnnxTurnAttention is closed");
    const run = this.queue.then(() => this.attendNow(windows));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async attendNow(windows: readonly (readonly string[])[]): Promise<WindowAttention[]> {
    const t0 = performance.now();
    try {
      const packed = windows.map((w, index) => ({
        index,
        ...packWindow(
          w.map((t) => this.contentIds(t)),
          this.capacity,
          1,
        ),
      }));
      // Longest first: similar lengths share a batch, so little padding.
      packed.sort((a, b) => b.ids.length - a.ids.length || a.index - b.index);
      const out = new Array<WindowAttention>(windows.length);
      for (let start = 0; start < packed.length; start += this.batchSize) {
        const batch = packed.slice(start, start + this.batchSize);
        const seqs = batch.map((p) => [this.specials.cls, ...p.ids, this.specials.sep]);
        const matrices = await this.forward(seqs);
        batch.forEach((p, i) => {
          out[p.index] = { attention: matrices[i]!, size: seqs[i]!.length, spans: p.spans };
        });
      }
      return out;
    } finally {
      this.counters.calls += 1;
      this.counters.windows += windows.length;
      this.counters.ms += performance.now() - t0;
    }
  }

  /** One padded forward pass; each sequence's [n, n] block of the attention (n = its own length). */
  private async forward(seqs: readonly number[][]): Promise<Float32Array[]> {
    const t = int64Batch(seqs);
    const feeds: Record<string, Tensor> = {
      input_ids: t.inputIds,
      attention_mask: t.attentionMask,
      token_type_ids: t.zeros(),
    };
    const result = await this.session.run(feeds);
    const att = result[this.manifest.output];
    const b = seqs.length;
    const s = t.seq;
    if (!att || !(att.data instanceof Float32Array) || att.dims.join() !== [b, s, s].join()) {
      throw new Error(`attention model did not return float32 [${b}, ${s}, ${s}] "${this.manifest.output}"`);
    }
    const data = att.data;
    const out = seqs.map((seq, r) => {
      const n = seq.length;
      const m = new Float32Array(n * n);
      for (let i = 0; i < n; i++) m.set(data.subarray((r * s + i) * s, (r * s + i) * s + n), i * n);
      return m;
    });
    for (const f of Object.values(feeds)) f.dispose();
    att.dispose();
    return out;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue;
    await this.session.release();
  }
}

const mustExist = async (path: string, what: string): Promise<void> => {
  try {
    await access(path, constants.R_OK);
  } catch {
    throw new Error(`Attention model not found: ${what} missing at ${path}. ${ATTENTION_SETUP_HINT}`);
  }
};

const readJson = async (path: string): Promise<unknown> => JSON.parse(await readFile(path, "utf8")) as unknown;

/** The attention.json of a model folder, or undefined when the folder has none. */
export const hasTurnAttention = async (modelDir: string): Promise<boolean> => {
  try {
    await access(join(resolve(modelDir), "attention.json"), constants.R_OK);
    await access(join(resolve(modelDir), "attention.onnx"), constants.R_OK);
    return true;
  } catch {
    return false;
  }
};

/**
 * Loads models/<name>/attention.json and the graph it names; throws naming the setup command when
 * files are missing and the bad field when the manifest is wrong.
 */
export async function loadOnnxTurnAttention(
  modelDir: string,
  opts: OnnxTurnAttentionOptions = {},
): Promise<OnnxTurnAttention> {
  const dir = resolve(modelDir);
  const manifestPath = join(dir, "attention.json");
  await mustExist(manifestPath, "attention.json");
  const parsed = AttentionManifestSchema.safeParse(await readJson(manifestPath));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`invalid ${manifestPath}: "${issue?.path.join(".")}" ${issue?.message}. ${ATTENTION_SETUP_HINT}`);
  }
  const manifest = parsed.data;
  const threads = opts.threads ?? 2;
  const batchSize = opts.batchSize ?? 16;
  if (!Number.isInteger(threads) || threads < 1) throw new Error(`threads must be a positive integer, got ${threads}`);
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new Error(`batchSize must be a positive integer, got ${batchSize}`);
  const modelPath = join(dir, manifest.file);
  const tokenizerPath = join(dir, manifest.tokenizer);
  const tokenizerConfigPath = join(dir, manifest.tokenizer_config);
  await mustExist(modelPath, manifest.file);
  await mustExist(tokenizerPath, manifest.tokenizer);
  await mustExist(tokenizerConfigPath, manifest.tokenizer_config);
  const tokenizer = new Tokenizer(
    (await readJson(tokenizerPath)) as object,
    (await readJson(tokenizerConfigPath)) as object,
  );
  // The post-processor wraps every text as [CLS] ... [SEP]; the empty text shows the ids.
  const specials = tokenizer.encode("").ids;
  if (specials.length !== 2) throw new Error(`tokenizer ${tokenizerPath} does not add exactly [CLS] and [SEP]`);
  const session = await InferenceSession.create(modelPath, sharedSessionOptions(threads));
  if (!session.outputNames.includes(manifest.output)) {
    await session.release();
    throw new Error(`${modelPath} has no output "${manifest.output}" (outputs: ${session.outputNames.join(", ")})`);
  }
  return new OnnxTurnAttention(
    session,
    tokenizer,
    manifest,
    { cls: specials[0] as number, sep: specials[1] as number },
    batchSize,
  );
}
