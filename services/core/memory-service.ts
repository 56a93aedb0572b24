/**
 * What a front door (HTTP, gRPC, CLI) needs from a memory engine, whichever runtime is behind it,
 * split by side: a MemoryWriter takes turns in, a MemoryReader answers from what was indexed.
 * Each runtime composes the two (embedded: one process; distributed: a Kafka writer and a gRPC
 * reader). Every method takes the tenant resolved from the caller's credential.
 */
import type { QueryResult, RecordPage, RecordQuery } from "./query-types.ts";
import type { QueryRequest, TurnInput } from "./requests.ts";
import type { MemoryRecord } from "./types.ts";

export interface IngestResult {
  accepted: number;
  turnIds: string[];
}

export interface Health {
  ok: boolean;
  ready: boolean;
  details: Record<string, string>;
}

/** The write side: turns in (validated by turn-validation.ts), durable once the call resolves. */
export interface MemoryWriter {
  ingest(tenant: string, conversation: string, turns: readonly TurnInput[]): Promise<IngestResult>;
  /** Close open segments of a conversation (session end) and index what they hold. */
  flush(tenant: string, conversation?: string): Promise<void>;
}

/** The read side: what was indexed, never another tenant's. */
export interface MemoryReader {
  query(tenant: string, req: QueryRequest): Promise<QueryResult>;
  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage>;
  getRecord(tenant: string, id: string): Promise<MemoryRecord | undefined>;
}

/**
 * Both sides and the runtime's health: what the HTTP app and the gRPC server serve. Consolidation,
 * version history and erasure are MemoryMaintenance (services/consolidator/types.ts), offered next
 * to it by the runtimes that have them.
 */
export interface MemoryService extends MemoryWriter, MemoryReader {
  health(): Promise<Health>;
}
