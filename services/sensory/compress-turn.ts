import type { Compressor } from "../core/ports.ts";
import type { SensoryTurn, Turn } from "../core/types.ts";

/** Sensory stage: compress each turn, keep the original beside it (records cite originals). */
export const compressTurn = async (turn: Turn, compressor: Compressor, keepRate: number): Promise<SensoryTurn> => {
  const { text, keptRatio } = await compressor.compress(turn.text, keepRate);
  return { ...turn, compressed: text, keptRatio };
};
