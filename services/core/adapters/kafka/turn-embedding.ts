/**
 * A turn's embedding travelling with it on memory.sensory.v1 (issue 18): the sensory stage embeds
 * each turn once, and both consumers of the topic (the segmenter's boundary gate, the indexer's
 * raw-turn consumer) use that vector instead of embedding the same text again. The embedded
 * runtime does the same in one process (one embedding per turn, for the gate and the raw-turn write).
 *
 * The vector is optional (Avro `["null", TurnEmbedding]`, default null: old producers' values still
 * read) and names its model: a consumer whose embedder is another model or dimension ignores it and
 * embeds the turn itself, as it does for a turn without one.
 */
import { z } from "zod";
import type { Embedder } from "../../ports.ts";
import { SensoryTurnSchema } from "../../types.ts";

/** Most dimensions a carried vector may have (a bound on what a value can make a consumer hold). */
export const TURN_EMBEDDING_MAX_DIMENSION = 8192;

export const TurnEmbeddingSchema = z.object({
  /** The embedder's id (Embedder.id, e.g. "onnx:all-MiniLM-L6-v2:fp32"). */
  model: z.string().min(1),
  /** The L2-normalised vector of turnEmbeddingText(speaker, text), float32 values. */
  vector: z.array(z.number().finite()).min(1).max(TURN_EMBEDDING_MAX_DIMENSION),
});
export type TurnEmbedding = z.infer<typeof TurnEmbeddingSchema>;

/** A value of memory.sensory.v1: a sensory turn, and its embedding when the producer had one. */
export const SensoryEventSchema = SensoryTurnSchema.extend({ embedding: TurnEmbeddingSchema.optional() });
export type SensoryEvent = z.infer<typeof SensoryEventSchema>;

/** The wire form of a vector computed by `embedder`. */
export const turnEmbeddingOf = (embedder: Pick<Embedder, "id">, vector: Float32Array): TurnEmbedding => ({
  model: embedder.id,
  vector: Array.from(vector),
});

/**
 * The turn's carried vector when it was computed by the same model as `embedder` (same id, same
 * dimension), else undefined: the caller embeds the turn itself. Avro floats are float32, so the
 * vector is the producer's exactly.
 */
export const carriedVector = (
  turn: { embedding?: TurnEmbedding | undefined },
  embedder: Pick<Embedder, "id" | "dimension">,
): Float32Array | undefined => {
  const e = turn.embedding;
  if (!e || e.model !== embedder.id || e.vector.length !== embedder.dimension) return undefined;
  return Float32Array.from(e.vector);
};
