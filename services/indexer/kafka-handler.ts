/**
 * The indexer as a Kafka stage: a sink. Each records event is written to the stores with
 * indexSegment (idempotent upserts / MERGE by deterministic ids), then its update candidates are
 * produced to the compacted update queue (key: record id) in the transaction that commits the
 * consumed offsets. The store writes are not part of that transaction and need not be: a crash
 * between the writes and the commit replays the event, and the replay rewrites the same rows.
 *
 * Erasure (issue 13): the caller erased the stores at once; an erase control reaches the indexer
 * after every turn of the conversation produced before it (partition order), so whatever those
 * in-flight turns wrote since is erased here again with the same rule (services/core/erasure.ts),
 * and each erased record's update candidates get a tombstone on the compacted update queue (an
 * "erase" control, null value, key: record id). An "erase-tenant" (one per partition) erases that
 * partition's share of the tenant. Both are idempotent: a replay after a crash erases nothing more
 * and repeats the tombstones.
 */
import type { TopicCodec, UpdateCandidatesEvent } from "../core/adapters/kafka/serde.ts";
import type { StageHandler } from "../core/adapters/kafka/stage-runtime.ts";
import type { Embedder, GraphStore, VectorStore } from "../core/ports.ts";
import type { RecordsEvent, UpdateCandidate } from "../core/types.ts";
import { type CandidateSettings, DEFAULT_CANDIDATE_SETTINGS } from "./candidates.ts";
import { recordVectorText } from "./derive.ts";
import { EmbeddingPrefetch } from "./embedding-prefetch.ts";
import { eraseControl, type IndexerErasure } from "./erase-in-stores.ts";
import { indexSegment } from "./indexer.ts";

export type { IndexerErasure };

export interface IndexerStageDeps {
  input: TopicCodec<RecordsEvent>;
  output: TopicCodec<UpdateCandidatesEvent>;
  graph: GraphStore;
  vectors: VectorStore;
  embedder: Embedder;
  /** The second-opinion model (config secondOpinion): its vectors are written beside the first's. */
  secondEmbedder?: Embedder;
  candidates?: CandidateSettings;
  /** A write slower than this marks the sink saturated: the runtime pauses consumption (default 5000 ms). */
  slowWriteMs?: number;
  /** How long a saturated sink stays paused before consumption resumes (default 2000 ms). */
  coolDownMs?: number;
  onIndexed?(records: number): void;
  /** What an erase control erased again (records and raw turns), for metrics and logs. */
  onErased?(erasure: IndexerErasure): void;
  /** Awaited before each store step of a segment (indexer.ts IndexerDeps.yieldTo). */
  yieldTo?: () => Promise<void>;
  /**
   * Embed the chunk's next segment while the current one is in the stores (default true;
   * embedding-prefetch.ts): the same vectors, the model's time hidden behind the stores' round trips.
   */
  prefetchNext?: boolean;
  /** Input partitions handled at the same time (StageHandler.partitionsAtOnce; default 1). */
  partitionsAtOnce?: number;
}

export const indexerStage = (deps: IndexerStageDeps): StageHandler<RecordsEvent, UpdateCandidatesEvent, never> => {
  const slow = deps.slowWriteMs ?? 5000;
  const coolDown = deps.coolDownMs ?? 2000;
  let saturatedUntil = 0;
  const prefetch = deps.prefetchNext === false ? undefined : new EmbeddingPrefetch(deps.embedder);
  /**
   * Each event's successor in its chunk (prepare()), so that handle() knows which segment comes
   * next; by event, not one chunk at a time: partitions' chunks may be handled at once.
   */
  const successors = new WeakMap<RecordsEvent, RecordsEvent>();
  const nextAfter = (event: RecordsEvent): RecordsEvent | undefined => successors.get(event);
  return {
    name: "indexer",
    input: deps.input,
    output: deps.output,
    pressure: () => Date.now() < saturatedUntil,
    ...(deps.partitionsAtOnce !== undefined ? { partitionsAtOnce: deps.partitionsAtOnce } : {}),
    async prepare(inputs) {
      const events = inputs.flatMap(({ input }) => (input.kind === "event" ? [input.value] : []));
      events.forEach((event, i) => {
        const next = events[i + 1];
        if (next) successors.set(event, next);
      });
    },
    async handle(key, input) {
      if (input.kind === "control") return { outputs: await eraseControl(deps, key, input), state: undefined };
      const { segment, records } = input.value;
      const started = Date.now();
      const next = prefetch ? nextAfter(input.value) : undefined;
      const { candidates: found } = await indexSegment(
        {
          graph: deps.graph,
          vectors: deps.vectors,
          embedder: prefetch ?? deps.embedder,
          ...(deps.secondEmbedder ? { secondEmbedder: deps.secondEmbedder } : {}),
          candidates: deps.candidates ?? DEFAULT_CANDIDATE_SETTINGS,
          ...(deps.yieldTo ? { yieldTo: deps.yieldTo } : {}),
          ...(prefetch && next ? { onEmbedded: () => prefetch.prefetch(next.records.map(recordVectorText)) } : {}),
        },
        segment,
        records,
      );
      if (Date.now() - started > slow) saturatedUntil = Date.now() + coolDown;
      deps.onIndexed?.(records.length);
      const byRecord = new Map<string, UpdateCandidate[]>();
      for (const c of found) byRecord.set(c.recordId, [...(byRecord.get(c.recordId) ?? []), c]);
      return {
        outputs: [...byRecord].map(([recordId, candidates]) => ({
          key: recordId,
          value: { recordId, tenant: segment.tenant, candidates },
        })),
        state: undefined,
      };
    },
  };
};
