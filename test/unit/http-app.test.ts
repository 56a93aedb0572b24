import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pino } from "pino";
import { ValidationError } from "../../services/core/errors.ts";
import { createHttpApp } from "../../services/gateway/http-app.ts";
import { startHttpServer } from "../../services/platform/http-server.ts";
import { Metrics } from "../../services/platform/metrics.ts";
import { FakeMemoryService, sampleRecord } from "../helpers/fake-memory-service.ts";

const KEY_A = "key-for-tenant-a";
const KEY_B = "key-for-tenant-b";
const API_KEYS = { [KEY_A]: "tenant-a", [KEY_B]: "tenant-b" };

interface Issue {
  path: string;
  message: string;
}
interface ErrorBody {
  error: string;
  issues?: Issue[];
}

const setup = (opts: { maxBodyBytes?: number; serveMetrics?: boolean } = {}) => {
  const service = new FakeMemoryService();
  const metrics = new Metrics({ defaultMetrics: false });
  const logLines: string[] = [];
  const logger = pino({ level: "debug" }, { write: (line: string) => logLines.push(line) });
  const app = createHttpApp({ service, apiKeys: API_KEYS, metrics, logger, ...opts });
  const call = (path: string, init: RequestInit & { key?: string | null; json?: unknown } = {}) => {
    const { key = KEY_A, json, ...rest } = init;
    const headers = new Headers(rest.headers);
    if (key !== null) headers.set("authorization", `Bearer ${key}`);
    if (json !== undefined) headers.set("content-type", "application/json");
    return app.request(path, { ...rest, headers, ...(json !== undefined ? { body: JSON.stringify(json) } : {}) });
  };
  return { service, metrics, app, call, logLines };
};

const turn = (n: number, extra: Record<string, unknown> = {}) => ({
  turnId: `t${n}`,
  speaker: "Caroline",
  text: `message number ${n}`,
  timestamp: `2023-05-08T10:0${n % 10}:00Z`,
  ...extra,
});

const paths = (body: ErrorBody): string[] => (body.issues ?? []).map((i) => i.path);

describe("http app: auth", () => {
  it("rejects /v1 requests without a key", async () => {
    const { call, service } = setup();
    const res = await call("/v1/records", { key: null });
    assert.equal(res.status, 401);
    assert.deepEqual(await res.json(), { error: "missing API key" });
    assert.equal(service.calls.length, 0);
  });

  it("rejects unknown keys, including prototype property names", async () => {
    const { call, app } = setup();
    for (const key of ["wrong-key", "constructor", "__proto__", "toString"]) {
      const res = await call("/v1/records", { key });
      assert.equal(res.status, 401, key);
      assert.deepEqual(await res.json(), { error: "invalid API key" });
    }
    const viaHeader = await app.request("/v1/records", { headers: { "x-api-key": "nope" } });
    assert.equal(viaHeader.status, 401);
    assert.deepEqual(await viaHeader.json(), { error: "invalid API key" });
  });

  it("takes the tenant from the key, ignoring a tenant field in the body", async () => {
    const { call, app, service } = setup();
    const res = await call("/v1/conversations/conv-1/turns", { method: "POST", json: turn(1, { tenant: "tenant-b" }) });
    assert.equal(res.status, 202);
    assert.deepEqual(await res.json(), { accepted: 1, turnIds: ["t1"] });

    const viaHeader = await app.request("/v1/conversations/conv-2/turns", {
      method: "POST",
      headers: { "x-api-key": KEY_B, "content-type": "application/json" },
      body: JSON.stringify(turn(2, { tenant: "tenant-a" })),
    });
    assert.equal(viaHeader.status, 202);

    const ingests = service.callsOf("ingest");
    assert.deepEqual(
      ingests.map((c) => [c.tenant, c.conversation]),
      [
        ["tenant-a", "conv-1"],
        ["tenant-b", "conv-2"],
      ],
    );
    assert.equal("tenant" in (ingests[0]?.turns[0] ?? {}), false, "tenant field stripped from the turn");
  });

  it("leaves probes and metrics open", async () => {
    const { app } = setup();
    assert.equal((await app.request("/healthz")).status, 200);
    assert.equal((await app.request("/readyz")).status, 200);
    assert.equal((await app.request("/metrics")).status, 200);
  });

  it("leaves /metrics to a separate port when told to (the gateway with MEMORY_METRICS_PORT)", async () => {
    const { app } = setup({ serveMetrics: false });
    assert.equal((await app.request("/metrics")).status, 404);
    assert.equal((await app.request("/healthz")).status, 200);
  });
});

