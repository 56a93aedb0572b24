/**
 * The distributed runtime's MemoryService, behind the gateway's HTTP and gRPC front doors: writes
 * go to Kafka (KafkaTurnWriter), reads go to the query service over gRPC (GrpcQueryBackend, whose
 * service reads with the same StoreMemoryReader as the embedded engine). Healthy when both are.
 */
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
}

/** The read side: the query service's client, GrpcQueryBackend (a fake in tests). */
export interface RemoteReader extends MemoryReader {
  health(): Promise<SideHealth>;
}

export interface DistributedMemoryServiceOptions extends KafkaTurnWriterOptions {
  /** The reader: the query service's client. */
  backend: RemoteReader;
}

export class DistributedMemoryService implements MemoryService {
  constructor(
    readonly writer: TurnWriter,
    readonly reader: RemoteReader,
  ) {}

  /** Opens the Kafka writer (topics, turn schema, producer) next to the given reader. */
  static async open(options: DistributedMemoryServiceOptions): Promise<DistributedMemoryService> {
    const { backend, ...writerOptions } = options;
    return new DistributedMemoryService(await KafkaTurnWriter.open(writerOptions), backend);
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
