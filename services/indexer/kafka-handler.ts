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
 * "erase" control, null value, key: record id). An "erase-tenant" (one per partition) erases the
 * tenant. Both are idempotent: a replay after a crash erases nothing more and repeats the tombstones.
 */
import type { TopicCodec, UpdateCandidatesEvent } from "../core/adapters/kafka/serde.ts";
import type { StageHandler } from "../core/adapters/kafka/stage-runtime.ts";
import type { Embedder, GraphStore, VectorStore } from "../core/ports.ts";
import type { RecordsEvent, UpdateCandidate } from "../core/types.ts";
import { type CandidateSettings, DEFAULT_CANDIDATE_SETTINGS } from "./candidates.ts";
import { eraseControl, type IndexerErasure } from "./erase-in-stores.ts";
import { type IndexOutcome, indexSegment, indexSegments } from "./indexer.ts";

export type { IndexerErasure };

export interface IndexerStageDeps {
  input: TopicCodec<RecordsEvent>;
  output: TopicCodec<UpdateCandidatesEvent>;
  graph: GraphStore;
  vectors: VectorStore;
  embedder: Embedder;
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
}

/**
 * Group commit (issue 18): when a chunk holds several records events, prepare() indexes them as one
 * group (indexSegments: one embedding call, one vector upsert, one candidate search round and one
 * candidate write per tenant) before handle() runs on each; handle() then only hands out what its
 * event's indexing found, and the chunk's outputs and offsets commit in one transaction as before.
 * Only the events before the chunk's first control are grouped: an erase control must act on what
 * came before it and nothing after it. A crash or a failed group leaves nothing handed out: handle()
 * indexes the group again (idempotent writes, the same candidates), and a replay does it again.
 */
export const indexerStage = (deps: IndexerStageDeps): StageHandler<RecordsEvent, UpdateCandidatesEvent, never> => {
  const slow = deps.slowWriteMs ?? 5000;
  const coolDown = deps.coolDownMs ?? 2000;
  let saturatedUntil = 0;
  const indexerDeps = {
    graph: deps.graph,
    vectors: deps.vectors,
    embedder: deps.embedder,
    candidates: deps.candidates ?? DEFAULT_CANDIDATE_SETTINGS,
    ...(deps.yieldTo ? { yieldTo: deps.yieldTo } : {}),
  };
  /** What prepare() indexed for each event of the chunk, taken by its handle(). */
  const prepared = new WeakMap<RecordsEvent, IndexOutcome>();
  const noteSlow = (started: number, segments: number): void => {
    if ((Date.now() - started) / segments > slow) saturatedUntil = Date.now() + coolDown;
  };
  /** The group each event of a chunk was prepared in. */
  const groupOf = new WeakMap<RecordsEvent, readonly RecordsEvent[]>();
  const indexGroup = async (group: readonly RecordsEvent[]): Promise<void> => {
    const started = Date.now();
    const outcomes = await indexSegments(indexerDeps, group);
    noteSlow(started, group.length);
    for (const [i, event] of group.entries()) prepared.set(event, outcomes[i] as IndexOutcome);
  };
  return {
    name: "indexer",
    input: deps.input,
    output: deps.output,
    pressure: () => Date.now() < saturatedUntil,
    async prepare(inputs) {
      const group: RecordsEvent[] = [];
      const segments = new Set<string>();
      for (const { input } of inputs) {
        if (input.kind === "control") break;
        // The same segment twice (a producer's retry): the second is indexed on its own, after.
        if (segments.has(input.value.segment.id)) break;
        segments.add(input.value.segment.id);
        group.push(input.value);
      }
      if (group.length < 2) return;
      for (const event of group) groupOf.set(event, group);
      await indexGroup(group);
    },
    async handle(key, input) {
      if (input.kind === "control") return { outputs: await eraseControl(deps, key, input), state: undefined };
      const { segment, records } = input.value;
      // A group that failed in prepare() (a store went away part way) is indexed again as a group:
      // one of its segments alone would see the group's later segments, written already.
      const group = groupOf.get(input.value);
      if (group && !prepared.has(input.value)) await indexGroup(group);
      let outcome = prepared.get(input.value);
      if (outcome) prepared.delete(input.value);
      else {
        const started = Date.now();
        outcome = await indexSegment(indexerDeps, segment, records);
        noteSlow(started, 1);
      }
      deps.onIndexed?.(records.length);
      const byRecord = new Map<string, UpdateCandidate[]>();
      for (const c of outcome.candidates) byRecord.set(c.recordId, [...(byRecord.get(c.recordId) ?? []), c]);
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
