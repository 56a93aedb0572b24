/**
 * How every unary call of this process's gRPC services is served: authorized first (the caller's
 * tenant from the metadata, or why not), run for that tenant, answered with the reply or the failure
 * as a status (an unexpected one logged, never shown to the caller), and counted per method and status.
 */
import { Metadata, type sendUnaryData, status } from "@grpc/grpc-js";
import { SpanKind } from "@opentelemetry/api";
import { contextFromCarrier, inSpan } from "../trace-context.ts";
import { type Authenticator, type AuthFailureGuard, peerAddressOf } from "./auth.ts";
import type { GrpcCallMetrics } from "./call-metrics.ts";
import { type GrpcFailure, toGrpcFailure } from "./status-mapping.ts";

export type GrpcLog = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;

export interface Call {
  metadata: Metadata;
  getPeer(): string;
}

export interface CallServingDeps {
  authenticate: Authenticator;
  authFailures?: AuthFailureGuard;
  log?: GrpcLog;
}

/** Serves one call: `method` is the proto's name (Query, Consolidate, ...). */
export type ServeCall = <Res>(
  method: string,
  call: Call,
  callback: sendUnaryData<Res>,
  run: (tenant: string) => Promise<Res>,
) => void;

export const callServing = (deps: CallServingDeps, callMetrics?: GrpcCallMetrics): ServeCall => {
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

  return (method, call, callback, run) => {
    const started = performance.now();
    const done = (code: status): void => callMetrics?.observe(method, code, (performance.now() - started) / 1000);
    const tenant = authorize(call);
    if (typeof tenant !== "string") {
      done(tenant.code);
      callback(tenant);
      return;
    }
    // A span per call (docs/tracing.md), the child of the caller's `traceparent` metadata.
    const traced = inSpan(
      `grpc ${method}`,
      {
        kind: SpanKind.SERVER,
        parent: contextFromCarrier(call.metadata.getMap()),
        attributes: { "rpc.system": "grpc", "rpc.method": method, "memory.tenant": tenant },
      },
      async (span) => {
        try {
          return await run(tenant);
        } catch (err) {
          span.setAttribute("rpc.grpc.status_code", toGrpcFailure(err).code);
          throw err;
        }
      },
    );
    traced.then(
      (res) => {
        done(status.OK);
        callback(null, res);
      },
      (err: unknown) => {
        const f = toGrpcFailure(err);
        if (f.code === status.INTERNAL) deps.log?.("error", "gRPC call failed", { method, error: String(err) });
        done(f.code);
        callback({ code: f.code, details: f.details, ...(f.metadata ? { metadata: f.metadata } : {}) });
      },
    );
  };
};
