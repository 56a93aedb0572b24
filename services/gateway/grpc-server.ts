/**
 * The gateway's public gRPC front door: the platform's memory.v1.Memory server (services/platform/
 * grpc) with the failed-authentication limit the HTTP front door has, per client address, so that
 * API keys cannot be guessed faster over gRPC than over HTTP. The internal query service starts the
 * platform server directly: its callers are the gateways, not the public.
 */
import {
  type GrpcServerOptions,
  type RunningGrpcServer,
  startGrpcServer as startMemoryServer,
} from "../platform/grpc/server.ts";
import { AuthFailureLimiter } from "./auth-failure-limiter.ts";

export interface GatewayGrpcServerOptions extends Omit<GrpcServerOptions, "authFailures"> {
  /**
   * Failed authentications per client address per minute before calls from it are refused with
   * RESOURCE_EXHAUSTED and a `retry-after` trailer (as HTTP's 429); absent or 0: no limit.
   */
  authFailuresPerMinute?: number;
}

/** Serves memory.v1.Memory for the public; resolves once bound. */
export const startGrpcServer = (options: GatewayGrpcServerOptions): Promise<RunningGrpcServer> => {
  const { authFailuresPerMinute, ...rest } = options;
  return startMemoryServer({ ...rest, authFailures: new AuthFailureLimiter({ limit: authFailuresPerMinute ?? 0 }) });
};
