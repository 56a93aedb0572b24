/**
 * A span per HTTP request (docs/tracing.md), as a hono middleware: the child of the caller's W3C
 * `traceparent` when it sends one, named `METHOD /route/template` once the route is known, with the
 * status and the tenant (the API key's, never a text of the request) as attributes. The span is
 * active while the request is handled, so what the handler calls (a Kafka produce, a gRPC call,
 * a store) nests under it. While tracing is off it adds one no-op span and nothing else.
 */
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import type { Context, MiddlewareHandler } from "hono";
import { contextFromCarrier, inSpan } from "./trace-context.ts";

export interface HttpTracingOptions {
  /** The route template that served the request (e.g. `/v1/records/:id`), read after it ran. */
  route(c: Context): string;
  /** The authenticated tenant, read after the request ran (default: the context's `tenant` variable when set). */
  tenant?(c: Context): string | undefined;
}

const tenantVariable = (c: Context): string | undefined => {
  const v: unknown = c.get("tenant");
  return typeof v === "string" ? v : undefined;
};

export const httpTracing = (options: HttpTracingOptions): MiddlewareHandler => {
  return async (c, next) => {
    const parent = contextFromCarrier({
      traceparent: c.req.header("traceparent"),
      tracestate: c.req.header("tracestate"),
    });
    await inSpan(
      `${c.req.method} request`,
      {
        kind: SpanKind.SERVER,
        parent,
        attributes: { "http.request.method": c.req.method, "url.path": c.req.path },
      },
      async (span) => {
        await next();
        const route = options.route(c);
        const status = c.res.status;
        span.updateName(`${c.req.method} ${route}`);
        span.setAttribute("http.route", route);
        span.setAttribute("http.response.status_code", status);
        const tenant = options.tenant ? options.tenant(c) : tenantVariable(c);
        if (tenant !== undefined) span.setAttribute("memory.tenant", tenant);
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      },
    );
  };
};
