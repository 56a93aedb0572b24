/**
 * The indexer's second consumer (issue 18): memory.sensory.v1 -> the stores' raw turns, so that a
 * turn is found by the raw-turn routes within seconds of its produce rather than when its segment
 * closes (seconds to minutes later). It runs in the indexer's process (the same stores, the same
 * embedding cache: the segment-close write of these turns then finds their vectors) with its own
 * consumer group; its records follow at segment close through the records topic as before.
 *
 * Exactly-once as the other stages: the writes are idempotent upserts (raw-turns.ts); a replay
 * rewrites the same rows. Erase controls reach this consumer too (sensory forwards them in partition
 * order), after every turn produced before them: it erases again the raw turns (rows and vectors) it
 * wrote since the caller's immediate erasure, and nothing else: records and their update-queue
 * tombstones are the records consumer's (erase-in-stores.ts), so no state crosses between the two.
 *
 * A turn arrives with the vector the sensory stage computed (turn-embedding.ts): it is stored as it
 * is, not embedded again. Only a turn without one, or with another model's, is embedded here.
 */
import type { TopicCodec, UpdateCandidatesEvent } from "../core/adapters/kafka/serde.ts";
import { PoisonError, type StageHandler } from "../core/adapters/kafka/stage-runtime.ts";
import { carriedVector, type SensoryEvent } from "../core/adapters/kafka/turn-embedding.ts";
import { turnRowId } from "../core/ids.ts";
import { parseConversationKey } from "../core/keys.ts";
import type { Embedder, GraphStore, VectorStore } from "../core/ports.ts";
import { type EraseDeps, eraseRawTurnsControl } from "./erase-in-stores.ts";
import type { FreshnessGate } from "./freshness-gate.ts";
import { indexRawTurns } from "./raw-turns.ts";

/** The consumer group / transactional id suffix and the stage label of this consumer. */
export const RAW_TURN_STAGE = "indexer-raw-turns";

export interface RawTurnStageDeps extends EraseDeps {
  input: TopicCodec<SensoryEvent>;
  output: TopicCodec<UpdateCandidatesEvent>;
  graph: GraphStore;
  vectors: VectorStore;
  /**
   * A caching embedder, shared with the records consumer: embeds the turns that carry no vector of
   * its model (the records consumer then reads their stored vectors at segment close).
   */
  embedder: Embedder;
  /** The second-opinion model (config secondOpinion): each turn's vector by it is written too. */
  secondEmbedder?: Embedder;
  onIndexed?(turns: number): void;
  /**
   * Input partitions handled at once (default 1). Each partition's chunk is one embedding call and
   * a few store and Kafka round trips; one partition after another, a turn waited for the other
   * partitions' chunks too (MEMORY_RAW_TURN_PARTITIONS_AT_ONCE).
   */
  partitionsAtOnce?: number;
  /** Shared with the records consumer of the process: these writes go first (freshness-gate.ts). */
  gate?: FreshnessGate;
}

export const rawTurnStage = (deps: RawTurnStageDeps): StageHandler<SensoryEvent, UpdateCandidatesEvent, never> => {
  /**
   * Row ids prepare() wrote whose handle() has not run yet: handle() has nothing left to do for
   * them. Not cleared as a whole per chunk: chunks of other partitions run at the same time (a
   * conversation is in one partition, so their ids never meet); each prepare() first forgets the
   * ids of its own chunk, so an id left by a chunk abandoned in a rebalance lives only until its
   * turn is read again (an erase and a reused turn id after it must find the turn unwritten).
   * Forgetting is always safe: handle() then writes the turn again, idempotently.
   */
  const written = new Set<string>();
  /** Ids kept at most (chunks abandoned for good leave theirs behind): beyond it all are forgotten. */
  const WRITTEN_MAX = 10_000;
  const rowIdOf = (t: SensoryEvent): string => `${t.tenant}\u0000${turnRowId(t.conversation, t.turnId)}`;
  const index = (turns: SensoryEvent[]): Promise<number> =>
    indexRawTurns(
      deps,
      turns,
      turns.map((t) => carriedVector(t, deps.embedder)),
    );
  const write = (turns: SensoryEvent[]): Promise<number> =>
    deps.gate ? deps.gate.urgent(() => index(turns)) : index(turns);
  const keyMatches = (key: string, t: SensoryEvent): boolean => {
    const parsed = parseConversationKey(key);
    return parsed !== undefined && parsed.tenant === t.tenant && parsed.conversation === t.conversation;
  };
  return {
    name: RAW_TURN_STAGE,
    input: deps.input,
    output: deps.output,
    ...(deps.partitionsAtOnce !== undefined ? { partitionsAtOnce: deps.partitionsAtOnce } : {}),
    /**
     * One embedding call and one write per tenant and conversation for the chunk's turns (a write
     * per turn is what made the turns wait under load). Only the turns ahead of the chunk's first
     * control: a turn after an erase must not be written before handle() runs that erase. A failed
     * batch leaves every turn to handle(), one at a time, which finds the one at fault.
     */
    async prepare(inputs) {
      if (written.size > WRITTEN_MAX) written.clear();
      for (const { input } of inputs) if (input.kind === "event") written.delete(rowIdOf(input.value));
      const turns: SensoryEvent[] = [];
      for (const { key, input } of inputs) {
        if (input.kind === "control") break;
        if (keyMatches(key, input.value)) turns.push(input.value);
      }
      if (turns.length === 0) return;
      await write(turns);
      for (const t of turns) written.add(rowIdOf(t));
    },
    async handle(key, input) {
      if (input.kind === "control") return { outputs: await eraseRawTurnsControl(deps, key, input), state: undefined };
      const turn = input.value;
      if (!keyMatches(key, turn)) throw new PoisonError(`key "${key}" does not match the turn's tenant/conversation`);
      if (!written.delete(rowIdOf(turn))) await write([turn]);
      deps.onIndexed?.(1);
      return { outputs: [], state: undefined };
    },
  };
};
