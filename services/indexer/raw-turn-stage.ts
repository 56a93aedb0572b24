/**
 * The indexer's second consumer (issue 18): memory.sensory.v1 -> the stores' raw turns, so that a
 * turn is found by the raw-turn routes within seconds of its produce rather than when its segment
 * closes (seconds to minutes later). It runs in the indexer's process (the same stores, the same
 * embedding cache: the segment-close write of these turns then finds their vectors) with its own
 * consumer group; its records follow at segment close through the records topic as before.
 *
 * Exactly-once as the other stages: the writes are idempotent upserts (raw-turns.ts), the consumed
 * offsets commit in one transaction with the update-queue tombstones of an erase control; a replay
 * rewrites the same rows. Erase controls reach this consumer too (sensory forwards them in partition
 * order), after every turn produced before them: it erases again what it wrote since the caller's
 * immediate erasure, with the indexer's own rule and tombstones (erase-in-stores.ts).
 */
import type { TopicCodec, UpdateCandidatesEvent } from "../core/adapters/kafka/serde.ts";
import { PoisonError, type StageHandler } from "../core/adapters/kafka/stage-runtime.ts";
import { parseConversationKey } from "../core/keys.ts";
import type { Embedder, GraphStore, VectorStore } from "../core/ports.ts";
import type { SensoryTurn } from "../core/types.ts";
import { type EraseDeps, eraseControl } from "./erase-in-stores.ts";
import { indexRawTurns, rawTurnText } from "./raw-turns.ts";

/** The consumer group / transactional id suffix and the stage label of this consumer. */
export const RAW_TURN_STAGE = "indexer-raw-turns";

export interface RawTurnStageDeps extends EraseDeps {
  input: TopicCodec<SensoryTurn>;
  output: TopicCodec<UpdateCandidatesEvent>;
  graph: GraphStore;
  vectors: VectorStore;
  /** A caching embedder: prepare() embeds a chunk's turns in one call, handle() hits the cache. */
  embedder: Embedder;
  onIndexed?(turns: number): void;
}

export const rawTurnStage = (deps: RawTurnStageDeps): StageHandler<SensoryTurn, UpdateCandidatesEvent, never> => ({
  name: RAW_TURN_STAGE,
  input: deps.input,
  output: deps.output,
  async prepare(inputs) {
    const texts = inputs.flatMap(({ input }) => (input.kind === "event" ? [rawTurnText(input.value)] : []));
    if (texts.length > 0) await deps.embedder.embed(texts);
  },
  async handle(key, input) {
    if (input.kind === "control") return { outputs: await eraseControl(deps, key, input), state: undefined };
    const turn = input.value;
    const parsed = parseConversationKey(key);
    if (!parsed || parsed.tenant !== turn.tenant || parsed.conversation !== turn.conversation)
      throw new PoisonError(`key "${key}" does not match the turn's tenant/conversation`);
    await indexRawTurns(deps, [turn]);
    deps.onIndexed?.(1);
    return { outputs: [], state: undefined };
  },
});
