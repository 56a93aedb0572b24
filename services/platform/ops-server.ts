/**
 * The operations endpoint of a process: /metrics (Prometheus), /healthz (alive) and /readyz
 * (ready for traffic). Stage processes and the query service serve it on a port of its own
 * (MEMORY_METRICS_PORT), so tenant-labelled metrics never share a port with a public API.
 */
import { type RunningHttpServer, startHttpServer } from "./http-server.ts";
import type { Metrics } from "./metrics.ts";

export interface Probe {
  ok: boolean;
  /** The JSON body of the answer. */
  body: Record<string, unknown>;
}

export interface OpsServerOptions {
  metrics: Metrics;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Default: always healthy, body { status: "ok" }. */
  health?: () => Probe | Promise<Probe>;
  /** Default: no /readyz (404). */
  ready?: () => Probe | Promise<Probe>;
}

const answer = async (probe: () => Probe | Promise<Probe>): Promise<Response> => {
  const p = await probe();
  return Response.json(p.body, { status: p.ok ? 200 : 503 });
};

export const startOpsServer = (opts: OpsServerOptions): Promise<RunningHttpServer> =>
  startHttpServer(
    {
      fetch: async (req: Request): Promise<Response> => {
        const path = new URL(req.url).pathname;
        if (path === "/metrics")
          return new Response(await opts.metrics.render(), { headers: { "content-type": opts.metrics.contentType } });
        if (path === "/healthz") return answer(opts.health ?? (() => ({ ok: true, body: { status: "ok" } })));
        if (path === "/readyz" && opts.ready) return answer(opts.ready);
        return new Response("not found", { status: 404 });
      },
    },
    { host: opts.host, port: opts.port },
  );
