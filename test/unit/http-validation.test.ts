// The HTTP front door's input rules (services/core/input-rules.ts) and operational guards: ids,
// text, timestamps, cursors, exact routes, JSON content type, request ids, the failed-auth limit
// and the body limit. Over the fake service, whose calls show what reached the engine.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pino } from "pino";
import { CursorCodec } from "../../services/core/cursor.ts";
import { MAX_ID_LENGTH } from "../../services/core/input-rules.ts";
import type { RecordPage, RecordQuery } from "../../services/core/ports.ts";
import { createHttpApp, type HttpAppDeps } from "../../services/gateway/http-app.ts";
import { Metrics } from "../../services/platform/metrics.ts";
import { FakeMemoryService, sampleRecord } from "../helpers/fake-memory-service.ts";

const KEY = "key-for-tenant-a";
const TENANT = "tenant-a";

interface ErrorBody {
  error: string;
  issues?: { path: string; message: string }[];
  requestId?: string;
  expected?: string;
}

/** The fake service, with listings paged by a real signed cursor (as both graph stores page). */
class CursorService extends FakeMemoryService {
  readonly codec = new CursorCodec("a-test-secret-of-some-length");
  override async listRecords(tenant: string, query: RecordQuery): Promise<RecordPage> {
    if (query.cursor !== undefined) this.codec.decode(tenant, query.cursor);
    return super.listRecords(tenant, query);
  }
}

const setup = (opts: Partial<Pick<HttpAppDeps, "maxBodyBytes" | "authFailuresPerMinute" | "now">> = {}) => {
  const service = new CursorService();
  const logLines: string[] = [];
  const logger = pino({ level: "debug" }, { write: (line: string) => logLines.push(line) });
  const app = createHttpApp({
    service,
    apiKeys: { [KEY]: TENANT },
    metrics: new Metrics({ defaultMetrics: false }),
    logger,
    ...opts,
  });
  const call = async (
    path: string,
    init: RequestInit & { key?: string | null; json?: unknown; address?: string } = {},
  ): Promise<Response> => {
    const { key = KEY, json, address = "203.0.113.7", ...rest } = init;
    const headers = new Headers(rest.headers);
    if (key !== null) headers.set("authorization", `Bearer ${key}`);
    if (json !== undefined && !headers.has("content-type")) headers.set("content-type", "application/json");
    // @hono/node-server hands the IncomingMessage to the app as env.incoming: the peer address.
    const env = { incoming: { socket: { remoteAddress: address } } };
    return app.request(path, { ...rest, headers, ...(json !== undefined ? { body: JSON.stringify(json) } : {}) }, env);
  };
  return { service, call, logLines };
};

const turn = (extra: Record<string, unknown> = {}) => ({
  turnId: "t1",
  speaker: "Caroline",
  text: "I moved to Lisbon.",
  timestamp: "2023-05-08T10:00:00Z",
  ...extra,
});

const issuePaths = async (res: Response): Promise<string[]> =>
  ((await res.json()) as ErrorBody).issues?.map((i) => i.path) ?? [];

describe("http validation: timestamps and time filters", () => {
  it("rejects non-ISO and out-of-range timestamps naming the field, and accepts offsets", async () => {
    const { call, service } = setup();
    const bad = [
      "1",
      "May 8",
      "2023-05-08",
      "2023-05-08T10:00:00",
      "2023-02-30T10:00:00Z",
      "2023-05-08T24:00:00Z",
      "0001-01-01T00:00:00Z",
      "1899-12-31T23:59:59Z",
      "2201-01-01T00:00:00Z",
      "9999-12-31T00:00:00Z",
      "+275760-09-13T00:00:00Z",
      "-000001-01-01T00:00:00Z",
      "2023-05-08T10:00:00+0200",
    ];
    for (const timestamp of bad) {
      const res = await call("/v1/conversations/c/turns", { method: "POST", json: turn({ timestamp }) });
      assert.equal(res.status, 400, timestamp);
      assert.deepEqual(await issuePaths(res), ["timestamp"], timestamp);
    }
    assert.equal(service.calls.length, 0);
    for (const timestamp of ["2023-05-08T10:00Z", "2023-05-08T12:00:00.123+02:00", "1900-01-01T00:00:00Z"]) {
      const res = await call("/v1/conversations/c/turns", { method: "POST", json: turn({ timestamp }) });
      assert.equal(res.status, 202, timestamp);
    }
  });

  it("validates asOf on /v1/query as gRPC does", async () => {
    const { call, service } = setup();
    for (const asOf of ["garbage", "1", "May 8", "9999-01-01T00:00:00Z"]) {
      const res = await call("/v1/query", { method: "POST", json: { question: "where?", asOf } });
      assert.equal(res.status, 400, asOf);
      assert.deepEqual(await issuePaths(res), ["asOf"]);
    }
    assert.equal(service.calls.length, 0);
    const ok = await call("/v1/query", { method: "POST", json: { question: "where?", asOf: "2023-06-01" } });
    assert.equal(ok.status, 200);
  });

  it("rejects listing from/to that are not ISO dates", async () => {
    const { call } = setup();
    for (const [param, value] of [
      ["from", "1"],
      ["to", "May 8"],
      ["from", "0001-01-01"],
    ] as const) {
      const res = await call(`/v1/records?${param}=${encodeURIComponent(value)}`);
      assert.equal(res.status, 400, `${param}=${value}`);
      assert.deepEqual(await issuePaths(res), [param]);
    }
  });
});

