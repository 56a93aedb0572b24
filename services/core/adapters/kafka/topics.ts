import type { KafkaConfig } from "../../config.ts";

/** Every topic of docs/design.md §3 by role, with the prefix applied. */
export interface TopicNames {
  turns: string;
  sensory: string;
  segments: string;
  records: string;
  updateQueue: string;
  dlq: string;
  /** The compacted changelog of a stage's keyed state: memory.<stage>-state.v1. */
  state(stage: string): string;
}

export const topicNames = (cfg: KafkaConfig): TopicNames => {
  const p = cfg.topicPrefix;
  return {
    turns: p + cfg.topics.turns,
    sensory: p + cfg.topics.sensory,
    segments: p + cfg.topics.segments,
    records: p + cfg.topics.records,
    updateQueue: p + cfg.topics.updateQueue,
    dlq: p + cfg.topics.dlq,
    state: (stage) => `${p}memory.${stage}-state.v1`,
  };
};

/**
 * Control messages travel on the data topics as a header on a message with a null value, so that
 * they keep their place in the partition's order: a flush requested after turn 12 of a
 * conversation is seen by the segmenter after turn 12. The gateway's flush() produces one to the
 * turns topic; sensory forwards it; the segmenter closes the open segment and releases its buffer.
 */
export const CONTROL_HEADER = "memory-control";
export type ControlKind = "flush" | "session-end" | "idle";
export const isControlKind = (s: string): s is ControlKind => s === "flush" || s === "session-end" || s === "idle";
