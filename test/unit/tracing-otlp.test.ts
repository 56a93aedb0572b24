// MEMORY_TRACING=otlp (docs/tracing.md): spans go over OTLP/HTTP to the endpoint of the standard
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variable, named with the process's service, and the stop
// flushes what is still batched. The collector is a local HTTP server on an ephemeral port.
// (Its own file: the exporter reads process.env, set here for this process only.)
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { inSpan } from "../../services/platform/trace-context.ts";
import { setupTracing } from "../../services/platform/tracing.ts";

test("otlp: the batched spans reach the collector on shutdown, with the service name", async () => {
  const received: { path: string; type: string; body: Buffer }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ path: req.url ?? "", type: req.headers["content-type"] ?? "", body: Buffer.concat(chunks) });
      res.writeHead(200, { "content-type": req.headers["content-type"] ?? "application/json" });
      res.end(req.headers["content-type"]?.includes("json") ? "{}" : "");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const { port } = server.address() as AddressInfo;
    process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = `http://127.0.0.1:${port}/v1/traces`;
    const tracing = await setupTracing("gateway", { env: { MEMORY_TRACING: "otlp" }, flushOnStop: false });
    assert.ok(tracing);
    assert.equal(tracing.service, "memory-gateway");
    await inSpan("otlp-probe-span", {}, async () => undefined);
    assert.equal(received.length, 0, "batched: nothing sent before the flush");
    await tracing.shutdown();
    assert.equal(received.length, 1);
    const [sent] = received;
    assert.equal(sent?.path, "/v1/traces");
    const body = sent?.body.toString("latin1") ?? "";
    assert.ok(body.includes("otlp-probe-span"), "the span is in the export");
    assert.ok(body.includes("memory-gateway"), "the resource names the service");
  } finally {
    delete process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
