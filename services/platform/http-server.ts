import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";

/** Anything with a fetch handler, e.g. the hono app from createHttpApp. */
export interface FetchApp {
  fetch: Parameters<typeof serve>[0]["fetch"];
}

export interface HttpServerOptions {
  /** Interface to bind (default 127.0.0.1: local only). */
  host?: string;
  /** Port to bind (default 8787); 0 picks a free port, reported in the result. */
  port?: number;
  /** On close, how long in-flight requests may take before their connections are cut (default 5000 ms). */
  closeGraceMs?: number;
}

export interface RunningHttpServer {
  /** Base URL with the port actually bound, e.g. http://127.0.0.1:53121 */
  url: string;
  host: string;
  port: number;
  /** Stop accepting connections, close idle keep-alive ones, and resolve once the server is closed. */
  close(): Promise<void>;
}

const urlHost = (host: string): string => (host.includes(":") ? `[${host}]` : host);

/** Serves `app` over HTTP/1.1 with @hono/node-server; resolves once listening (rejects on e.g. EADDRINUSE). */
export const startHttpServer = (app: FetchApp, options: HttpServerOptions = {}): Promise<RunningHttpServer> => {
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? 8787;
  const graceMs = options.closeGraceMs ?? 5000;
  return new Promise((resolve, reject) => {
    const onStartError = (err: Error): void => reject(err);
    const server = serve({ fetch: app.fetch, hostname: host, port }, (info: AddressInfo) => {
      server.off("error", onStartError);
      let closing: Promise<void> | undefined;
      const close = (): Promise<void> => {
        closing ??= new Promise<void>((done, fail) => {
          // A (ref'd) timer: keeps the process alive while connections drain, then cuts what is left.
          const force = setTimeout(() => {
            if ("closeAllConnections" in server) server.closeAllConnections();
          }, graceMs);
          server.close((err) => {
            clearTimeout(force);
            if (err) fail(err);
            else done();
          });
          if ("closeIdleConnections" in server) server.closeIdleConnections();
        });
        return closing;
      };
      resolve({ url: `http://${urlHost(info.address)}:${info.port}`, host: info.address, port: info.port, close });
    });
    server.once("error", onStartError);
  });
};
