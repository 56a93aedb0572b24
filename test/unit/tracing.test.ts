// Tracing (issue 16 part 4, docs/tracing.md) without servers: off by default (no spans recorded,
// no headers written, no wrapping), the W3C round trip through Kafka record headers, the stage
// runtime's aggregation links, the traced ports, the HTTP middleware and the gRPC call span.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Metadata, status } from "@grpc/grpc-js";
import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace";
import { Hono } from "hono";
import type { Message } from "kafkajs";
import { tracedPort, tracedPortIfOn } from "../../services/composition/traced-port.ts";
import {
  contextFromHeaders,
  StageTracing,
  withTraceHeaders,
} from "../../services/core/adapters/kafka/stage-tracing.ts";
import { MemoryGrpcClient } from "../../services/platform/grpc/client.ts";
import { callServing } from "../../services/platform/grpc/serve-call.ts";
import { httpTracing } from "../../services/platform/http-tracing.ts";
import { inSpan, traceHeaders, tracingEnabled } from "../../services/platform/trace-context.ts";
import { setupTracing, tracingModeOf } from "../../services/platform/tracing.ts";

/** A port with a private field and a getter, as the adapters have. */
class Store {
  #rows = new Map<string, number>();
  get size(): number {
    return this.#rows.size;
  }
  async put(key: string, n: number): Promise<void> {
    this.#rows.set(key, n);
  }
  async get(key: string): Promise<number> {
    const n = this.#rows.get(key);
    if (n === undefined) throw new Error(`no ${key}`);
    return n;
  }
  label(): string {
    return `store of ${this.#rows.size}`;
  }
}

const byName = (spans: readonly ReadableSpan[], name: string): ReadableSpan[] => spans.filter((s) => s.name === name);
const one = (spans: readonly ReadableSpan[], name: string): ReadableSpan => {
  const found = byName(spans, name);
  assert.equal(found.length, 1, `one span named ${name}, got ${found.length}: ${spans.map((s) => s.name).join(", ")}`);
  return found[0] as ReadableSpan;
};
const parentOf = (s: ReadableSpan): string | undefined => s.parentSpanContext?.spanId;

test("MEMORY_TRACING: off unless set; a bad value is refused naming the variable", () => {
  assert.equal(tracingModeOf({}), "off");
  assert.equal(tracingModeOf({ MEMORY_TRACING: "" }), "off");
  assert.equal(tracingModeOf({ MEMORY_TRACING: "OTLP" }), "otlp");
  assert.throws(() => tracingModeOf({ MEMORY_TRACING: "jaeger" }), /MEMORY_TRACING must be/);
});

test("tracing off: no provider, spans do not record, no trace headers, ports are not wrapped", async () => {
  assert.equal(await setupTracing("sensory", { env: {} }), undefined);
  assert.equal(tracingEnabled(), false);
  const store = new Store();
  assert.equal(tracedPortIfOn(store, "graph"), store, "no Proxy while off");
  let headers: Record<string, string> = { untouched: "yes" };
  const messages: Message[] = [{ key: "k", value: Buffer.from("v"), headers: { "memory-control": "flush" } }];
  const stage = new StageTracing("sensory");
  await inSpan("off", {}, async (span) => {
    assert.equal(span.isRecording(), false);
    headers = traceHeaders();
    await stage.input("k", undefined, "event", async () => stage.outputs("k", messages, true, true));
    withTraceHeaders(messages);
  });
  assert.deepEqual(headers, {});
  const client = new MemoryGrpcClient({ address: "127.0.0.1:1" });
  await inSpan("off", {}, async () => {
    assert.deepEqual(client.metadata().get("traceparent"), [], "no traceparent metadata");
  });
  client.close();
  assert.deepEqual(messages[0]?.headers, { "memory-control": "flush" }, "the existing headers only");
});

