/**
 * A small typed client of memory.v1.Memory over the generated grpc-js client: replies come back in
 * the domain shapes of services/core (QueryResult, MemoryRecord, RecordPage), so an answer over gRPC
 * compares directly with the HTTP one. Used by the gateway to reach the query service, and by tests.
 */
import { type CallOptions, credentials, Metadata, type ServiceError, status } from "@grpc/grpc-js";
import type { RecordHistory } from "../../core/history.ts";
import type { ConsolidationReport, StoreErasureReport } from "../../core/maintenance.ts";
import type { RecordPage, RecordQuery } from "../../core/ports.ts";
import type { QueryResult } from "../../core/query-types.ts";
import type { QueryRequest, TurnInput } from "../../core/requests.ts";
import type { MemoryRecord } from "../../core/types.ts";
import { traceHeaders } from "../trace-context.ts";
import {
  type ConsolidationReport as ConsolidationReportMessage,
  type ErasureReport as ErasureReportMessage,
  type FlushReply,
  IngestRequest,
  type IngestSummary,
  type ListRecordsReply,
  MaintenanceClient,
  MemoryClient,
  type QueryReply,
  type RecordHistory as RecordHistoryMessage,
  type Record as RecordMessage,
} from "./generated/memory.ts";
import { consolidationReportFromWire, erasureReportFromWire, historyFromWire } from "./maintenance-mapping.ts";
import { MAX_MESSAGE_BYTES } from "./server.ts";
import { isServiceError } from "./status-mapping.ts";
import {
  queryRequestToWire,
  queryResultFromWire,
  recordFromWire,
  recordPageFromWire,
  recordQueryToWire,
} from "./wire-mapping.ts";

export interface MemoryGrpcClientOptions {
  /** host:port of the server. */
  address: string;
  /** Public gateway: the caller's API key (sent as `authorization: Bearer <key>`). */
  apiKey?: string;
  /** Internal query service: the bearer token (MEMORY_INTERNAL_TOKEN) to present. */
  internalToken?: string;
  /** Per-call deadline (default 30 s). */
  deadlineMs?: number;
}

/**
 * A turn of an Ingest stream: a TurnInput naming its conversation, or the proto's message with any
 * fields left out (loose, so tests can send bad ones; absent fields go as the proto's defaults).
 */
export type StreamTurn = Partial<IngestRequest> | (TurnInput & { conversation: string });

const toWireTurn = (t: StreamTurn): IngestRequest => {
  if ("turn_id" in t || "session_id" in t) return IngestRequest.fromPartial(t as Partial<IngestRequest>);
  const x = t as Partial<TurnInput> & { conversation?: string };
  return IngestRequest.fromPartial({
    conversation: x.conversation,
    turn_id: x.turnId,
    speaker: x.speaker,
    role: x.role,
    text: x.text,
    timestamp: x.timestamp,
    session_id: x.sessionId,
    metadata: x.metadata,
  });
};

/** The reply of a unary call as a promise. */
const replyOf = <Res>(start: (callback: (err: ServiceError | null, res: Res) => void) => void): Promise<Res> =>
  new Promise((resolve, reject) => start((err, res) => (err ? reject(err) : resolve(res))));

export class MemoryGrpcClient {
  private readonly client: MemoryClient;
  /** memory.v1.Maintenance on the same server (the query service serves it). */
  private readonly maintenance: MaintenanceClient;
  private readonly deadlineMs: number;

  constructor(private readonly options: MemoryGrpcClientOptions) {
    const channelOptions = { "grpc.max_receive_message_length": MAX_MESSAGE_BYTES };
    this.client = new MemoryClient(options.address, credentials.createInsecure(), channelOptions);
    this.maintenance = new MaintenanceClient(options.address, credentials.createInsecure(), channelOptions);
    this.deadlineMs = options.deadlineMs ?? 30_000;
  }

  /** Call metadata: the API key or internal token, plus `extra` (e.g. the tenant header). */
  metadata(extra: Record<string, string> = {}): Metadata {
    const md = new Metadata();
    if (this.options.apiKey) md.set("authorization", `Bearer ${this.options.apiKey}`);
    else if (this.options.internalToken) md.set("authorization", `Bearer ${this.options.internalToken}`);
    for (const [k, v] of Object.entries(extra)) md.set(k, v);
    // The caller's W3C trace context (docs/tracing.md): nothing while tracing is off.
    for (const [k, v] of Object.entries(traceHeaders())) md.set(k, v);
    return md;
  }

