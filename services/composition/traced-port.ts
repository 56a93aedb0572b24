/**
 * A span per call of a port (docs/tracing.md): the stores, the embedder and the LLM are wrapped
 * here, at the composition root, instead of instrumenting each adapter. The wrapper is a Proxy
 * whose methods run the real one (with the real object as `this`, so private fields and getters
 * keep working) inside a client span `<port>.<method>`, active while the call runs so what it calls
 * nests under it; a rejected call marks its span failed. Properties that are not functions pass
 * through. Nothing is wrapped while tracing is off (`tracedPortIfOn`).
 */
import { context, SpanKind, trace } from "@opentelemetry/api";
import { failSpan, memoryTracer, tracingEnabled } from "../platform/trace-context.ts";

/** What the port is, in the span names and the `memory.port` attribute: graph, vectors, embedder, llm. */
export type PortName = "graph" | "vectors" | "embedder" | "llm";

const isThenable = (v: unknown): v is PromiseLike<unknown> =>
  typeof v === "object" && v !== null && typeof (v as { then?: unknown }).then === "function";

export const tracedPort = <T extends object>(port: T, name: PortName): T => {
  const wrappers = new Map<PropertyKey, unknown>();
  return new Proxy(port, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function" || typeof prop !== "string" || prop === "constructor") return value;
      const known = wrappers.get(prop);
      if (known) return known;
      const method = value as (...args: unknown[]) => unknown;
      const wrapper = (...args: unknown[]): unknown => {
        const parent = context.active();
        const span = memoryTracer().startSpan(
          `${name}.${prop}`,
          { kind: SpanKind.CLIENT, attributes: { "memory.port": name, "memory.port.method": prop } },
          parent,
        );
        let result: unknown;
        try {
          result = context.with(trace.setSpan(parent, span), () => method.apply(target, args));
        } catch (err) {
          failSpan(span, err);
          span.end();
          throw err;
        }
        if (!isThenable(result)) {
          span.end();
          return result;
        }
        return Promise.resolve(result).then(
          (v) => {
            span.end();
            return v;
          },
          (err: unknown) => {
            failSpan(span, err);
            span.end();
            throw err;
          },
        );
      };
      wrappers.set(prop, wrapper);
      return wrapper;
    },
  });
};

/** The port traced when tracing is on, else the port itself (no Proxy, no cost). */
export const tracedPortIfOn = <T extends object>(port: T, name: PortName): T =>
  tracingEnabled() ? tracedPort(port, name) : port;