describe("http validation: ids, speakers and text", () => {
  it("rejects control characters in ids, speakers and metadata keys", async () => {
    const { call, service } = setup();
    const cases: [Record<string, unknown>, string][] = [
      [{ turnId: "t\u00001" }, "turnId"],
      [{ speaker: "Caro\u001bline" }, "speaker"],
      [{ sessionId: "s\u00071" }, "sessionId"],
      [{ metadata: { "la\u0000ng": "en" } }, "metadata.la\u0000ng"],
    ];
    for (const [extra, path] of cases) {
      const res = await call("/v1/conversations/c/turns", { method: "POST", json: turn(extra) });
      assert.equal(res.status, 400, path);
      const body = (await res.json()) as ErrorBody;
      assert.equal(body.issues?.[0]?.path, path);
      assert.match(body.issues?.[0]?.message ?? "", /control characters/);
    }
    const nulInPath = await call("/v1/conversations/c%00x/turns", { method: "POST", json: turn() });
    assert.equal(nulInPath.status, 400);
    assert.deepEqual(await issuePaths(nulInPath), ["conversation"]);
    assert.equal(service.calls.length, 0);
  });

  it("strips control characters from text (keeping tab and newlines) and rejects whitespace-only text", async () => {
    const { call, service } = setup();
    const res = await call("/v1/conversations/c/turns", {
      method: "POST",
      json: turn({ text: "line one\u0000\u001b[31m\n\tline two\r\n\u007f" }),
    });
    assert.equal(res.status, 202);
    assert.equal(service.callsOf("ingest")[0]?.turns[0]?.text, "line one[31m\n\tline two\r\n");
    for (const text of ["   ", "\n\t ", "\u0000\u0001"]) {
      const blank = await call("/v1/conversations/c/turns", { method: "POST", json: turn({ text }) });
      assert.equal(blank.status, 400, JSON.stringify(text));
      assert.deepEqual(await issuePaths(blank), ["text"]);
    }
  });

  it(`caps every id at ${MAX_ID_LENGTH} characters: path, body, query and listing filters`, async () => {
    const { call, service } = setup();
    const long = "x".repeat(MAX_ID_LENGTH + 1);
    const max = "x".repeat(MAX_ID_LENGTH);
    const single = await call(`/v1/conversations/${long}/turns`, { method: "POST", json: turn() });
    assert.deepEqual([single.status, await issuePaths(single)], [400, ["conversation"]]);
    for (const field of ["turnId", "speaker", "sessionId"]) {
      const res = await call("/v1/conversations/c/turns", { method: "POST", json: turn({ [field]: long }) });
      assert.deepEqual([res.status, await issuePaths(res)], [400, [field]], field);
    }
    const query = await call("/v1/query", { method: "POST", json: { question: "q?", conversation: long } });
    assert.deepEqual([query.status, await issuePaths(query)], [400, ["conversation"]]);
    for (const param of ["conversation", "entity"]) {
      const res = await call(`/v1/records?${param}=${long}`);
      assert.deepEqual([res.status, await issuePaths(res)], [400, [param]], param);
    }
    const record = await call(`/v1/records/${long}`);
    assert.deepEqual([record.status, await issuePaths(record)], [400, ["id"]]);
    assert.equal(service.calls.length, 0);
    const atMax = await call(`/v1/conversations/${max}/turns`, { method: "POST", json: turn({ turnId: max }) });
    assert.equal(atMax.status, 202);
  });
});

