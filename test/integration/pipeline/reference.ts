/**
 * The uninterrupted in-process reference of the stateful stages (segmenter → encoder → indexer):
 * the same pure logic, in order, over copies of the bundled LoCoMo sample under distinct tenants,
 * and how the distributed run's outputs are shaped and read back for comparison with it. (The
 * crash test keeps its own copy; this one is parametrised by the tenants.)
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Kafka } from "kafkajs";
import type { PipelineCodecs } from "../../../services/core/adapters/kafka/serde.ts";
import type { TopicNames } from "../../../services/core/adapters/kafka/topics.ts";
import { loadOnnxEmbedder } from "../../../services/core/adapters/onnx/embedder.ts";
import { loadLocomo } from "../../../services/core/datasets/locomo.ts";
import { turnEmbeddingText } from "../../../services/core/turn-text.ts";
import { toTurn } from "../../../services/core/turn-validation.ts";
import {
  type DisambiguationContext,
  keyOf,
  type RecordsEvent,
  type Segment,
  type SensoryTurn,
  type Turn,
} from "../../../services/core/types.ts";
import { ExtractiveEncoder } from "../../../services/encoder/encode-segment.ts";
import { emptyContext } from "../../../services/encoder/extractor.ts";
import { DEFAULT_GATE } from "../../../services/segmenter/gate.ts";
import {
  initialSegmenterState,
  type SegmenterConfig,
  type SegmenterState,
  segmenterStep,
} from "../../../services/segmenter/segment-state.ts";
import { compressTurn } from "../../../services/sensory/compress-turn.ts";
import { StatisticalCompressor } from "../../../services/sensory/statistical-compressor.ts";
import { ROOT } from "../distributed/helpers.ts";
import { readAll } from "./helpers.ts";

export const EMBEDDER = join(ROOT, "models", "all-MiniLM-L6-v2");
export const KEEP_RATE = 0.7;
const SEG_CFG: SegmenterConfig = { gate: DEFAULT_GATE, bufferTokens: 0, idleTimeoutMs: 3_600_000 };

/** Stage settings the reference assumes (the stage processes get them in their environment). */
export const REFERENCE_ENV = {
  MEMORY_COMPRESSOR: "statistical",
  MEMORY_KEEP_RATE: String(KEEP_RATE),
  MEMORY_BUFFER_TOKENS: "0",
  MEMORY_IDLE_TIMEOUT_MS: "3600000",
};

export interface Conversation {
  key: string;
  tenant: string;
  sensory: SensoryTurn[];
  segments: Segment[];
  records: RecordsEvent[];
}

export const computeReference = async (
  who: readonly { tenant: string; conversation: string }[],
): Promise<Conversation[]> => {
  const [sample] = loadLocomo(join(ROOT, "services", "cli", "sample-locomo.json"));
  assert.ok(sample);
  const embedder = await loadOnnxEmbedder(EMBEDDER);
  const compressor = new StatisticalCompressor();
  const encoder = new ExtractiveEncoder();
  const out: Conversation[] = [];
  try {
    for (const { tenant, conversation } of who) {
      const turns = sample.turns.map((t, i) => toTurn(tenant, conversation, t, `t${i + 1}`) as Turn);
      const sensory: SensoryTurn[] = [];
      for (const t of turns) sensory.push(await compressTurn(t, compressor, KEEP_RATE));
      const vectors = await embedder.embed(sensory.map((t) => turnEmbeddingText(t.speaker, t.text)));
      let state: SegmenterState = initialSegmenterState(tenant, conversation);
      const segments: Segment[] = [];
      for (const [i, turn] of sensory.entries()) {
        const r = segmenterStep(
          state,
          { kind: "turn", turn, embedding: vectors[i] as Float32Array, nowMs: 0 },
          SEG_CFG,
        );
        state = r.state;
        segments.push(...r.segments);
      }
      segments.push(...segmenterStep(state, { kind: "flush", reason: "flush", nowMs: 0 }, SEG_CFG).segments);
      let context: DisambiguationContext = emptyContext();
      const records: RecordsEvent[] = [];
      for (const segment of segments) {
        const r = await encoder.encode(segment, context);
        context = r.context;
        records.push({ tenant, conversation, segment, records: r.records, context });
      }
      out.push({ key: keyOf(tenant, conversation), tenant, sensory, segments, records });
    }
  } finally {
    await embedder.close();
  }
  return out;
};

const shapes = {
  segments: (s: Segment) => ({ id: s.id, closedBy: s.closedBy, turns: s.turns.map((t) => t.turnId) }),
  records: (e: RecordsEvent) => ({ segment: e.segment.id, records: e.records.map((r) => r.id) }),
};
export type Checked = keyof typeof shapes;

/** The output topic read with read_committed (control messages left out), shaped per conversation. */
export const readShaped = async (
  kafka: Kafka,
  topics: TopicNames,
  codecs: PipelineCodecs,
  which: Checked,
): Promise<{ total: number; byKey: Map<string, unknown[]> }> => {
  const messages = (await readAll(kafka, topics[which], 120_000)).filter((m) => !m.control);
  const byKey = new Map<string, unknown[]>();
  for (const m of messages) {
    let shaped: unknown;
    if (which === "segments") {
      const d = await codecs.segments.decode(m.value);
      assert.ok(d.ok, d.ok ? "" : d.reason);
      shaped = shapes.segments(d.value);
    } else {
      const d = await codecs.records.decode(m.value);
      assert.ok(d.ok, d.ok ? "" : d.reason);
      shaped = shapes.records(d.value);
    }
    byKey.set(m.key, [...(byKey.get(m.key) ?? []), shaped]);
  }
  return { total: messages.length, byKey };
};

export const expectedOf = (conv: Conversation, which: Checked): unknown[] =>
  which === "segments" ? conv.segments.map(shapes.segments) : conv.records.map(shapes.records);
