/**
 * The stage runtime's spans and Kafka trace headers (docs/tracing.md), kept apart from its logic:
 * - a chunk span per transaction's chunk (`<stage> chunk`), linked to the producer context of each
 *   of its inputs (a chunk mixes traces, so it parents none of them);
 * - an input span per input handled (`<stage> handle`), the child of the context its record's
 *   `traceparent` header names (the upstream stage's, or the gateway's), else of the chunk span;
 * - outputs carry the handling span's context in their headers, next to the headers they have.
 * Aggregation: a stateful stage may take several inputs of a key before it writes an output (the
 * segmenter's turns before a segment closes). The contexts of a key's event inputs that produced
 * no output are held (in memory, bounded); the output that follows gets its own span
 * (`<stage> emit`) that starts a new trace with a LINK to each of them and to the input that
 * triggered it, and that span's context goes on in the output's headers. A turn's trace then
 * reaches the segment through a link, and the segment's trace continues to the indexer.
 * The held contexts are lost on a restart or a rebalance (links are best effort; the data is not).
 * While tracing is off every span is the API's no-op, nothing is held and no header is written.
 */
import { type Context, context, type Link, SpanKind, trace } from "@opentelemetry/api";
import type { IHeaders, KafkaMessage, Message } from "kafkajs";
import {
  contextFromCarrier,
  inSpan,
  linkTo,
  memoryTracer,
  traceHeaders,
  tracingEnabled,
} from "../../../platform/trace-context.ts";

/** Links one span carries at most (the SDK's default span link limit). */
export const MAX_LINKS = 128;
/** Keys whose pending input contexts are held at most (the oldest key is forgotten first). */
export const MAX_PENDING_KEYS = 10_000;

/** The producer context a record's headers name (ROOT when none). */
export const contextFromHeaders = (headers: IHeaders | undefined): Context => contextFromCarrier(headers);

/** Adds the context's `traceparent` / `tracestate` to each message's headers, keeping the others. */
export const withTraceHeaders = <M extends Message>(messages: M[], ctx: Context = context.active()): M[] => {
  const carrier = traceHeaders(ctx);
  if (Object.keys(carrier).length === 0) return messages;
  for (const m of messages) m.headers = { ...(m.headers ?? {}), ...carrier };
  return messages;
};

export class StageTracing {
  /** Per key: links to its event inputs since its last output (insertion order = age, for the bound). */
  private readonly pending = new Map<string, Link[]>();

  constructor(private readonly stage: string) {}

  /** A chunk of a partition: the span is active while `fn` runs (prepare() and the inputs inside it). */
  chunk<T>(topic: string, partition: number, messages: readonly KafkaMessage[], fn: () => Promise<T>): Promise<T> {
    if (!tracingEnabled()) return fn();
    const links: Link[] = [];
    for (const m of messages) {
      if (links.length >= MAX_LINKS) break;
      const link = linkTo(contextFromHeaders(m.headers), { "messaging.kafka.offset": m.offset });
      if (link) links.push(link);
    }
    return inSpan(
      `${this.stage} chunk`,
      {
        kind: SpanKind.CONSUMER,
        root: true,
        links,
        attributes: {
          "memory.stage": this.stage,
          "messaging.system": "kafka",
          "messaging.destination.name": topic,
          "messaging.destination.partition.id": String(partition),
          "messaging.batch.message_count": messages.length,
        },
      },
      () => fn(),
    );
  }

  /**
   * One input handled: `fn` runs in a span that is the child of the record's producer context (or
   * of the active chunk span when the record carries none; a tick's input has no record).
   */
  input<T>(key: string, headers: IHeaders | undefined, kind: "event" | "control", fn: () => Promise<T>): Promise<T> {
    const active = context.active();
    const producer = headers ? contextFromCarrier(headers, active) : active;
    return inSpan(
      `${this.stage} handle`,
      {
        kind: SpanKind.CONSUMER,
        parent: producer,
        attributes: { "memory.stage": this.stage, "memory.input": kind, "messaging.kafka.message.key": key },
      },
      () => fn(),
    );
  }

  /**
   * Called inside the input's span with the messages its handling produced: writes the trace
   * headers (the input span's, or an emit span's over the held inputs) and updates the held
   * contexts. `event`: the input was an event (controls are not aggregated); `stateKept`: the
   * key still has a state after it.
   */
  outputs(key: string, messages: Message[], event: boolean, stateKept: boolean): Message[] {
    const current = linkTo(context.active());
    if (!current) return messages;
    const held = this.pending.get(key);
    this.pending.delete(key);
    if (messages.length === 0) {
      // Nothing written yet: an event joins the key's aggregate; a control leaves it as it was;
      // a dropped state drops it.
      const next = event ? [...(held ?? []), current] : (held ?? []);
      if (stateKept && next.length > 0) this.hold(key, next);
      return messages;
    }
    if (!held || held.length === 0) return withTraceHeaders(messages);
    // The output came from several inputs: its own trace, linked to each of them.
    const links = [...held, current].slice(-MAX_LINKS);
    const emit = memoryTracer().startSpan(
      `${this.stage} emit`,
      {
        kind: SpanKind.PRODUCER,
        root: true,
        links,
        attributes: {
          "memory.stage": this.stage,
          "messaging.kafka.message.key": key,
          "memory.linked_inputs": links.length,
          "messaging.batch.message_count": messages.length,
        },
      },
      context.active(),
    );
    withTraceHeaders(messages, trace.setSpan(context.active(), emit));
    emit.end();
    // The triggering input may open the key's next aggregate (the segmenter's boundary turn).
    if (event && stateKept) this.hold(key, [current]);
    return messages;
  }

  private hold(key: string, links: Link[]): void {
    this.pending.set(key, links.slice(-MAX_LINKS));
    if (this.pending.size > MAX_PENDING_KEYS) {
      const oldest = this.pending.keys().next().value;
      if (oldest !== undefined) this.pending.delete(oldest);
    }
  }
}
