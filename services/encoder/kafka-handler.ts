/**
 * The encoder as a Kafka stage handler: closed segments -> records events, keyed state = the
 * disambiguation context of each tenant/conversation (JSON in memory.encoder-state.v1). An erase
 * control drops the context of its conversation (or of every conversation of its tenant) and
 * travels on to the indexer.
 */
import type { TopicCodec } from "../core/adapters/kafka/serde.ts";
import { PoisonError, type StageHandler } from "../core/adapters/kafka/stage-runtime.ts";
import { erasedKeys, isErasure } from "../core/adapters/kafka/topics.ts";
import type { LlmCost, SegmentEncoder } from "../core/ports.ts";
import { type DisambiguationContext, keyOf, type RecordsEvent, type Segment } from "../core/types.ts";
import { emptyContext } from "./extractor.ts";

export const ENCODER_STATE_VERSION = 1;

export interface EncoderStageDeps {
  input: TopicCodec<Segment>;
  output: TopicCodec<RecordsEvent>;
  stateCodec: NonNullable<StageHandler<Segment, RecordsEvent, DisambiguationContext>["state"]>["codec"];
  encoder: SegmentEncoder;
  /** LLM work of one encode (construction tokens). */
  onCost?(tenant: string, cost: LlmCost): void;
}

export const encoderStage = (deps: EncoderStageDeps): StageHandler<Segment, RecordsEvent, DisambiguationContext> => ({
  name: "encoder",
  input: deps.input,
  output: deps.output,
  state: { version: ENCODER_STATE_VERSION, codec: deps.stateCodec },
  async handle(key, input, state) {
    if (input.kind === "control") {
      // Flushes are the segmenter's business; they need not travel further. Erasures must.
      if (!isErasure(input.control)) return { outputs: [], state };
      const erased = erasedKeys(input.control, key);
      if (!erased) throw new PoisonError(`key "${key}" is not tenant/conversation`);
      return {
        outputs: [{ key, control: input.control, ...(input.erasedIds ? { erasedIds: input.erasedIds } : {}) }],
        state: undefined,
        dropKeys: erased.matches,
      };
    }
    const segment = input.value;
    const own = keyOf(segment.tenant, segment.conversation);
    if (key !== own) throw new PoisonError(`key "${key}" does not match the segment's tenant/conversation "${own}"`);
    const { records, context, cost } = await deps.encoder.encode(segment, state ?? emptyContext());
    if (cost.llmCalls > 0) deps.onCost?.(segment.tenant, cost);
    return {
      outputs: [
        { key: own, value: { tenant: segment.tenant, conversation: segment.conversation, segment, records, context } },
      ],
      state: context,
    };
  },
});
