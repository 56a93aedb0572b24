/**
 * memory.v1.Memory's handlers over any MemoryService (the embedded engine, the gateway's
 * Kafka-writing service, the query service's read side). Every call is authorized first (the
 * caller's tenant from the metadata, or why not), then its request is parsed with the HTTP rules,
 * run against the service for that tenant, mapped to the wire, and counted per method and status.
 */
import { Metadata, type ServerReadableStream, type sendUnaryData, status } from "@grpc/grpc-js";
import type { MemoryService } from "../../core/memory-service.ts";
import { type Authenticator, type AuthFailureGuard, peerAddressOf } from "./auth.ts";
import { GrpcCallMetrics, type GrpcMetricsSink } from "./call-metrics.ts";
import type { IngestRequest, IngestSummary, MemoryServer } from "./generated/memory.ts";
import { readIngestStream } from "./ingest-stream.ts";
import {
  parseFlushRequest,
  parseGetRecordRequest,
  parseListRecordsRequest,
  parseQueryRequest,
} from "./request-parsing.ts";
import { type GrpcFailure, NotFound, toGrpcFailure } from "./status-mapping.ts";
import { queryResultToWire, recordPageToWire, recordToWire } from "./wire-mapping.ts";

export type GrpcLog = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;

export interface GrpcServiceDeps {
  service: MemoryService;
  authenticate: Authenticator;
  /**
   * Failed authentications per client address: an address over the limit is refused with
   * RESOURCE_EXHAUSTED and a `retry-after` trailer (as HTTP's 429). Absent: no limit.
   */
  authFailures?: AuthFailureGuard;
  metrics?: GrpcMetricsSink;
  log?: GrpcLog;
}

interface Call {
  metadata: Metadata;
  getPeer(): string;
}

export const memoryServiceImplementation = (deps: GrpcServiceDeps): MemoryServer => {
  const { service, log } = deps;
  const callMetrics = deps.metrics ? new GrpcCallMetrics(deps.metrics) : undefined;

  /**
   * The caller's tenant, or why the call is refused. An address with too many failed
   * authentications is refused before its key is looked at, as on HTTP.
   */
  const authorize = (call: Call): string | GrpcFailure => {
    const address = peerAddressOf(call.getPeer());
    const wait = deps.authFailures?.retryAfterSeconds(address) ?? 0;
    if (wait > 0) {
      const metadata = new Metadata();
      metadata.set("retry-after", String(wait));
      return { code: status.RESOURCE_EXHAUSTED, details: "too many failed authentications; retry later", metadata };
    }
    const tenant = deps.authenticate(call.metadata);
    if (tenant !== undefined) return tenant;
    deps.authFailures?.fail(address);
    return { code: status.UNAUTHENTICATED, details: "missing or invalid API key" };
  };

  /**
   * Authorizes the call, runs it for the tenant and answers: the reply, or the failure as a status
   * (an unexpected one logged, never shown to the caller). `method` is the proto's name.
   */
  const serve = <Res>(
    method: string,
    call: Call,
    callback: sendUnaryData<Res>,
    run: (tenant: string) => Promise<Res>,
  ): void => {
    const started = performance.now();
    const done = (code: status): void => callMetrics?.observe(method, code, (performance.now() - started) / 1000);
    const tenant = authorize(call);
    if (typeof tenant !== "string") {
      done(tenant.code);
      callback(tenant);
      return;
    }
    run(tenant).then(
      (res) => {
        done(status.OK);
        callback(null, res);
      },
      (err: unknown) => {
        const f = toGrpcFailure(err);
        if (f.code === status.INTERNAL) log?.("error", "gRPC call failed", { method, error: String(err) });
        done(f.code);
        callback({ code: f.code, details: f.details, ...(f.metadata ? { metadata: f.metadata } : {}) });
      },
    );
  };

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
