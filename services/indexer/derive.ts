import { sha256, turnRowId } from "../core/ids.ts";
import type { IndexBatch, VectorItem } from "../core/ports.ts";
import { turnEmbeddingText } from "../core/turn-text.ts";
import type { MemoryRecord, Segment } from "../core/types.ts";

/** Event frames span about four turns and overlap by two, so neighbouring frames share records. */
export const FRAME_SPAN = 4;
export const FRAME_STRIDE = 2;

/**
 * Event frames: records of the same segment said within a window of neighbouring turns. Pure and
 * deterministic, so a replayed segment gives the same frame ids.
 */
export const deriveEventFrames = (segment: Segment, records: readonly MemoryRecord[]): IndexBatch["eventFrames"] => {
  const turnIds = segment.turns.map((t) => t.turnId);
  const frames: IndexBatch["eventFrames"] = [];
  const starts: number[] = [];
  for (let i = 0; i === 0 || i + FRAME_SPAN - FRAME_STRIDE < turnIds.length; i += FRAME_STRIDE) starts.push(i);
  for (const start of starts) {
    const window = new Set(turnIds.slice(start, start + FRAME_SPAN));
    const members = records.filter((r) => r.source.turnIds.some((t) => window.has(t))).map((r) => r.id);
    if (members.length === 0) continue;
    frames.push({
      id: sha256(`${segment.tenant}\u0000${segment.id}\u0000${start}`).slice(0, 32),
      recordIds: [...new Set(members)],
      turnIds: [...window],
    });
  }
  return frames;
};

export const deriveIndexBatch = (segment: Segment, records: readonly MemoryRecord[]): IndexBatch => ({
  tenant: segment.tenant,
  conversation: segment.conversation,
  segment,
  records: [...records],
  eventFrames: deriveEventFrames(segment, records),
});

const timeOf = (r: MemoryRecord): number => Date.parse(r.time.at ?? r.time.from ?? r.source.saidAt);

/**
 * The text a record's vector is embedded from: the one definition for vectorTexts and for the Kafka
 * indexer's prefetch of the next segment (embedding-prefetch.ts), which must ask for the same texts.
 */
export const recordVectorText = (r: MemoryRecord): string => r.text;

/** What the indexer embeds: every record text, and every raw turn for the fallback route. */
export const vectorTexts = (
  batch: IndexBatch,
): { id: string; text: string; payload: Omit<VectorItem, "vector" | "id">["payload"] }[] => [
  ...batch.records.map((r) => ({
    id: r.id,
    text: recordVectorText(r),
    payload: {
      tenant: batch.tenant,
      conversation: batch.conversation,
      kind: "record" as const,
      type: r.type,
      time: timeOf(r),
      entities: r.entities.map((e) => e.name.toLowerCase()),
    },
  })),
  ...batch.segment.turns.map((t) => ({
    id: turnRowId(batch.conversation, t.turnId),
    text: turnEmbeddingText(t.speaker, t.text),
    payload: {
      tenant: batch.tenant,
      conversation: batch.conversation,
      kind: "turn" as const,
      time: Date.parse(t.timestamp),
    },
  })),
];