describe("http validation: cursors", () => {
  it("answers 400 naming cursor for a cursor the service did not issue, or issued to another tenant", async () => {
    const { call, service } = setup();
    service.addRecords(TENANT, sampleRecord());
    const issued = service.codec.encode(TENANT, { saidAt: 1, id: "rec-0" });
    assert.equal((await call(`/v1/records?cursor=${issued}`)).status, 200);
    const tampered = `${Buffer.from(JSON.stringify([2, "rec-0"])).toString("base64url")}.${issued.split(".")[1]}`;
    for (const cursor of ["anything", "e30", tampered, service.codec.encode("tenant-b", { saidAt: 1, id: "x" })]) {
      const res = await call(`/v1/records?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(res.status, 400, cursor);
      assert.deepEqual(await issuePaths(res), ["cursor"]);
    }
  });
});

describe("http validation: routes and content type", () => {
  it("matches only /turns and /turns:batch; anything else under a conversation is 404", async () => {
    const { call, service } = setup();
    for (const suffix of ["turnsX", "turns:foo", "turns:batchX", "turns:", "turnsbatch"]) {
      const res = await call(`/v1/conversations/c/${suffix}`, { method: "POST", json: { turns: [turn()] } });
      assert.equal(res.status, 404, suffix);
    }
    assert.equal(service.calls.length, 0);
    const batch = await call("/v1/conversations/c/turns:batch", { method: "POST", json: { turns: [turn()] } });
    assert.equal(batch.status, 202);
    const single = await call("/v1/conversations/c/turns", { method: "POST", json: turn() });
    assert.equal(single.status, 202);
  });

  it("answers 415 naming application/json when a POST body is not declared JSON", async () => {
    const { call, service } = setup();
    for (const [path, body] of [
      ["/v1/conversations/c/turns", turn()],
      ["/v1/conversations/c/turns:batch", { turns: [turn()] }],
      ["/v1/query", { question: "q?" }],
    ] as const) {
      for (const contentType of [undefined, "text/plain", "application/x-www-form-urlencoded"]) {
        const headers: Record<string, string> = contentType ? { "content-type": contentType } : {};
        const res = await call(path, { method: "POST", headers, body: JSON.stringify(body) });
        assert.equal(res.status, 415, `${path} ${contentType}`);
        const err = (await res.json()) as ErrorBody;
        assert.equal(err.expected, "application/json");
        assert.match(err.error, /application\/json/);
      }
    }
    assert.equal(service.calls.length, 0);
    const charset = await call("/v1/query", {
      method: "POST",
      headers: { "content-type": "application/json; charset=utf-8" },
      json: { question: "q?" },
    });
    assert.equal(charset.status, 200);
    // Bodiless POSTs need no content type.
    assert.equal((await call("/v1/flush", { method: "POST" })).status, 202);
  });
});

describe("http operations: request ids, 5xx logging, failed-auth limit, body limit", () => {
  it("returns a request id on every response, keeping a sane incoming one", async () => {
    const { call } = setup();
    const fresh = await call("/healthz");
    assert.match(fresh.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
    const kept = await call("/v1/records", { headers: { "x-request-id": "client-req.42" } });
    assert.equal(kept.headers.get("x-request-id"), "client-req.42");
    const replaced = await call("/v1/records", { headers: { "x-request-id": "bad id\twith spaces" } });
    assert.notEqual(replaced.headers.get("x-request-id"), "bad id\twith spaces");
    assert.match(replaced.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
  });

  it("logs one structured line per 5xx carrying the request id the client got", async () => {
    const { call, service, logLines } = setup();
    service.failWith = new Error("disk on fire");
    const res = await call("/v1/records", { headers: { "x-request-id": "trace-1" } });
    assert.equal(res.status, 500);
    assert.deepEqual(await res.json(), { error: "internal error", requestId: "trace-1" });
    const lines = logLines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.requestId === "trace-1");
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.status, 500);
    assert.equal(lines[0]?.route, "/v1/records");
    assert.match(JSON.stringify(lines[0]?.err), /disk on fire/);
  });

  it("answers 429 with Retry-After after too many failed authentications from one address", async () => {
    let now = 1_000_000;
    const { call } = setup({ authFailuresPerMinute: 3, now: () => now });
    for (let i = 0; i < 3; i++) assert.equal((await call("/v1/records", { key: "wrong-key" })).status, 401);
    const limited = await call("/v1/records", { key: "wrong-key" });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get("retry-after"), "60");
    // Even the right key waits: the address is refused before its key is looked at.
    assert.equal((await call("/v1/records")).status, 429);
    // Other addresses are not affected.
    assert.equal((await call("/v1/records", { address: "198.51.100.1" })).status, 200);
    now += 30_000;
    assert.equal((await call("/v1/records", { key: null })).headers.get("retry-after"), "30");
    now += 30_000;
    assert.equal((await call("/v1/records")).status, 200);
  });

  it("takes the body limit from its options", async () => {
    const { call } = setup({ maxBodyBytes: 2048 });
    const res = await call("/v1/conversations/c/turns", { method: "POST", json: turn({ text: "x".repeat(4096) }) });
    assert.equal(res.status, 413);
    assert.deepEqual(await res.json(), { error: "request body too large", limitBytes: 2048 });
  });
});
