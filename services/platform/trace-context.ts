/**
 * The API-only half of tracing (docs/tracing.md): the tracer, a span around an async call, and W3C
 * trace context in and out of string carriers (HTTP headers, gRPC metadata, Kafka record headers).
 * Everything here goes through @opentelemetry/api, so while no provider is registered (tracing
 * off, the default) the spans are the API's non-recording no-ops and inject writes nothing.
 * The SDK half (provider, exporters) is ./tracing.ts, loaded only by the entry points.
 */
import {
  type Attributes,
  type Context,
  context,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  type SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type Tracer,
  trace,
} from "@opentelemetry/api";

/** The instrumentation scope of every span this code base starts. */
export const TRACER_NAME = "streaming-memory";

/** The tracer every span of the code base comes from (the no-op one while tracing is off). */
export const memoryTracer = (): Tracer => trace.getTracer(TRACER_NAME);

let enabled = false;

/** Whether ./tracing.ts has registered a provider (callers skip optional wrapping when not). */
export const tracingEnabled = (): boolean => enabled;

/** For ./tracing.ts only. */
export const markTracingEnabled = (on: boolean): void => {
  enabled = on;
};

/** A header value as the transports give it: a string, bytes, or several of them. */
export type CarrierValue = string | Buffer | readonly (string | Buffer)[] | undefined;
export type Carrier = Readonly<Record<string, CarrierValue>>;

const carrierGetter: TextMapGetter<Carrier> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => {
    const v = carrier[key];
    if (v === undefined) return undefined;
    if (Array.isArray(v)) return v.map((x: string | Buffer) => x.toString());
    return v.toString();
  },
};

/** The W3C headers (`traceparent`, `tracestate`) of a context; empty while tracing is off or no span is active. */
export const traceHeaders = (ctx: Context = context.active()): Record<string, string> => {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier;
};

/** The remote context a carrier names (or `base` unchanged when it names none). */
export const contextFromCarrier = (carrier: Carrier | undefined, base: Context = ROOT_CONTEXT): Context =>
  carrier ? propagation.extract(base, carrier, carrierGetter) : base;

/** A link to the span a context holds, when it holds a valid one. */
export const linkTo = (ctx: Context, attributes?: Attributes): Link | undefined => {
  const sc = trace.getSpanContext(ctx);
  if (!sc || !trace.isSpanContextValid(sc)) return undefined;
  return attributes ? { context: sc, attributes } : { context: sc };
};

export interface SpanSpec {
  kind?: SpanKind;
  attributes?: Attributes;
  links?: Link[];
  /** The parent (default: the active context). */
  parent?: Context;
  /** Start a new trace (links, not a parent, tie it to others). */
  root?: boolean;
}

/** Records a failure on a span: the exception event and the error status. */
export const failSpan = (span: Span, err: unknown): void => {
  span.recordException(err instanceof Error ? err : String(err));
  span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
};

/**
 * Runs `fn` inside a new active span, which ends when fn settles; a thrown or rejected error is
 * recorded on it and rethrown.
 */
export const inSpan = async <T>(name: string, spec: SpanSpec, fn: (span: Span) => Promise<T>): Promise<T> => {
  const options = {
    ...(spec.kind !== undefined ? { kind: spec.kind } : {}),
    ...(spec.attributes ? { attributes: spec.attributes } : {}),
    ...(spec.links && spec.links.length > 0 ? { links: spec.links } : {}),
    ...(spec.root ? { root: true } : {}),
  };
  return memoryTracer().startActiveSpan(name, options, spec.parent ?? context.active(), async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      failSpan(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
};
