/**
 * The distributed runtime's MemoryService, behind the gateway's HTTP and gRPC front doors: writes
 * go to Kafka (KafkaTurnWriter), reads go to the query service over gRPC (GrpcQueryBackend, whose
 * service reads with the same StoreMemoryReader as the embedded engine). Healthy when both are.
 *
 * Maintenance (consolidation, version history, erasure) runs in the query service over its stores
 * (memory.v1.Maintenance); an erasure is then also published through the pipeline by the writer
 * (control messages and tombstones, so the stages drop the subject's keyed state and turns in flight).
 */
import type { ExplorerReader } from "../core/explorer.ts";
import type { RecordHistory } from "../core/history.ts";
import type {
  ConsolidationReport,
  ErasureReport,
  MaintenanceOffer,
  MemoryMaintenance,
  StoreErasureReport,
} from "../core/maintenance.ts";
import type { Health, IngestResult, MemoryReader, MemoryService, MemoryWriter } from "../core/memory-service.ts";
import type { QueryResult, RecordPage, RecordQuery } from "../core/query-types.ts";
import type { QueryRequest, TurnInput } from "../core/requests.ts";
import type { MemoryRecord } from "../core/types.ts";
import { KafkaTurnWriter, type KafkaTurnWriterOptions } from "./kafka-turn-writer.ts";

/** A probe's answer: reachable or not, and what was checked. */
export interface SideHealth {
  ok: boolean;
  detail: string;
}

/** The write side: KafkaTurnWriter (a fake in tests). */
export interface TurnWriter extends MemoryWriter {
  health(): SideHealth;
  close(): Promise<void>;
  /**
   * After an erasure in the stores: erase control messages and tombstones through the pipeline
   * (keyed state, compacted topics, an erasure watermark for turns still in flight). Resolves with
   * how many messages were published. `erasedRecordIds`: the records the stores' erasure removed,
   * whose update candidates get a tombstone on the update queue with the controls (nothing in the
   * pipeline knows those ids any more). Optional: a writer without it publishes nothing.
   */
  publishErasure?(
    tenant: string,
    conversation?: string,
    erasedRecordIds?: readonly string[],
  ): Promise<{ messages: number }>;
}

/** Consolidation, history and erasure in the stores: the query service's Maintenance RPCs. */
export interface RemoteMaintenance {
  consolidate(tenant: string): Promise<ConsolidationReport>;
  history(tenant: string, recordId: string): Promise<RecordHistory | undefined>;
  /** The report names the erased records (internal: for the writer's tombstones). */
  erase(tenant: string, conversation?: string): Promise<StoreErasureReport>;
}

/** The read side: the query service's client, GrpcQueryBackend (a fake in tests). */
export interface RemoteReader extends MemoryReader, Partial<RemoteMaintenance> {
  health(): Promise<SideHealth>;
}

export interface DistributedMemoryServiceOptions extends KafkaTurnWriterOptions {
  /** The reader: the query service's client. */
  backend: RemoteReader;
  /** The explorer's read side over the shared stores (StoreExplorerReader); without it /ui's data routes answer 501. */
  explorer?: ExplorerReader;
}

export class DistributedMemoryService implements MemoryService, MemoryMaintenance, MaintenanceOffer {
  constructor(
    readonly writer: TurnWriter,
    readonly reader: RemoteReader,
    /**
     * The browser explorer's reads (conversations, timelines): the gateway reads the shared graph
     * store the query service reads, as the query service would, rather than widening its gRPC API.
     */
    readonly explorer?: ExplorerReader,
  ) {}

  /** Opens the Kafka writer (topics, turn schema, producer) next to the given reader. */
  static async open(options: DistributedMemoryServiceOptions): Promise<DistributedMemoryService> {
    const { backend, explorer, ...writerOptions } = options;
    return new DistributedMemoryService(await KafkaTurnWriter.open(writerOptions), backend, explorer);
  }

  ingest(tenant: string, conversation: string, turns: readonly TurnInput[]): Promise<IngestResult> {
    return this.writer.ingest(tenant, conversation, turns);
  }

  flush(tenant: string, conversation?: string): Promise<void> {
    return this.writer.flush(tenant, conversation);
  }

  query(tenant: string, req: QueryRequest): Promise<QueryResult> {
    return this.reader.query(tenant, req);
  }

  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage> {
    return this.reader.listRecords(tenant, query);
  }

  getRecord(tenant: string, id: string): Promise<MemoryRecord | undefined> {
    return this.reader.getRecord(tenant, id);
  }

  /** Whether the reader offers the Maintenance RPCs (the query service's client does); else the routes answer 501. */
  get offersMaintenance(): boolean {
    return (["consolidate", "history", "erase"] as const).every((op) => typeof this.reader[op] === "function");
  }

  /** The reader's maintenance side, or why there is none. */
  private remote<K extends keyof RemoteMaintenance>(op: K): RemoteMaintenance[K] {
    const fn = this.reader[op];
    if (typeof fn !== "function") throw new Error(`the query backend does not offer ${op}`);
    return fn.bind(this.reader) as RemoteMaintenance[K];
  }

  /**
   * Consolidation of the caller's tenant now, in the query service; its report. Consolidating every
   * tenant at once is the consolidator service's (services/consolidator/main.ts), not a caller's.
   */
  consolidate(tenant?: string): Promise<ConsolidationReport> {
    if (tenant === undefined) throw new Error("the gateway consolidates one tenant at a time");
    return this.remote("consolidate")(tenant);
  }

  history(tenant: string, recordId: string): Promise<RecordHistory | undefined> {
    return this.remote("history")(tenant, recordId);
  }

  /**
   * Erasure: first from the stores (records, turns, vectors, index nodes, candidates; the query
   * service's counts), then through the pipeline by the writer, with the tombstones of the erased
   * records' update candidates (its message count as `kafka`). The erased ids stay here: the
   * caller's report has counts only.
   */
  async erase(tenant: string, conversation?: string): Promise<ErasureReport> {
    const { erasedRecordIds, ...report } = await this.remote("erase")(tenant, conversation);
    const published = await this.writer.publishErasure?.(tenant, conversation, erasedRecordIds ?? []);
    return published ? { ...report, kafka: published.messages } : report;
  }

  async health(): Promise<Health> {
    const reader = await this.reader.health();
    const writer = this.writer.health();
    const ok = writer.ok && reader.ok;
    return { ok, ready: ok, details: { kafka: writer.detail, query: reader.detail } };
  }

  /** Closes the writer; the reader belongs to whoever made it (the gateway closes it last). */
  close(): Promise<void> {
    return this.writer.close();
  }
}