test("tracing on: spans, Kafka header round trip, aggregation links, traced ports, HTTP and gRPC spans", async (t) => {
  const exporter = new InMemorySpanExporter();
  const tracing = await setupTracing("embedded", { exporter });
  assert.ok(tracing);
  t.after(() => tracing.shutdown());
  assert.equal(tracingEnabled(), true);

  await t.test("inject / extract through Kafka record headers (bytes, as a consumer gets them)", async () => {
    exporter.reset();
    const produced: Message[] = [{ key: "acme/c1", value: Buffer.from("turn"), headers: { "memory-control": "x" } }];
    await inSpan("producer", { kind: SpanKind.PRODUCER }, async () => {
      withTraceHeaders(produced);
    });
    const producer = one(exporter.getFinishedSpans(), "producer");
    const sent = produced[0]?.headers ?? {};
    assert.equal(sent["memory-control"], "x", "existing headers kept");
    assert.match(String(sent.traceparent), /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    // A consumer sees Buffers.
    const received = Object.fromEntries(Object.entries(sent).map(([k, v]) => [k, Buffer.from(String(v))]));
    const remote = trace.getSpanContext(contextFromHeaders(received));
    assert.equal(remote?.traceId, producer.spanContext().traceId);
    assert.equal(remote?.spanId, producer.spanContext().spanId);
    assert.equal(remote?.isRemote, true);
  });

  await t.test(
    "a stage input is the child of its record's context; aggregated outputs get an emit span with links",
    async () => {
      exporter.reset();
      const turnHeaders: Record<string, string>[] = [];
      for (const n of [1, 2, 3])
        await inSpan(`turn ${n}`, {}, async () => {
          turnHeaders.push(traceHeaders());
        });
      const stage = new StageTracing("segmenter");
      const out: Message[] = [{ key: "acme/c1", value: Buffer.from("segment") }];
      // Turns 1 and 2 are held (no output); turn 3 closes the segment.
      for (const [i, h] of turnHeaders.entries())
        await stage.input("acme/c1", h, "event", async () => stage.outputs("acme/c1", i < 2 ? [] : out, true, true));
      const spans = exporter.getFinishedSpans();
      const handles = byName(spans, "segmenter handle");
      assert.equal(handles.length, 3);
      for (const [i, h] of handles.entries()) {
        const turn = one(spans, `turn ${i + 1}`);
        assert.equal(h.spanContext().traceId, turn.spanContext().traceId, "the handle span continues the turn's trace");
        assert.equal(parentOf(h), turn.spanContext().spanId);
      }
      const emit = one(spans, "segmenter emit");
      assert.equal(parentOf(emit), undefined, "the segment starts its own trace");
      assert.deepEqual(
        emit.links.map((l) => l.context.spanId),
        handles.map((h) => h.spanContext().spanId),
        "linked to every turn of the segment",
      );
      const carried = trace.getSpanContext(contextFromHeaders(out[0]?.headers));
      assert.equal(carried?.spanId, emit.spanContext().spanId, "the output carries the segment's context");
    },
  );

  await t.test("a stage input without trace headers nests under the chunk span", async () => {
    exporter.reset();
    const stage = new StageTracing("encoder");
    const msg = { key: Buffer.from("k"), value: null, offset: "7", headers: {} } as unknown as Parameters<
      StageTracing["chunk"]
    >[2][number];
    await stage.chunk("memory.segments.v1", 0, [msg], () => stage.input("k", {}, "event", async () => undefined));
    const spans = exporter.getFinishedSpans();
    assert.equal(parentOf(one(spans, "encoder handle")), one(spans, "encoder chunk").spanContext().spanId);
  });

  await t.test(
    "traced ports: a span per call, nested under the caller, failures marked, private fields intact",
    async () => {
      exporter.reset();
      const store = tracedPortIfOn(new Store(), "graph");
      await inSpan("caller", {}, async () => {
        await store.put("a", 1);
        assert.equal(await store.get("a"), 1);
        await assert.rejects(store.get("b"), /no b/);
        assert.equal(store.label(), "store of 1");
      });
      assert.equal(store.size, 1, "getters pass through");
      assert.equal(store.put, store.put, "one wrapper per method");
      const spans = exporter.getFinishedSpans();
      const caller = one(spans, "caller");
      const gets = byName(spans, "graph.get");
      assert.equal(gets.length, 2);
      for (const s of [...gets, one(spans, "graph.put")]) {
        assert.equal(parentOf(s), caller.spanContext().spanId);
        assert.equal(s.kind, SpanKind.CLIENT);
        assert.equal(s.attributes["memory.port"], "graph");
      }
      assert.deepEqual(
        gets.map((s) => s.status.code),
        [SpanStatusCode.UNSET, SpanStatusCode.ERROR],
      );
      assert.equal(tracedPort(new Store(), "vectors") instanceof Store, true);
    },
  );

  await t.test(
    "HTTP: a server span per request, child of the caller's traceparent, with route template, status and tenant",
    async () => {
      exporter.reset();
      const app = new Hono<{ Variables: { tenant: string } }>();
      app.use("*", httpTracing({ route: (c) => c.req.routePath }));
      app.use("/v1/*", async (c, next) => {
        c.set("tenant", "acme");
        await next();
      });
      app.get("/v1/records/:id", (c) => c.json({ id: c.req.param("id") }));
      const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
      const res = await app.request("/v1/records/r-secret-text", { headers: { traceparent: parent } });
      assert.equal(res.status, 200);
      const span = one(exporter.getFinishedSpans(), "GET /v1/records/:id");
      assert.equal(span.kind, SpanKind.SERVER);
      assert.equal(span.spanContext().traceId, "0af7651916cd43dd8448eb211c80319c");
      assert.equal(parentOf(span), "b7ad6b7169203331");
      assert.equal(span.attributes["http.route"], "/v1/records/:id");
      assert.equal(span.attributes["http.response.status_code"], 200);
      assert.equal(span.attributes["memory.tenant"], "acme");
    },
  );

  await t.test("gRPC: a server span per call, child of the traceparent metadata, status on failure", async () => {
    exporter.reset();
    const serve = callServing({ authenticate: () => "acme" });
    const md = new Metadata();
    md.set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    const call = { metadata: md, getPeer: () => "ipv4:127.0.0.1:5000" };
    await new Promise<void>((resolve) =>
      serve(
        "Query",
        call,
        () => resolve(),
        async () => "ok",
      ),
    );
    await new Promise<void>((resolve) =>
      serve(
        "Query",
        call,
        () => resolve(),
        async () => {
          throw new Error("boom");
        },
      ),
    );
    const spans = byName(exporter.getFinishedSpans(), "grpc Query");
    assert.equal(spans.length, 2);
    for (const s of spans) {
      assert.equal(s.spanContext().traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
      assert.equal(parentOf(s), "00f067aa0ba902b7");
      assert.equal(s.attributes["memory.tenant"], "acme");
    }
    assert.equal(spans[1]?.status.code, SpanStatusCode.ERROR);

    // The client side: a call made inside a span sends that span's context.
    const client = new MemoryGrpcClient({ address: "127.0.0.1:1", apiKey: "k-12345678" });
    await inSpan("gateway request", {}, async (span) => {
      const [sent] = client.metadata().get("traceparent");
      assert.equal(String(sent).split("-")[2], span.spanContext().spanId);
    });
    assert.deepEqual(client.metadata().get("traceparent"), [], "none outside a span");
    client.close();
    assert.equal(spans[1]?.attributes["rpc.grpc.status_code"], status.INTERNAL);
  });
});
