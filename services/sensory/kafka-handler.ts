/**
 * The sensory stage as a Kafka stage handler: turns -> compressed turns (stateless), each with its
 * embedding when the stage has an embedder (turn-embedding.ts): the turn's one embedding in the
 * distributed pipeline, which the segmenter's boundary gate and the indexer's raw-turn consumer
 * both reuse instead of each embedding the same text (issue 18).
 */
import type { TopicCodec } from "../core/adapters/kafka/serde.ts";
import { PoisonError, type StageHandler } from "../core/adapters/kafka/stage-runtime.ts";
import { type SensoryEvent, turnEmbeddingOf } from "../core/adapters/kafka/turn-embedding.ts";
import type { Compressor, Embedder } from "../core/ports.ts";
import { turnEmbeddingText } from "../core/turn-text.ts";
import { keyOf, type Turn } from "../core/types.ts";
import { compressTurn } from "./compress-turn.ts";

export interface SensoryStageDeps {
  input: TopicCodec<Turn>;
  output: TopicCodec<SensoryEvent>;
  compressor: Compressor;
  keepRate: number;
  /**
   * A caching embedder: prepare() embeds a chunk's turns in one call, handle() hits the cache.
   * Absent: turns leave without a vector, and their consumers embed them (as before issue 18).
   */
  embedder?: Embedder;
}

/** The text both consumers embed a turn as (the gate and the raw-turn route: the same string). */
const textOf = (t: Pick<Turn, "speaker" | "text">): string => turnEmbeddingText(t.speaker, t.text);

export const sensoryStage = (deps: SensoryStageDeps): StageHandler<Turn, SensoryEvent, never> => ({
  name: "sensory",
  input: deps.input,
  output: deps.output,
  async prepare(inputs) {
    if (!deps.embedder) return;
    const texts = inputs.flatMap(({ input }) => (input.kind === "event" ? [textOf(input.value)] : []));
    // A failed call is logged by the runtime; handle() then embeds each turn alone (the one at fault fails alone).
    if (texts.length > 0) await deps.embedder.embed(texts);
  },
  async handle(key, input) {
    // Control messages (flush, session end, erase) keep their place in the conversation's order;
    // an erase-tenant's key hashes to its partition, so forwarding by key keeps it there.
    if (input.kind === "control") {
      const { control, erasedIds } = input;
      return { outputs: [{ key, control, ...(erasedIds ? { erasedIds } : {}) }], state: undefined };
    }
    const turn = input.value;
    const own = keyOf(turn.tenant, turn.conversation);
    if (key !== own) throw new PoisonError(`key "${key}" does not match the turn's tenant/conversation "${own}"`);
    const sensory = await compressTurn(turn, deps.compressor, deps.keepRate);
    if (!deps.embedder) return { outputs: [{ key: own, value: sensory }], state: undefined };
    const [vector] = await deps.embedder.embed([textOf(turn)]);
    if (!vector) throw new Error("embedder returned no vector");
    return {
      outputs: [{ key: own, value: { ...sensory, embedding: turnEmbeddingOf(deps.embedder, vector) } }],
      state: undefined,
    };
  },
});