  private callOptions(scale = 1): Partial<CallOptions> {
    return { deadline: Date.now() + this.deadlineMs * scale };
  }

  /** Streams the turns (each naming its conversation) and resolves with the server's summary. */
  async ingest(turns: Iterable<StreamTurn>, md: Metadata = this.metadata()): Promise<IngestSummary> {
    let stream: ReturnType<MemoryClient["ingest"]> | undefined;
    // A stream of many turns takes longer than one call: four deadlines.
    const reply = replyOf<IngestSummary>((cb) => {
      stream = this.client.ingest(md, this.callOptions(4), cb);
    });
    const call = stream as ReturnType<MemoryClient["ingest"]>;
    for (const t of turns)
      if (!call.write(toWireTurn(t))) await new Promise<void>((r) => call.once("drain", () => r()));
    call.end();
    return reply;
  }

  flush(conversation?: string, md: Metadata = this.metadata()): Promise<FlushReply> {
    return replyOf<FlushReply>((cb) =>
      this.client.flush({ conversation: conversation ?? "" }, md, this.callOptions(), cb),
    );
  }

  async query(req: QueryRequest, md: Metadata = this.metadata()): Promise<QueryResult> {
    const reply = await replyOf<QueryReply>((cb) =>
      this.client.query(queryRequestToWire(req), md, this.callOptions(), cb),
    );
    return queryResultFromWire(reply);
  }

  async listRecords(query: RecordQuery, md: Metadata = this.metadata()): Promise<RecordPage> {
    const reply = await replyOf<ListRecordsReply>((cb) =>
      this.client.listRecords(recordQueryToWire(query), md, this.callOptions(), cb),
    );
    return recordPageFromWire(reply);
  }

  /** undefined on NOT_FOUND. */
  async getRecord(id: string, md: Metadata = this.metadata()): Promise<MemoryRecord | undefined> {
    try {
      return recordFromWire(
        await replyOf<RecordMessage>((cb) => this.client.getRecord({ id }, md, this.callOptions(), cb)),
      );
    } catch (err) {
      if (isServiceError(err) && err.code === status.NOT_FOUND) return undefined;
      throw err;
    }
  }

  /**
   * Consolidation of the tenant's pending candidates now (Maintenance.Consolidate). A run over many
   * candidates takes longer than a read: ten deadlines.
   */
  async consolidate(md: Metadata = this.metadata()): Promise<ConsolidationReport> {
    return consolidationReportFromWire(
      await replyOf<ConsolidationReportMessage>((cb) => this.maintenance.consolidate({}, md, this.callOptions(10), cb)),
    );
  }

  /** A record's version history (Maintenance.History); undefined on NOT_FOUND. */
  async history(id: string, md: Metadata = this.metadata()): Promise<RecordHistory | undefined> {
    try {
      return historyFromWire(
        await replyOf<RecordHistoryMessage>((cb) => this.maintenance.history({ id }, md, this.callOptions(), cb)),
      );
    } catch (err) {
      if (isServiceError(err) && err.code === status.NOT_FOUND) return undefined;
      throw err;
    }
  }

  /** Erases a conversation, or (none given) the whole tenant (Maintenance.Erase): four deadlines; the report names the erased records. */
  async erase(conversation?: string, md: Metadata = this.metadata()): Promise<StoreErasureReport> {
    return erasureReportFromWire(
      await replyOf<ErasureReportMessage>((cb) =>
        this.maintenance.erase({ conversation: conversation ?? "" }, md, this.callOptions(4), cb),
      ),
    );
  }

  /** Resolves once the channel is connected; rejects after `ms`. */
  waitForReady(ms: number): Promise<void> {
    return new Promise((resolve, reject) =>
      this.client.waitForReady(Date.now() + ms, (err) => (err ? reject(err) : resolve())),
    );
  }

  close(): void {
    this.client.close();
    this.maintenance.close();
  }
}
