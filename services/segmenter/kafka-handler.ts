/**
 * The segmenter as a Kafka stage handler: compressed turns -> closed segments, keyed state = the
 * open segment and short-term buffer of each tenant/conversation (SegmenterState, JSON in the
 * changelog). Control messages flush; the runtime's tick flushes idle keys through the same
 * transactional path. An erase control drops the state of its conversation (or of every
 * conversation of its tenant) without releasing the open segment or buffer, and travels on.
 *
 * A turn arriving with its embedding (the sensory stage's, same model: turn-embedding.ts) is not
 * embedded again; one without (an older producer, another model) is embedded here, as before. The
 * state keeps no turn vector either way (segmentTurnOf), so the changelog format is unchanged.
 */
import type { TopicCodec } from "../core/adapters/kafka/serde.ts";
import { PoisonError, type StageHandler, type StageInput } from "../core/adapters/kafka/stage-runtime.ts";
import { erasedKeys, isErasure } from "../core/adapters/kafka/topics.ts";
import { carriedVector, type SensoryEvent } from "../core/adapters/kafka/turn-embedding.ts";
import { parseConversationKey } from "../core/keys.ts";
import type { Embedder } from "../core/ports.ts";
import { turnEmbeddingText } from "../core/turn-text.ts";
import { keyOf, type Segment } from "../core/types.ts";
import type { AttentionScorer, TurnPair } from "./attention-scorer.ts";
import {
  initialSegmenterState,
  isDisposable,
  isIdle,
  type SegmenterConfig,
  type SegmenterState,
  segmenterStep,
  upgradeSegmenterState,
} from "./segment-state.ts";

/**
 * Version of the JSON shape of SegmenterState in the changelog. 1: every open turn's embedding as
 * a number array; 2: the gate's constant-size summary (segment-state.ts StoredSummary). Version-1
 * entries are migrated at restore, so a running deployment upgrades in place.
 */
export const SEGMENTER_STATE_VERSION = 2;

/** A changelog entry of an older format as the current state. */
export const migrateSegmenterState = (fromVersion: number, json: string): SegmenterState => {
  if (fromVersion !== 1) throw new Error(`segmenter state version ${fromVersion} has no migration`);
  return upgradeSegmenterState(JSON.parse(json) as SegmenterState);
};

export interface SegmenterStageDeps {
  input: TopicCodec<SensoryEvent>;
  output: TopicCodec<Segment>;
  stateCodec: StageStateCodec;
  /**
   * A caching embedder: prepare() embeds a chunk's turns in one call, handle() hits the cache.
   * Turns that carry its model's vector are not embedded.
   */
  embedder: Embedder;
  cfg: SegmenterConfig;
  /** Attention shares (cfg.boundaries attention / both); prepare() computes a chunk's pairs in one call. */
  attention?: AttentionScorer;
  clock?: () => number;
}

type StageStateCodec = NonNullable<StageHandler<SensoryEvent, Segment, SegmenterState>["state"]>["codec"];

const splitKey = (key: string): { tenant: string; conversation: string } => {
  const parsed = parseConversationKey(key);
  if (!parsed) throw new PoisonError(`key "${key}" is not tenant/conversation`);
  return parsed;
};

const textOf = (t: SensoryEvent): string => turnEmbeddingText(t.speaker, t.text);

export const segmenterStage = (deps: SegmenterStageDeps): StageHandler<SensoryEvent, Segment, SegmenterState> => {
  const clock = deps.clock ?? Date.now;
  const usesAttention = (deps.cfg.boundaries ?? "gate") !== "gate";
  if (usesAttention && !deps.attention)
    throw new Error(`segmenter boundaries "${deps.cfg.boundaries}" need the turn attention model`);
  const out = (segments: Segment[]) => segments.map((s) => ({ key: keyOf(s.tenant, s.conversation), value: s }));
  return {
    name: "segmenter",
    input: deps.input,
    output: deps.output,
    state: { version: SEGMENTER_STATE_VERSION, codec: deps.stateCodec, migrate: migrateSegmenterState },
    async prepare(inputs) {
      const texts = inputs.flatMap(({ input }) =>
        input.kind === "event" && !carriedVector(input.value, deps.embedder) ? [textOf(input.value)] : [],
      );
      if (texts.length > 0) await deps.embedder.embed(texts);
      if (usesAttention && deps.attention) {
        // Consecutive turns of one key in the chunk; a key's first turn pairs with its stored
        // state's last turn, which handle() computes (the state is not visible here).
        const last = new Map<string, string>();
        const pairs: TurnPair[] = [];
        for (const { key, input } of inputs) {
          if (input.kind !== "event") {
            last.delete(key);
            continue;
          }
          const text = textOf(input.value);
          const previous = last.get(key);
          if (previous !== undefined) pairs.push({ previous, current: text });
          last.set(key, text);
        }
        if (pairs.length > 0) await deps.attention.prepare(pairs);
      }
    },
    async handle(key, input: StageInput<SensoryEvent>, state) {
      const nowMs = clock();
      if (input.kind === "control") {
        if (isErasure(input.control)) {
          const erased = erasedKeys(input.control, key);
          if (!erased) throw new PoisonError(`key "${key}" is not tenant/conversation`);
          return {
            outputs: [{ key, control: input.control, ...(input.erasedIds ? { erasedIds: input.erasedIds } : {}) }],
            state: undefined,
            dropKeys: erased.matches,
          };
        }
        if (!state) return { outputs: [], state };
        const reason = input.control === "idle" ? "idle" : input.control === "session-end" ? "session-end" : "flush";
        const r = segmenterStep(state, { kind: "flush", reason, nowMs }, deps.cfg);
        // A key left with nothing the gate needs is deleted: a tombstone in the compacted changelog.
        return { outputs: out(r.segments), state: isDisposable(r.state) ? undefined : r.state };
      }
      const turn = input.value;
      const { tenant, conversation } = splitKey(key);
      if (tenant !== turn.tenant || conversation !== turn.conversation)
        throw new PoisonError(`key "${key}" does not match the turn's tenant/conversation`);
      const embedding = carriedVector(turn, deps.embedder) ?? (await deps.embedder.embed([textOf(turn)]))[0];
      if (!embedding) throw new Error("embedder returned no vector");
      const current = state ?? initialSegmenterState(tenant, conversation);
      const previous = current.open?.turns.at(-1);
      const attention =
        usesAttention && deps.attention && previous
          ? await deps.attention.share(turnEmbeddingText(previous.speaker, previous.text), textOf(turn))
          : undefined;
      const r = segmenterStep(
        current,
        { kind: "turn", turn, embedding, ...(attention !== undefined ? { attention } : {}), nowMs },
        deps.cfg,
      );
      return { outputs: out(r.segments), state: r.state };
    },
    tick(states, nowMs) {
      const due: { key: string; input: StageInput<SensoryEvent> }[] = [];
      for (const [key, s] of states)
        if (isIdle(s, nowMs, deps.cfg)) due.push({ key, input: { kind: "control", control: "idle" } });
      return due;
    },
  };
};
