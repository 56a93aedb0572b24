/**
 * The LLM encoder (docs/design.md §5, Encoder): one call per closed segment (or per batch of the segments
 * of one buffer release) turns its turns into self-contained records. The answer is JSON under a
 * schema (records with type, text, entities, topics, absolute time, source turn ids; alias and
 * referent updates), validated with zod; turn ids must lie inside the segment. Malformed output
 * is retried once; a second failure throws an `LlmEncoderError` carrying the raw response, so
 * the runtime dead-letters the segment with it.
 */
import {
  type EncodedSegment,
  type Llm,
  type LlmCost,
  type MeteredLlmRequest,
  NO_LLM_COST,
  type SegmentEncoder,
} from "../core/ports.ts";
import type { DisambiguationContext, MemoryRecord, Segment } from "../core/types.ts";
import { emptyContext } from "./context.ts";
import { buildRecords, InvalidEncoderOutput, type LlmEncoderAnswer, nextContext, validateAnswer } from "./llm-parse.ts";
import { DEFAULT_SCHEMA_LIMITS, ENCODER_SYSTEM, encoderJsonSchema, encoderUserPrompt } from "./llm-prompt.ts";

export interface LlmEncoderOptions {
  /** Hard cap of the disambiguation context (countTokens of its JSON), as sent and as kept. Default 300. */
  contextTokenCap: number;
  /** Latest record texts the context keeps. Default 5. */
  recentRecords: number;
  /** Records one answer may hold. Default 24. */
  maxRecords: number;
  /** Output tokens per call. Default 2048. */
  maxOutputTokens: number;
  /** A turn's text in the prompt is cut at this many tokens. Default 600. */
  maxTurnTokens: number;
  /** Segments per call in encodeBatch. Default 1 (one call per segment). */
  batchSegments: number;
  /** Stage name the calls are reported under. Default "encoder". */
  stage: string;
}

export const DEFAULT_LLM_ENCODER_OPTIONS: LlmEncoderOptions = {
  contextTokenCap: 300,
  recentRecords: 5,
  maxRecords: 24,
  maxOutputTokens: 2048,
  maxTurnTokens: 600,
  batchSegments: 1,
  stage: "encoder",
};

const RAW_IN_MESSAGE = 2000;

/** Invalid output twice: carries the raw response (also in the message, for the dead-letter store). */
export class LlmEncoderError extends Error {
  constructor(
    readonly reason: string,
    readonly raw: string,
    /** What the failed attempts cost (they are spent even though the segment is dead-lettered). */
    readonly cost: LlmCost,
  ) {
    const shown = raw.length > RAW_IN_MESSAGE ? `${raw.slice(0, RAW_IN_MESSAGE)}… (${raw.length} chars)` : raw;
    super(`llm encoder: invalid output after 2 attempts: ${reason}; raw response: ${shown}`);
    this.name = "LlmEncoderError";
  }
}

const addCost = (a: LlmCost, b: { inputTokens: number; outputTokens: number }): LlmCost => ({
  llmCalls: a.llmCalls + 1,
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens,
});

export class LlmEncoder implements SegmentEncoder {
  readonly id: string;
  readonly options: LlmEncoderOptions;

  constructor(
    private readonly llm: Llm,
    opts: Partial<LlmEncoderOptions> = {},
  ) {
    this.options = { ...DEFAULT_LLM_ENCODER_OPTIONS, ...opts };
    this.id = `llm-encoder-v1:${llm.id}`;
  }

  async encode(segment: Segment, context: DisambiguationContext): Promise<EncodedSegment> {
    const [out] = await this.encodeGroup([segment], context);
    return out!;
  }

  /**
   * The segments of one buffer release, `batchSegments` per call, the context threaded through.
   * Each result holds its segment's records; a call's cost is on the first segment of its group
   * (the others carry none), so the costs add up exactly.
   */
  async encodeBatch(segments: readonly Segment[], context: DisambiguationContext): Promise<EncodedSegment[]> {
    const out: EncodedSegment[] = [];
    let ctx = context;
    const size = Math.max(1, this.options.batchSegments);
    for (let i = 0; i < segments.length; i += size) {
      const group = await this.encodeGroup(segments.slice(i, i + size), ctx);
      out.push(...group);
      ctx = group[group.length - 1]!.context;
    }
    return out;
  }

  /** The request of one call (exposed for tests and cost estimates). */
  request(segments: readonly Segment[], context: DisambiguationContext): MeteredLlmRequest {
    const turnIds = segments.flatMap((s) => s.turns.map((t) => t.turnId));
    return {
      system: ENCODER_SYSTEM,
      user: encoderUserPrompt(segments, context, {
        contextTokenCap: this.options.contextTokenCap,
        maxTurnTokens: this.options.maxTurnTokens,
      }),
      // At most two records per turn: bounds what a constrained decoder can be made to emit.
      jsonSchema: encoderJsonSchema(turnIds, {
        ...DEFAULT_SCHEMA_LIMITS,
        maxRecords: Math.min(this.options.maxRecords, Math.max(2, 2 * turnIds.length)),
      }),
      maxTokens: this.options.maxOutputTokens,
      meta: { stage: this.options.stage, tenant: segments[0]?.tenant ?? "unknown" },
    };
  }

  private async encodeGroup(segments: readonly Segment[], context: DisambiguationContext): Promise<EncodedSegment[]> {
    if (segments.length === 0) return [];
    const ctx = context ?? emptyContext();
    const allowed = new Set(segments.flatMap((s) => s.turns.map((t) => t.turnId)));
    const base = this.request(segments, ctx);
    let cost: LlmCost = NO_LLM_COST;
    let answer: LlmEncoderAnswer | undefined;
    let reason = "";
    let raw = "";
    for (let attempt = 1; attempt <= 2 && !answer; attempt++) {
      const req: MeteredLlmRequest =
        attempt === 1
          ? base
          : {
              ...base,
              user: `${base.user}\n\nYour previous answer was rejected: ${reason}. Answer again with JSON that follows the schema, citing only the turn ids shown in square brackets.`,
            };
      const res = await this.llm.complete(req);
      cost = addCost(cost, res.usage);
      raw = res.text;
      try {
        answer = validateAnswer(res.text, allowed);
      } catch (err) {
        if (!(err instanceof InvalidEncoderOutput)) throw err;
        reason = err.message;
      }
    }
    if (!answer) throw new LlmEncoderError(reason, raw, cost);
    const aliases = { ...ctx.aliases, ...Object.fromEntries(answer.aliases.map((a) => [a.alias, a.name])) };
    const perSegment: MemoryRecord[][] = segments.map(() => []);
    // A record belongs to the segment of the first turn it cites.
    const owner = new Map(segments.flatMap((s, i) => s.turns.map((t) => [t.turnId, i] as const)));
    const bySegment = segments.map(() => [] as LlmEncoderAnswer["records"]);
    for (const r of answer.records) bySegment[owner.get(r.turnIds[0]!)!]!.push(r);
    segments.forEach((s, i) => {
      perSegment[i] = buildRecords(s, bySegment[i]!, aliases);
    });
    const limits = { contextTokenCap: this.options.contextTokenCap, recentRecords: this.options.recentRecords };
    const after = nextContext(ctx, segments, answer, perSegment.flat(), limits);
    return segments.map((_, i) => ({
      records: perSegment[i]!,
      context: after,
      cost: i === 0 ? cost : NO_LLM_COST,
    }));
  }
}
