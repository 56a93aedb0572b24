import type { RecordHistory, VersionEntry, VersionRelation } from "../core/history.ts";
import type { ConsolidationReport, ErasureReport, MemoryMaintenance } from "../core/maintenance.ts";
import type { CandidateDecision, LlmCost } from "../core/ports.ts";
import type { MemoryRecord, UpdateCandidate } from "../core/types.ts";

// The report, history and erasure shapes live in core (every runtime and front door speaks them).
export type { ConsolidationReport, ErasureReport, MemoryMaintenance, RecordHistory, VersionEntry, VersionRelation };

/** An older (or concurrent) record the decider compares the record with. */
export interface CandidateView {
  record: MemoryRecord;
  /** The candidate row as the indexer wrote it (similarity, shared entities and topics, reason). */
  candidate: UpdateCandidate;
}

/** What to do about one (record, candidate) pair. `newer` and `older` are record ids of the pair. */
export interface PairDecision {
  candidateId: string;
  kind: CandidateDecision;
  newer: string;
  older: string;
  /** Which rule (or the model's explanation) led to the decision. */
  reason: string;
}

export interface DecisionBatch {
  /** One decision per candidate given. */
  decisions: PairDecision[];
  cost: LlmCost;
}

/**
 * The consolidator's strategy: a record and its candidates in, one decision per candidate out.
 * The rule-based decider is deterministic and free; an LLM-backed one (batched) plugs in here.
 */
export interface ConsolidationDecider {
  readonly id: string;
  decide(record: MemoryRecord, candidates: readonly CandidateView[]): Promise<DecisionBatch>;
}

export const emptyReport = (decider: string): ConsolidationReport => ({
  tenants: [],
  examined: 0,
  candidates: 0,
  merged: 0,
  superseded: 0,
  linked: 0,
  unchanged: 0,
  dropped: 0,
  ms: 0,
  decider,
  cost: { llmCalls: 0, inputTokens: 0, outputTokens: 0 },
});

export const isMemoryMaintenance = (x: unknown): x is MemoryMaintenance =>
  typeof x === "object" &&
  x !== null &&
  typeof (x as Partial<MemoryMaintenance>).consolidate === "function" &&
  typeof (x as Partial<MemoryMaintenance>).history === "function" &&
  typeof (x as Partial<MemoryMaintenance>).erase === "function";

/** The runtime's consolidation settings (Config.consolidation). */
export interface ConsolidationSettings {
  /** Daily off-peak window in UTC, "HH:MM-HH:MM"; "" for none. */
  window: string;
  /** Run after this many minutes without ingest (0: never). */
  idleMinutes: number;
  /** Most unprocessed inbox entries for the idle trigger. */
  maxInboxLag: number;
  /** Cosine similarity that makes an older record an update candidate. */
  similarityThreshold: number;
  /** Groups (and tenants) consolidated at the same time. */
  concurrency: number;
  /** How often the scheduler checks its triggers. */
  checkIntervalMs: number;
}

export const DEFAULT_CONSOLIDATION_SETTINGS: ConsolidationSettings = {
  window: "",
  idleMinutes: 30,
  maxInboxLag: 0,
  similarityThreshold: 0.8,
  concurrency: 4,
  checkIntervalMs: 60_000,
};
