/**
 * OpenTelemetry traces of a process (docs/tracing.md). Off by default: nothing is registered, so
 * every span the code starts comes from @opentelemetry/api's no-op tracer (no allocation beyond a
 * shared non-recording span, nothing exported, no trace headers written). On with
 * MEMORY_TRACING=otlp (OTLP/HTTP to the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
 * OTEL_EXPORTER_OTLP_ENDPOINT; the exporter reads them itself), MEMORY_TRACING=console (spans on
 * stdout, for a quick look), or programmatically with an exporter of the caller's (tests pass an
 * InMemorySpanExporter).
 *
 * What one setup registers, globally for the process: a tracer provider whose resource names the
 * service (gateway, sensory, segmenter, encoder, indexer, query, consolidator, embedded), the
 * AsyncLocalStorage context manager (the active span follows awaits, so a store call made while a
 * stage handles an input is that input's child), and the W3C trace-context propagator
 * (`traceparent`, `tracestate`: HTTP headers, gRPC metadata, Kafka record headers). The process's
 * stop flushes and shuts the provider down (a final step of services/platform/shutdown.ts).
 */
import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { z } from "zod";
import { registerFinalStopStep } from "./shutdown.ts";
import { markTracingEnabled } from "./trace-context.ts";

/** The processes that name themselves in traces (the resource's service.name is `memory-<name>`). */
export const TRACED_SERVICES = [
  "gateway",
  "sensory",
  "segmenter",
  "encoder",
  "indexer",
  "query",
  "consolidator",
  "embedded",
] as const;
export type TracedService = (typeof TRACED_SERVICES)[number];

const TracingEnvSchema = z.object({
  MEMORY_TRACING: z
    .enum(["off", "otlp", "console"], { error: 'MEMORY_TRACING must be "off", "otlp" or "console"' })
    .default("off"),
});

export type TracingMode = z.infer<typeof TracingEnvSchema>["MEMORY_TRACING"];

/** MEMORY_TRACING from the environment (empty counts as unset); a bad value throws naming the variable. */
export const tracingModeOf = (env: NodeJS.ProcessEnv = process.env): TracingMode => {
  const raw = env.MEMORY_TRACING?.trim();
  const parsed = TracingEnvSchema.safeParse({ MEMORY_TRACING: raw === "" ? undefined : raw?.toLowerCase() });
  if (!parsed.success) throw new Error(parsed.error.issues.map((i) => i.message).join("; "));
  return parsed.data.MEMORY_TRACING;
};

export interface Tracing {
  service: string;
  /** Exports every span ended so far (the in-memory exporter has them all after this). */
  flush(): Promise<void>;
  /** Flushes, shuts the provider down and unregisters the globals: tracing is off again. */
  shutdown(): Promise<void>;
}

export interface TracingOptions {
  /** An exporter of the caller's (tests): spans are exported one by one as they end. */
  exporter?: SpanExporter;
  /** Default process.env: MEMORY_TRACING decides when no exporter is given. */
  env?: NodeJS.ProcessEnv;
  /** Flush and shut down as the last step of the process's graceful stop (default true without an exporter). */
  flushOnStop?: boolean;
}

let active: Tracing | undefined;

const processorFor = async (
  mode: TracingMode,
  exporter: SpanExporter | undefined,
): Promise<SpanProcessor | undefined> => {
  if (exporter) return new SimpleSpanProcessor({ exporter });
  if (mode === "otlp") {
    // Loaded only when asked for: the OTLP exporter and its encoders are not read while tracing is off.
    const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-http");
    return new BatchSpanProcessor({ exporter: new OTLPTraceExporter() });
  }
  if (mode === "console") return new SimpleSpanProcessor({ exporter: new ConsoleSpanExporter() });
  return undefined;
};

/**
 * Registers tracing for this process when configured (an exporter given, or MEMORY_TRACING set);
 * returns undefined, registering nothing, when it is off. One setup per process: a second call
 * while one is active returns the active one.
 */
export const setupTracing = async (
  service: TracedService,
  options: TracingOptions = {},
): Promise<Tracing | undefined> => {
  if (active) return active;
  const processor = await processorFor(tracingModeOf(options.env), options.exporter);
  if (!processor) return undefined;
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": `memory-${service}`, "service.namespace": "memory" }),
    spanProcessors: [processor],
  });
  // The globals refuse a second registration; an earlier one (another library's) is replaced.
  trace.disable();
  context.disable();
  propagation.disable();
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  let closing: Promise<void> | undefined;
  const tracing: Tracing = {
    service: `memory-${service}`,
    flush: () => provider.forceFlush(),
    shutdown: () => {
      closing ??= (async () => {
        try {
          await provider.forceFlush();
          await provider.shutdown();
        } finally {
          if (active === tracing) {
            active = undefined;
            markTracingEnabled(false);
          }
          trace.disable();
          context.disable();
          propagation.disable();
        }
      })();
      return closing;
    },
  };
  active = tracing;
  markTracingEnabled(true);
  if (options.flushOnStop ?? options.exporter === undefined)
    registerFinalStopStep({ name: "flushing traces", run: () => tracing.shutdown() });
  return tracing;
};
