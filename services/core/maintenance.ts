/**
 * What a runtime's maintenance operations answer (consolidation, version history, erasure): the
 * shapes of the HTTP routes POST /v1/consolidate, GET /v1/records/{id}/history and the erasure
 * routes. In core, not in the consolidator stage, because every runtime and front door speaks them:
 * the embedded engine, the query service (over gRPC, services/platform/grpc) and the gateway.
 */
import type { RecordHistory } from "./history.ts";
import type { LlmCost } from "./ports.ts";

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
  /**
   * Distributed runtime: erasure control messages and tombstones the gateway published to Kafka
   * (so the stages drop the subject's keyed state and in-flight turns). Absent in the embedded runtime.
   */
  kafka?: number;
  ms: number;
}

/**
 * An erasure as the stores' side (the query service's StoreMaintenance) reports it to the gateway:
 * the report and the ids of the records it erased. Internal only: the gateway tombstones those ids
 * on the compacted update queue (key: record id; nothing downstream knows them once the stores are
 * erased) and answers its callers with the ErasureReport alone (counts, no ids).
 */
export interface StoreErasureReport extends ErasureReport {
  erasedRecordIds?: string[];
}

/** Maintenance operations a front door may offer next to MemoryService (the embedded engine has them). */
export interface MemoryMaintenance {
  consolidate(tenant?: string): Promise<ConsolidationReport>;
  history(tenant: string, recordId: string): Promise<RecordHistory | undefined>;
  erase(tenant: string, conversation?: string): Promise<ErasureReport>;
}

/**
 * A service that has the MemoryMaintenance methods but may not be able to serve them (the gateway
 * over a query backend without the Maintenance RPCs) says so here; front doors then answer 501.
 */
export interface MaintenanceOffer {
  readonly offersMaintenance?: boolean;
}

/**
 * The stores' side of maintenance, which the query service serves over memory.v1.Maintenance: its
 * erasure also names the erased records (StoreErasureReport). Any MemoryMaintenance fits (without ids).
 */
export interface StoreSideMaintenance extends MemoryMaintenance {
  erase(tenant: string, conversation?: string): Promise<StoreErasureReport>;
}
