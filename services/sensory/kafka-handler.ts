/** The sensory stage as a Kafka stage handler: turns -> compressed turns (stateless). */
import type { TopicCodec } from "../core/adapters/kafka/serde.ts";
import { PoisonError, type StageHandler } from "../core/adapters/kafka/stage-runtime.ts";
import type { Compressor } from "../core/ports.ts";
import { keyOf, type SensoryTurn, type Turn } from "../core/types.ts";
import { compressTurn } from "./compress-turn.ts";

export interface SensoryStageDeps {
  input: TopicCodec<Turn>;
  output: TopicCodec<SensoryTurn>;
  compressor: Compressor;
  keepRate: number;
}

export const sensoryStage = (deps: SensoryStageDeps): StageHandler<Turn, SensoryTurn, never> => ({
  name: "sensory",
  input: deps.input,
  output: deps.output,
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
    return { outputs: [{ key: own, value: sensory }], state: undefined };
  },
});
