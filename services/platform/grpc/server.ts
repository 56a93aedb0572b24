/**
 * A gRPC server of memory.v1.Memory (schemas/memory.proto, generated into ./generated) over any
 * MemoryService: the gateway's public front door and the internal query service both start one,
 * each with its own Authenticator; the query service also serves memory.v1.Maintenance (consolidation,
 * history, erasure) to the gateway. Binds before it resolves; closing lets calls in flight finish
 * for a grace period, then cancels them.
 */
import { ServerCredentials as Creds, Server, type ServerCredentials } from "@grpc/grpc-js";
import type { StoreSideMaintenance } from "../../core/maintenance.ts";
import { GrpcCallMetrics } from "./call-metrics.ts";
import { MaintenanceService, MemoryService } from "./generated/memory.ts";
import { maintenanceServiceImplementation } from "./maintenance-service.ts";
import { type GrpcServiceDeps, memoryServiceImplementation } from "./memory-service.ts";

export interface GrpcServerOptions extends GrpcServiceDeps {
  /** Interface to bind (default 127.0.0.1). */
  host?: string;
  /** Port (default 50051); 0 picks a free one. */
  port?: number;
  credentials?: ServerCredentials;
  /** On close, how long calls in flight may take before they are cancelled (default 5000 ms). */
  closeGraceMs?: number;
  /**
   * Also serve memory.v1.Maintenance (consolidation, history, erasure) over this, with the same
   * authentication: the internal query service does, for the gateway.
   */
  maintenance?: StoreSideMaintenance;
}

export interface RunningGrpcServer {
  /** host:port actually bound, e.g. 127.0.0.1:50123 */
  address: string;
  port: number;
  close(): Promise<void>;
}

/** Largest message a server or client of this service accepts. */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

const hostPort = (host: string, port: number): string => (host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`);

/** Serves memory.v1.Memory over `options.service`; resolves once bound. */
export const startGrpcServer = async (options: GrpcServerOptions): Promise<RunningGrpcServer> => {
  const host = options.host ?? "127.0.0.1";
  const server = new Server({ "grpc.max_receive_message_length": MAX_MESSAGE_BYTES });
  const callMetrics = options.metrics ? new GrpcCallMetrics(options.metrics) : undefined;
  server.addService(
    MemoryService,
    memoryServiceImplementation({ ...options, ...(callMetrics ? { callMetrics } : {}) }),
  );
  if (options.maintenance)
    server.addService(
      MaintenanceService,
      maintenanceServiceImplementation({ ...options, maintenance: options.maintenance }, callMetrics),
    );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      hostPort(host, options.port ?? 50051),
      options.credentials ?? Creds.createInsecure(),
      (err, bound) => (err ? reject(err) : resolve(bound)),
    ),
  );
  const graceMs = options.closeGraceMs ?? 5000;
  let closing: Promise<void> | undefined;
  return {
    address: hostPort(host, port),
    port,
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      return closing;
    },
  };
};
