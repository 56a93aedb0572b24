/**
 * Encoder stage handler (pure): a closed segment and the keyed state of its tenant/conversation
 * (the disambiguation context) -> the records event and the new state. No I/O, deterministic.
 */

import { type EncodedSegment, NO_LLM_COST, type SegmentEncoder } from "../core/ports.ts";
import {
  type DisambiguationContext,
  keyOf,
  type MemoryRecord,
  type RecordsEvent,
  type Segment,
} from "../core/types.ts";
import { type ExtractorOptions, emptyContext, extractRecords } from "./extractor.ts";

/** The encoder's keyed state: the disambiguation context of one tenant/conversation. */
export type EncoderState = DisambiguationContext;

/** State of a conversation the encoder has not seen yet. */
export const initialEncoderState = (): EncoderState => emptyContext();

/** Key of the state (and of the output event) for a segment: tenant/conversation. */
export const encoderStateKey = (segment: Segment): string => keyOf(segment.tenant, segment.conversation);

export interface EncodeResult {
  records: MemoryRecord[];
  /** The new state for encoderStateKey(segment). */
  state: EncoderState;
  /** The event for memory.records.v1 (records + context after the segment). */
  event: RecordsEvent;
}

/**
 * Encode one closed segment. `state` is the context kept for this segment's key (undefined for a
 * new conversation); the runtime stores the returned state under encoderStateKey(segment).
 */
export const encodeSegment = (
  segment: Segment,
  state: EncoderState | undefined,
  opts?: Partial<ExtractorOptions>,
): EncodeResult => {
  const { records, context } = extractRecords(segment, state ?? emptyContext(), opts);
  return {
    records,
    state: context,
    event: { tenant: segment.tenant, conversation: segment.conversation, segment, records, context },
  };
};

/** The deterministic extractor as the encoder strategy of a runtime: no LLM, no cost. */
export class ExtractiveEncoder implements SegmentEncoder {
  readonly id = "extractive-v1";

  constructor(private readonly opts: Partial<ExtractorOptions> = {}) {}

  async encode(segment: Segment, context: DisambiguationContext): Promise<EncodedSegment> {
    const { records, state } = encodeSegment(segment, context, this.opts);
    return { records, context: state, cost: NO_LLM_COST };
  }
}
