import type { CandidateDecision, LlmCost, RecordRelation } from "../core/ports.ts";
import type { MemoryRecord, UpdateCandidate } from "../core/types.ts";

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

/** What a consolidation run did. */
export interface ConsolidationReport {
  tenants: string[];
  /** Records with pending candidates that were examined. */
  examined: number;
  /** Candidate pairs decided. */
  candidates: number;
  /** Duplicates merged into an older canonical record. */
  merged: number;
  /** Older records superseded by a contradicting newer one. */
  superseded: number;
  /** Refinements linked (REFINES). */
  linked: number;
  /** Examined records whose decisions changed nothing (all unrelated, or nothing left to change). */
  unchanged: number;
  /** Candidate pairs judged unrelated (dropped: marked done, nothing written). */
  dropped: number;
  ms: number;
  decider: string;
  cost: LlmCost;
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

/** How a version relates to the record the history was asked for. */
export type VersionRelation =
  | "self"
  /** An earlier version in the chain (superseded, directly or through others). */
  | "earlier"
  /** A later version in the chain. */
  | "later"
  /** Merged with it as a duplicate (either side of the merge). */
  | "duplicate"
  /** Adds detail to a version of the chain (REFINES it). */
  | "refines"
  /** A version of the chain adds detail to it. */
  | "refined-by";

export interface VersionEntry {
  id: string;
  text: string;
  relation: VersionRelation;
  validFrom: string;
  validTo?: string;
  supersededBy?: string;
  current: boolean;
  record: MemoryRecord;
}

/** A record's version history: the chain of versions with valid ranges and the edges between them. */
export interface RecordHistory {
  id: string;
  /** The current version of the chain (the head), when there is one. */
  current?: string;
  /** Oldest first (by valid.from, then id). */
  versions: VersionEntry[];
  relations: RecordRelation[];
}

/** What an erasure removed. */
export interface ErasureReport {
  tenant: string;
  conversation?: string;
  records: number;
  /** Raw turns erased (reported for a conversation erasure). */
  turns?: number;
  /** Vectors erased (records and raw turns). */
  vectors: number;
  inboxEntries: number;
  stateKeys: number;
  /** Records of other conversations made current again (their superseder was erased). */
  restored: number;
  ms: number;
}

/** Maintenance operations a front door may offer next to MemoryService (the embedded engine has them). */
export interface MemoryMaintenance {
  consolidate(tenant?: string): Promise<ConsolidationReport>;
  history(tenant: string, recordId: string): Promise<RecordHistory | undefined>;
  erase(tenant: string, conversation?: string): Promise<ErasureReport>;
}

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
