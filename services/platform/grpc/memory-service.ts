/**
 * memory.v1.Memory's handlers over any MemoryService (the embedded engine, the gateway's
 * Kafka-writing service, the query service's read side). Every call is authorized first (the
 * caller's tenant from the metadata, or why not), then its request is parsed with the HTTP rules,
 * run against the service for that tenant, mapped to the wire, and counted per method and status.
 */
import type { ServerReadableStream } from "@grpc/grpc-js";
import type { MemoryService } from "../../core/memory-service.ts";
import type { Authenticator, AuthFailureGuard } from "./auth.ts";
import { GrpcCallMetrics, type GrpcMetricsSink } from "./call-metrics.ts";
import type { IngestRequest, IngestSummary, MemoryServer } from "./generated/memory.ts";
import { readIngestStream } from "./ingest-stream.ts";
import {
  parseFlushRequest,
  parseGetRecordRequest,
  parseListRecordsRequest,
  parseQueryRequest,
} from "./request-parsing.ts";
import { callServing, type GrpcLog } from "./serve-call.ts";
import { NotFound } from "./status-mapping.ts";
import { queryResultToWire, recordPageToWire, recordToWire } from "./wire-mapping.ts";

export type { GrpcLog };

export interface GrpcServiceDeps {
  service: MemoryService;
  authenticate: Authenticator;
  /**
   * Failed authentications per client address: an address over the limit is refused with
   * RESOURCE_EXHAUSTED and a `retry-after` trailer (as HTTP's 429). Absent: no limit.
   */
  authFailures?: AuthFailureGuard;
  metrics?: GrpcMetricsSink;
  /** The per-method counters on `metrics`, when the caller made them already (one set per registry). */
  callMetrics?: GrpcCallMetrics;
  log?: GrpcLog;
}

export const memoryServiceImplementation = (deps: GrpcServiceDeps): MemoryServer => {
  const { service, log } = deps;
  const callMetrics = deps.callMetrics ?? (deps.metrics ? new GrpcCallMetrics(deps.metrics) : undefined);

  const serve = callServing(deps, callMetrics);

  return {
    ingest: (call: ServerReadableStream<IngestRequest, IngestSummary>, callback) =>
      serve("Ingest", call, callback, (tenant) => readIngestStream(service, tenant, call, log)),
    flush: (call, callback) =>
      serve("Flush", call, callback, async (tenant) => {
        const conversation = parseFlushRequest(call.request);
        if (conversation === undefined) await service.flush(tenant);
        else await service.flush(tenant, conversation);
        return { flushed: true, conversation: conversation ?? "" };
      }),
    query: (call, callback) =>
      serve("Query", call, callback, async (tenant) =>
        queryResultToWire(await service.query(tenant, parseQueryRequest(call.request))),
      ),
    listRecords: (call, callback) =>
      serve("ListRecords", call, callback, async (tenant) =>
        recordPageToWire(await service.listRecords(tenant, parseListRecordsRequest(call.request))),
      ),
    getRecord: (call, callback) =>
      serve("GetRecord", call, callback, async (tenant) => {
        const record = await service.getRecord(tenant, parseGetRecordRequest(call.request));
        if (!record) throw new NotFound("record not found");
        return recordToWire(record);
      }),
  };
};
