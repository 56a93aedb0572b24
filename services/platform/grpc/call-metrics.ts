/**
 * Request count and latency of gRPC calls per method and status code, on the process's metrics
 * registry. Takes the registry by its shape (the service's Metrics class fits), so the gRPC layer
 * does not depend on where that class lives.
 */
import { status } from "@grpc/grpc-js";
import { Counter, Histogram, type Registry } from "prom-client";

/** What the gRPC layer needs of the process's metrics: the registry, and the query outcome counter. */
export interface GrpcMetricsSink {
  readonly registry: Registry;
  query(outcome: "ok" | "error", seconds: number): void;
}

export class GrpcCallMetrics {
  private readonly requests: Counter<"method" | "code">;
  private readonly latency: Histogram<"method">;
  constructor(private readonly metrics: GrpcMetricsSink) {
    const registers = [metrics.registry];
    this.requests = new Counter({
      name: "memory_grpc_requests_total",
      help: "gRPC calls served, by method and status code.",
      labelNames: ["method", "code"],
      registers,
    });
    this.latency = new Histogram({
      name: "memory_grpc_request_duration_seconds",
      help: "gRPC call latency by method.",
      labelNames: ["method"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
  }

  /** One finished call; `method` is the proto's name (Query, Ingest, ...). */
  observe(method: string, code: status, seconds: number): void {
    this.requests.inc({ method, code: status[code] ?? String(code) });
    this.latency.observe({ method }, seconds);
    if (method === "Query") this.metrics.query(code === status.OK ? "ok" : "error", seconds);
  }
}