describe("http app: single turn", () => {
  it("names the missing field", async () => {
    const { call, service } = setup();
    const { speaker: _omit, ...noSpeaker } = turn(1);
    const res = await call("/v1/conversations/c/turns", { method: "POST", json: noSpeaker });
    assert.equal(res.status, 400);
    const body = (await res.json()) as ErrorBody;
    assert.equal(body.error, "invalid turn");
    assert.deepEqual(paths(body), ["speaker"]);
    assert.equal(service.calls.length, 0);
  });

  it("names a bad timestamp and every other bad field", async () => {
    const { call } = setup();
    const res = await call("/v1/conversations/c/turns", {
      method: "POST",
      json: turn(1, { timestamp: "yesterday-ish", role: "robot", metadata: { lang: 3 } }),
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as ErrorBody;
    assert.deepEqual(paths(body).sort(), ["metadata.lang", "role", "timestamp"]);
    const ts = body.issues?.find((i) => i.path === "timestamp");
    assert.match(ts?.message ?? "", /ISO-8601/);
  });

  it("rejects invalid JSON", async () => {
    const { call } = setup();
    for (const body of ["{not json", ""]) {
      const res = await call("/v1/conversations/c/turns", {
        method: "POST",
        body,
        headers: { "content-type": "application/json" },
      });
      assert.equal(res.status, 400);
      assert.deepEqual(await res.json(), { error: "invalid JSON body" });
    }
  });

  it("uses the service's ids when the client sends none", async () => {
    const { call } = setup();
    const { turnId: _omit, ...noId } = turn(1);
    const res = await call("/v1/conversations/c/turns", { method: "POST", json: noId });
    assert.equal(res.status, 202);
    assert.deepEqual(await res.json(), { accepted: 1, turnIds: ["gen-1"] });
  });

  it("answers 413 for a body over the limit", async () => {
    const { call, service } = setup({ maxBodyBytes: 1024 });
    const res = await call("/v1/conversations/c/turns", { method: "POST", json: turn(1, { text: "x".repeat(5000) }) });
    assert.equal(res.status, 413);
    assert.equal(((await res.json()) as ErrorBody).error, "request body too large");
    assert.equal(service.calls.length, 0);
  });
});

describe("http app: batch", () => {
  it("ingests the valid turns in order and reports the bad one (207)", async () => {
    const { call, service } = setup();
    const bad = turn(2, { speaker: "" });
    const res = await call("/v1/conversations/conv-1/turns:batch", {
      method: "POST",
      json: { tenant: "tenant-b", turns: [turn(1), bad, turn(3), turn(4)] },
    });
    assert.equal(res.status, 207);
    const body = (await res.json()) as {
      accepted: number;
      turnIds: string[];
      rejected: { index: number; turnId?: string; issues: Issue[] }[];
    };
    assert.equal(body.accepted, 3);
    assert.deepEqual(body.turnIds, ["t1", "t3", "t4"]);
    assert.equal(body.rejected.length, 1);
    assert.equal(body.rejected[0]?.index, 1);
    assert.equal(body.rejected[0]?.turnId, "t2");
    assert.deepEqual(
      body.rejected[0]?.issues.map((i) => i.path),
      ["speaker"],
    );

    const ingests = service.callsOf("ingest");
    assert.equal(ingests.length, 1);
    assert.equal(ingests[0]?.tenant, "tenant-a");
    assert.deepEqual(
      ingests[0]?.turns.map((t) => t.turnId),
      ["t1", "t3", "t4"],
    );
  });

  it("answers 202 when every turn is valid", async () => {
    const { call } = setup();
    const res = await call("/v1/conversations/conv-1/turns:batch", {
      method: "POST",
      json: { turns: [turn(1), turn(2)] },
    });
    assert.equal(res.status, 202);
    assert.deepEqual(await res.json(), { accepted: 2, turnIds: ["t1", "t2"], rejected: [] });
  });

  it("answers 400 and ingests nothing when no turn is valid", async () => {
    const { call, service } = setup();
    const res = await call("/v1/conversations/conv-1/turns:batch", {
      method: "POST",
      json: { turns: [turn(1, { timestamp: "nope" }), "not a turn"] },
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as {
      error: string;
      accepted: number;
      rejected: { index: number; issues: Issue[] }[];
    };
    assert.equal(body.error, "no valid turns");
    assert.equal(body.accepted, 0);
    assert.deepEqual(
      body.rejected.map((r) => [r.index, r.issues.map((i) => i.path)]),
      [
        [0, ["timestamp"]],
        [1, [""]],
      ],
    );
    assert.equal(service.calls.length, 0);
  });

  it("answers 400 for a malformed envelope", async () => {
    const { call, service } = setup();
    const tooMany = Array.from({ length: 1001 }, (_, i) => turn(i));
    for (const json of [{}, { turns: [] }, { turns: "x" }, [turn(1)], { turns: tooMany }]) {
      const res = await call("/v1/conversations/conv-1/turns:batch", { method: "POST", json });
      assert.equal(res.status, 400);
      const body = (await res.json()) as ErrorBody;
      assert.equal(body.error, "invalid batch");
      assert.ok((body.issues ?? []).length > 0);
    }
    assert.equal(service.calls.length, 0);
  });
});

describe("http app: flush, query, records", () => {
  it("flushes one conversation or all of the tenant's", async () => {
    const { call, service } = setup();
    assert.equal((await call("/v1/conversations/conv-1/flush", { method: "POST" })).status, 202);
    assert.equal((await call("/v1/flush", { method: "POST", key: KEY_B })).status, 202);
    assert.deepEqual(service.callsOf("flush"), [
      { method: "flush", tenant: "tenant-a", conversation: "conv-1" },
      { method: "flush", tenant: "tenant-b" },
    ]);
  });

  it("answers a query with context, items, routes, plan and cost", async () => {
    const { call, service, metrics } = setup();
    const res = await call("/v1/query", {
      method: "POST",
      json: { question: "Where does Caroline live?", conversation: "conv-1", budget: 500, tenant: "tenant-b" },
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as {
      context: string;
      contextTokens: number;
      budget: number;
      items: { id: string; routes: { route: string }[] }[];
      plan: { routes: string[] };
      cost: { embeddingCalls: number };
    };
    assert.match(body.context, /Lisbon/);
    assert.equal(body.budget, 500);
    assert.equal(body.items[0]?.id, "rec-1");
    assert.deepEqual(
      body.items[0]?.routes.map((r) => r.route),
      ["dense", "entity"],
    );
    assert.ok(body.plan.routes.length > 0);
    assert.equal(body.cost.embeddingCalls, 1);
    assert.match(await metrics.render(), /memory_queries_total\{outcome="ok"\} 1/);
    assert.deepEqual(service.callsOf("query"), [
      {
        method: "query",
        tenant: "tenant-a",
        req: { question: "Where does Caroline live?", conversation: "conv-1", budget: 500 },
      },
    ]);
  });

  it("validates a query", async () => {
    const { call } = setup();
    const res = await call("/v1/query", { method: "POST", json: { question: " ", budget: 10 } });
    assert.equal(res.status, 400);
    const body = (await res.json()) as ErrorBody;
    assert.equal(body.error, "invalid query");
    assert.deepEqual(paths(body).sort(), ["budget", "question"]);
  });

  it("lists records with validated filters", async () => {
    const { call, service } = setup();
    service.addRecords("tenant-a", sampleRecord(), sampleRecord({ id: "rec-2", type: "event" }));
    service.addRecords("tenant-b", sampleRecord({ id: "rec-b" }));
    service.nextCursor = "page-2";
    const res = await call(
      "/v1/records?conversation=conv-1&entity=Caroline&type=fact&from=2023-01-01&to=2023-12-31T23:59:59Z&limit=10&cursor=page-1&includeSuperseded=true",
    );
    assert.equal(res.status, 200);
    const body = (await res.json()) as { records: { id: string }[]; nextCursor: string | null };
    assert.deepEqual(
      body.records.map((r) => r.id),
      ["rec-1"],
    );
    assert.equal(body.nextCursor, "page-2");
    assert.deepEqual(service.callsOf("listRecords")[0], {
      method: "listRecords",
      tenant: "tenant-a",
      query: {
        conversation: "conv-1",
        entity: "Caroline",
        type: "fact",
        timeFrom: Date.parse("2023-01-01"),
        timeTo: Date.parse("2023-12-31T23:59:59Z"),
        includeSuperseded: true,
        limit: 10,
        cursor: "page-1",
      },
    });
  });

  it("defaults the limit to 50 and answers nextCursor null on the last page", async () => {
    const { call, service } = setup();
    const res = await call("/v1/records?type=&tenant=tenant-b");
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { records: [], nextCursor: null });
    assert.deepEqual(service.callsOf("listRecords")[0]?.query, { limit: 50 });
    assert.equal(service.callsOf("listRecords")[0]?.tenant, "tenant-a");
  });

  it("rejects bad record filters naming the parameter", async () => {
    const { call, service } = setup();
    const cases: [string, string][] = [
      ["type=opinion", "type"],
      ["limit=0", "limit"],
      ["limit=201", "limit"],
      ["limit=ten", "limit"],
      ["from=not-a-date", "from"],
      ["from=2024-01-01&to=2023-01-01", "from"],
      ["includeSuperseded=maybe", "includeSuperseded"],
    ];
    for (const [qs, field] of cases) {
      const res = await call(`/v1/records?${qs}`);
      assert.equal(res.status, 400, qs);
      const body = (await res.json()) as ErrorBody;
      assert.equal(body.error, "invalid query parameters");
      assert.deepEqual(paths(body), [field], qs);
    }
    assert.equal(service.calls.length, 0);
  });

  it("gets a record by id, 404 when absent or another tenant's", async () => {
    const { call, service } = setup();
    service.addRecords("tenant-a", sampleRecord());
    const ok = await call("/v1/records/rec-1");
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), sampleRecord());
    for (const [key, id] of [
      [KEY_A, "missing"],
      [KEY_B, "rec-1"],
    ] as const) {
      const res = await call(`/v1/records/${id}`, { key });
      assert.equal(res.status, 404);
      assert.deepEqual(await res.json(), { error: "record not found" });
    }
  });
});

describe("http app: errors, probes, metrics", () => {
  it("answers 404 JSON for unknown routes", async () => {
    const { app, call } = setup();
    const res = await app.request("/nope");
    assert.equal(res.status, 404);
    assert.deepEqual(await res.json(), { error: "not found" });
    const v1 = await call("/v1/nope");
    assert.equal(v1.status, 404);
    assert.deepEqual(await v1.json(), { error: "not found" });
  });

  it("hides internal errors behind 500 and logs them", async () => {
    const { call, service, logLines, metrics } = setup();
    service.failWith = new Error("database exploded at /secret/path");
    const res = await call("/v1/query", { method: "POST", json: { question: "anything?" } });
    assert.equal(res.status, 500);
    const text = await res.text();
    const body = JSON.parse(text) as { error: string; requestId: string };
    assert.deepEqual(body, { error: "internal error", requestId: res.headers.get("x-request-id") });
    assert.match(body.requestId, /^[0-9a-f-]{36}$/);
    assert.doesNotMatch(text, /exploded|secret|at /);
    assert.ok(logLines.some((l) => l.includes("database exploded")));
    assert.match(await metrics.render(), /memory_queries_total\{outcome="error"\} 1/);
  });

  it("maps a service ValidationError to 400 with its issues", async () => {
    const { call, service } = setup();
    service.failWith = new ValidationError("invalid asOf", [
      { path: "asOf", message: "must be an ISO-8601 timestamp" },
    ]);
    const res = await call("/v1/query", { method: "POST", json: { question: "when?", asOf: "2023-05-08T00:00:00Z" } });
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), {
      error: "invalid asOf",
      issues: [{ path: "asOf", message: "must be an ISO-8601 timestamp" }],
    });
  });

  it("answers /readyz 503 when the service is not ready", async () => {
    const { app, service } = setup();
    service.ready = false;
    const res = await app.request("/readyz");
    assert.equal(res.status, 503);
    assert.equal(((await res.json()) as { ready: boolean }).ready, false);
  });

  it("counts requests by route pattern in /metrics", async () => {
    const { app, call, service } = setup();
    service.addRecords("tenant-a", sampleRecord());
    await call("/v1/records/rec-1");
    await call("/v1/records/other-id");
    await call("/v1/records", { key: "bad-key-123" });
    await app.request("/some/random/path");
    const res = await app.request("/metrics");
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/plain/);
    const text = await res.text();
    assert.match(text, /memory_http_requests_total\{route="\/v1\/records\/:id",method="GET",status="200"\} 1/);
    assert.match(text, /memory_http_requests_total\{route="\/v1\/records\/:id",method="GET",status="404"\} 1/);
    assert.match(text, /memory_http_requests_total\{route="\/v1\/records",method="GET",status="401"\} 1/);
    assert.match(text, /memory_http_requests_total\{route="unmatched",method="GET",status="404"\} 1/);
    assert.match(text, /memory_http_request_duration_seconds_count\{route="\/v1\/records\/:id",method="GET"\} 2/);
    assert.doesNotMatch(text, /rec-1|other-id|random/);
  });
});

describe("metrics", () => {
  it("exposes every memory_* family, default process metrics included", async () => {
    const metrics = new Metrics();
    metrics.stageEvent("sensory", "ok", 0.01);
    metrics.stageEvent("encoder", "dlq");
    metrics.segmentClosed("gate");
    metrics.recordsWritten(3);
    metrics.embedding(2, 7);
    metrics.query("ok", 0.2);
    metrics.llmCall("encoder", "tenant-a", { inputTokens: 100, outputTokens: 20 }, { construction: true });
    const text = await metrics.render();
    for (const line of [
      'memory_stage_events_total{stage="sensory",outcome="ok"} 1',
      'memory_stage_events_total{stage="encoder",outcome="dlq"} 1',
      'memory_stage_latency_seconds_count{stage="sensory"} 1',
      'memory_segments_closed_total{reason="gate"} 1',
      "memory_records_written_total 3",
      "memory_embedding_calls_total 2",
      "memory_embedded_texts_total 7",
      'memory_queries_total{outcome="ok"} 1',
      "memory_query_latency_seconds_count 1",
      'memory_llm_tokens_total{stage="encoder",tenant="tenant-a",direction="input"} 100',
      'memory_construction_tokens_total{stage="encoder",tenant="tenant-a",direction="output"} 20',
      'memory_llm_calls_total{stage="encoder",tenant="tenant-a"} 1',
    ]) {
      assert.ok(text.includes(line), line);
    }
    assert.match(text, /^memory_process_cpu_seconds_total /m);
    // Two instances do not collide (each has its own registry).
    assert.doesNotThrow(() => new Metrics());
  });
});

describe("http server", () => {
  it("serves the app on a free port", async () => {
    const { app, service } = setup();
    const server = await startHttpServer(app, { port: 0 });
    try {
      assert.ok(server.port > 0);
      assert.equal(server.url, `http://127.0.0.1:${server.port}`);
      const health = await fetch(`${server.url}/healthz`);
      assert.equal(health.status, 200);
      assert.deepEqual(await health.json(), { status: "ok" });

      const res = await fetch(`${server.url}/v1/conversations/conv%201/turns`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY_B}`, "content-type": "application/json" },
        body: JSON.stringify(turn(1)),
      });
      assert.equal(res.status, 202);
      assert.deepEqual(await res.json(), { accepted: 1, turnIds: ["t1"] });
      assert.deepEqual(
        service.callsOf("ingest").map((c) => [c.tenant, c.conversation]),
        [["tenant-b", "conv 1"]],
      );

      const big = await fetch(`${server.url}/v1/conversations/c/turns`, {
        method: "POST",
        headers: { "x-api-key": KEY_A, "content-type": "application/json" },
        body: JSON.stringify(turn(1, { text: "y".repeat(6 * 1024 * 1024) })),
      });
      assert.equal(big.status, 413);
      assert.equal(((await big.json()) as ErrorBody).error, "request body too large");
    } finally {
      await server.close();
    }
  });
});
