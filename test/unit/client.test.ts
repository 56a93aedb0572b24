// The TypeScript client (clients/typescript) against a small scripted HTTP server on 127.0.0.1:0:
// retries on 429 with Retry-After (seconds and HTTP date) and on 503, network errors only for calls
// safe to repeat, the ingest helper splitting at the batch limit and reporting rejections by the
// caller's index, iteration over paginated listings, typed errors. Sleep and randomness are
// injected: nothing waits for real, and the waits asked for are asserted.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, it } from "node:test";
import {
  IngestBatchError,
  MAX_BATCH_TURNS,
  MemoryApiError,
  MemoryClient,
  type MemoryClientOptions,
  MemoryNetworkError,
  type MemoryRecord,
  planBatches,
  type TurnInput,
} from "../../clients/typescript/src/index.ts";

interface Seen {
  method: string;
  url: URL;
  headers: IncomingMessage["headers"];
  body: unknown;
}
interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
  /** Drop the connection without an answer (a network error for the client). */
  destroy?: boolean;
}
type Handler = (req: Seen, n: number) => Reply;

const KEY = "unit-test-key-123";
const NOW = Date.parse("2026-01-01T00:00:00Z");

describe("TypeScript client against a scripted server", () => {
  let server: Server;
  let baseUrl: string;
  let handler: Handler;
  let seen: Seen[];
  let sleeps: number[];

  before(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        const request: Seen = {
          method: req.method ?? "",
          url: new URL(req.url ?? "/", "http://127.0.0.1"),
          headers: req.headers,
          body: text ? JSON.parse(text) : undefined,
        };
        seen.push(request);
        const reply = handler(request, seen.length);
        if (reply.destroy) {
          req.socket.destroy();
          return;
        }
        const body = reply.body === undefined ? "" : JSON.stringify(reply.body);
        res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
        res.end(body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(() => {
    seen = [];
    sleeps = [];
    handler = () => ({ status: 500, body: { error: "no handler" } });
  });

  const client = (options: Partial<MemoryClientOptions> = {}) =>
    new MemoryClient({
      baseUrl,
      apiKey: KEY,
      ...options,
      retry: {
        sleep: async (ms) => {
          sleeps.push(ms);
        },
        random: () => 0.5,
        now: () => NOW,
        ...options.retry,
      },
    });

  const queryResult = {
    context: "Ben's dog is Pepper.",
    contextTokens: 6,
    budget: 500,
    items: [],
    plan: { questionType: "single-hop", entities: [], topics: [], routes: [], rewrites: [] },
    cost: { embeddingCalls: 1, llmCalls: 0, inputTokens: 0, outputTokens: 0, ms: 1, routeMs: {} },
  };

  describe("retries", () => {
    it("waits what Retry-After (seconds) asks on 429, then resends the same request", async () => {
      handler = (_req, n) =>
        n === 1
          ? { status: 429, headers: { "retry-after": "2" }, body: { error: "too many", retryAfterSeconds: 2 } }
          : { status: 200, body: queryResult };
      const result = await client().query({ question: "What is the name of Ben's dog?", budget: 500 });
      assert.equal(result.context, "Ben's dog is Pepper.");
      assert.equal(seen.length, 2);
      // 2 s asked + a jitter of up to one backoff unit (random 0.5 x 250 ms).
      assert.deepEqual(sleeps, [2125]);
      for (const req of seen) {
        assert.equal(req.method, "POST");
        assert.equal(req.url.pathname, "/v1/query");
        assert.equal(req.headers.authorization, `Bearer ${KEY}`);
        assert.deepEqual(req.body, { question: "What is the name of Ben's dog?", budget: 500 });
      }
    });

    it("reads an HTTP-date Retry-After against the injected clock", async () => {
      const at = new Date(NOW + 3000).toUTCString();
      handler = (_req, n) => (n === 1 ? { status: 503, headers: { "retry-after": at } } : { status: 200, body: {} });
      await client().consolidate();
      assert.deepEqual(sleeps, [3125]);
    });

    it("backs off exponentially with jitter on 503 without Retry-After, and succeeds", async () => {
      handler = (_req, n) => (n <= 3 ? { status: 503, body: { error: "not ready" } } : { status: 200, body: {} });
      await client().flush("c1");
      assert.equal(seen.length, 4);
      assert.equal(seen[0]?.url.pathname, "/v1/conversations/c1/flush");
      // random 0.5 x min(8000, 250 x 2^(n-1)).
      assert.deepEqual(sleeps, [125, 250, 500]);
    });

    it("gives up after maxAttempts with a MemoryApiError that says how often it tried", async () => {
      handler = () => ({ status: 503, headers: { "x-request-id": "req-1" }, body: { error: "not ready" } });
      const err = await client({ retry: { maxAttempts: 3 } })
        .getRecord("r1")
        .catch((e: unknown) => e);
      assert.ok(err instanceof MemoryApiError);
      assert.equal(err.status, 503);
      assert.equal(err.code, "unavailable");
      assert.equal(err.attempts, 3);
      assert.equal(err.requestId, "req-1");
      assert.equal(err.method, "GET");
      assert.match(err.message, /GET \/v1\/records\/r1 answered 503 not ready/);
      assert.equal(seen.length, 3);
      assert.equal(sleeps.length, 2);
    });

    it("does not wait for a Retry-After over maxRetryAfterMs: the error carries it", async () => {
      handler = () => ({ status: 429, headers: { "retry-after": "120" }, body: { error: "too many" } });
      const err = await client()
        .listRecords()
        .catch((e: unknown) => e);
      assert.ok(err instanceof MemoryApiError);
      assert.equal(err.code, "rate_limited");
      assert.equal(err.retryAfterMs, 120_000);
      assert.equal(seen.length, 1);
      assert.deepEqual(sleeps, []);
    });

    it("resends a read after a dropped connection, but not a turn without a turnId", async () => {
      handler = (req, n) => (n === 1 ? { status: 0, destroy: true } : { status: 200, body: { id: req.url.pathname } });
      const record = await client().getRecord("r 1/2");
      assert.equal(seen.length, 2);
      // The id is one path segment, encoded.
      assert.equal((record as unknown as { id: string }).id, "/v1/records/r%201%2F2");
      assert.deepEqual(sleeps, [125]);

      seen = [];
      handler = () => ({ status: 0, destroy: true });
      const turn = { speaker: "Ana", text: "hello", timestamp: "2024-01-01T00:00:00Z" };
      const err = await client()
        .ingestTurn("c1", turn)
        .catch((e: unknown) => e);
      assert.ok(err instanceof MemoryNetworkError, String(err));
      assert.equal(err.attempts, 1);
      assert.equal(seen.length, 1);

      // With a turnId the server deduplicates a resend: it is retried.
      seen = [];
      handler = (_req, n) =>
        n === 1 ? { status: 0, destroy: true } : { status: 202, body: { accepted: 1, turnIds: ["t1"] } };
      assert.deepEqual(await client().ingestTurn("c1", { ...turn, turnId: "t1" }), { accepted: 1, turnIds: ["t1"] });
      assert.equal(seen.length, 2);
    });

    it("answers readyz's 503 as a readiness report, without retrying it", async () => {
      handler = () => ({ status: 503, body: { ready: false, ok: true, details: { inbox: "replaying" } } });
      assert.deepEqual(await client().readyz(), { ready: false, ok: true, details: { inbox: "replaying" } });
      assert.equal(seen.length, 1);
      assert.equal(seen[0]?.url.pathname, "/readyz");
    });
  });

  describe("ingest batching", () => {
    const turns: TurnInput[] = Array.from({ length: 8 }, (_, i) => ({
      turnId: `t${i}`,
      speaker: i % 2 ? "Ben" : "Ana",
      text: [2, 6, 7].includes(i) ? "bad" : `turn ${i}`,
      timestamp: `2024-01-01T00:0${i}:00Z`,
    }));
    // Rejects turns whose text is "bad"; 400 "no valid turns" when none is left, as the gateway does.
    const batchServer: Handler = (req) => {
      const sent = (req.body as { turns: TurnInput[] }).turns;
      const rejected = sent.flatMap((t, index) =>
        t.text === "bad" ? [{ index, turnId: t.turnId, issues: [{ path: "text", message: "must not be bad" }] }] : [],
      );
      const turnIds = sent.filter((t) => t.text !== "bad").map((t) => t.turnId);
      if (turnIds.length === 0)
        return { status: 400, body: { error: "no valid turns", accepted: 0, turnIds, rejected } };
      return { status: rejected.length ? 207 : 202, body: { accepted: turnIds.length, turnIds, rejected } };
    };

    it("splits at the batch limit and reports each rejection with its index in the caller's array", async () => {
      handler = batchServer;
      const report = await client({ maxBatchTurns: 3 }).ingest("conv/1", turns);
      assert.equal(seen.length, 3);
      assert.deepEqual(
        seen.map((r) => (r.body as { turns: TurnInput[] }).turns.map((t) => t.turnId)),
        [
          ["t0", "t1", "t2"],
          ["t3", "t4", "t5"],
          ["t6", "t7"],
        ],
      );
      assert.equal(seen[0]?.url.pathname, "/v1/conversations/conv%2F1/turns:batch");
      assert.equal(report.requests, 3);
      assert.equal(report.accepted, 5);
      assert.deepEqual(report.turnIds, ["t0", "t1", "t3", "t4", "t5"]);
      // The third batch had no valid turn (400 "no valid turns"): its turns are rejections too.
      assert.deepEqual(
        report.rejected.map((r) => [r.index, r.turnId, r.issues[0]?.path]),
        [
          [2, "t2", "text"],
          [6, "t6", "text"],
          [7, "t7", "text"],
        ],
      );
    });

    it("defaults to the document's batch limit, and splits by body bytes too", async () => {
      assert.equal(MAX_BATCH_TURNS, 1000);
      handler = batchServer;
      const many = Array.from({ length: 2500 }, (_, i) => ({
        speaker: "A",
        text: `t${i}`,
        timestamp: "2024-01-01T00:00:00Z",
      }));
      assert.equal((await client().ingest("c", many)).accepted, 2500);
      assert.deepEqual(
        seen.map((r) => (r.body as { turns: unknown[] }).turns.length),
        [1000, 1000, 500],
      );

      seen = [];
      const big = "x".repeat(400);
      const sized = [{ speaker: "A", text: big, timestamp: "2024-01-01T00:00:00Z" }, ...turns.slice(0, 2)];
      // ~460 bytes a big turn, ~80 a small one; a 600-byte body takes one big turn and one small one.
      const report = await client({ maxBodyBytes: 600 }).ingest("c", [
        ...sized,
        { ...sized[0]!, text: "y".repeat(700) },
      ]);
      assert.deepEqual(
        seen.map((r) => (r.body as { turns: unknown[] }).turns.length),
        [2, 1],
      );
      assert.ok(seen.every((r) => Buffer.byteLength(JSON.stringify(r.body)) <= 600));
      // The 700-character turn alone is over the limit: rejected here (413), never sent.
      assert.deepEqual(
        report.rejected.map((r) => [r.index, r.status]),
        [[3, 413]],
      );
      assert.equal(report.accepted, 3);
    });

    it("stops at a request that fails as a whole, with what was ingested and what was not", async () => {
      handler = (req, n) => (n === 2 ? { status: 401, body: { error: "invalid API key" } } : batchServer(req, n));
      const err = await client({ maxBatchTurns: 3 })
        .ingest("c", turns)
        .catch((e: unknown) => e);
      assert.ok(err instanceof IngestBatchError);
      assert.ok(err instanceof MemoryApiError);
      assert.equal(err.code, "unauthorized");
      assert.equal(err.report.accepted, 2);
      assert.deepEqual(err.report.turnIds, ["t0", "t1"]);
      assert.deepEqual(
        err.report.rejected.map((r) => r.index),
        [2],
      );
      assert.deepEqual(err.unsent, [3, 4, 5, 6, 7]);
      assert.equal(seen.length, 2);
    });

    it("plans batches purely: order kept, limits met", () => {
      const plan = planBatches(["a", "bb", "c".repeat(50), "d"], { maxTurns: 2, maxBytes: 40 });
      assert.deepEqual(
        plan.batches.map((b) => b.indices),
        [[0, 1], [3]],
      );
      assert.deepEqual(plan.tooLarge, [2]);
      assert.throws(() => planBatches([], { maxTurns: 0, maxBytes: 100 }), /maxTurns/);
    });
  });

  describe("pagination", () => {
    const records = Array.from(
      { length: 7 },
      (_, i) => ({ id: `r${i}`, text: `record ${i}` }) as unknown as MemoryRecord,
    );
    // Three pages of three with opaque cursors, as GET /v1/records answers.
    const pages: Handler = (req) => {
      const limit = Number(req.url.searchParams.get("limit") ?? 50);
      const start = Number((req.url.searchParams.get("cursor") ?? "cursor-0").slice("cursor-".length));
      const next = start + limit < records.length ? `cursor-${start + limit}` : null;
      return { status: 200, body: { records: records.slice(start, start + limit), nextCursor: next } };
    };

    it("iterates every record over three pages, following the cursors", async () => {
      handler = pages;
      const got: string[] = [];
      for await (const r of client().records({ conversation: "c1", includeSuperseded: true }, { pageSize: 3 })) {
        got.push(r.id);
      }
      assert.deepEqual(got, ["r0", "r1", "r2", "r3", "r4", "r5", "r6"]);
      assert.equal(seen.length, 3);
      assert.deepEqual(
        seen.map((r) => r.url.searchParams.get("cursor")),
        [null, "cursor-3", "cursor-6"],
      );
      for (const r of seen) {
        assert.equal(r.url.pathname, "/v1/records");
        assert.equal(r.url.searchParams.get("conversation"), "c1");
        assert.equal(r.url.searchParams.get("limit"), "3");
        assert.equal(r.url.searchParams.get("includeSuperseded"), "true");
      }
    });

    it("stops on a server that repeats a cursor, and at maxPages", async () => {
      handler = () => ({ status: 200, body: { records: [], nextCursor: "same" } });
      await assert.rejects(async () => {
        for await (const _ of client().records()) void _;
      }, /same cursor twice/);
      handler = pages;
      await assert.rejects(async () => {
        for await (const _ of client().records({}, { pageSize: 1, maxPages: 4 })) void _;
      }, /more pages after 4 pages/);
      await assert.rejects(
        client().recordPages({}, { pageSize: 500 }).next(),
        /pageSize must be an integer from 1 to 200/,
      );
    });
  });

  describe("typed errors", () => {
    it("names the field, the status code and the server's message", async () => {
      handler = () => ({
        status: 400,
        headers: { "x-request-id": "abc" },
        body: { error: "invalid query parameters", issues: [{ path: "cursor", message: "not a cursor we issued" }] },
      });
      const err = await client()
        .listRecords({ cursor: "forged" })
        .catch((e: unknown) => e);
      assert.ok(err instanceof MemoryApiError);
      assert.equal(err.status, 400);
      assert.equal(err.code, "invalid_request");
      assert.equal(err.field, "cursor");
      assert.equal(err.serverMessage, "invalid query parameters");
      assert.deepEqual(err.issues, [{ path: "cursor", message: "not a cursor we issued" }]);
      assert.equal(err.requestId, "abc");
      assert.match(err.message, /GET \/v1\/records answered 400 invalid query parameters: cursor: not a cursor/);
      // 400 is not retried.
      assert.equal(seen.length, 1);
    });

    it("sends the erase confirmation and the API key, and maps 404 and 501", async () => {
      handler = (req) =>
        req.url.pathname === "/v1/tenant"
          ? { status: 501, body: { error: "erasure is not supported by this runtime" } }
          : { status: 404, body: { error: "record not found" } };
      const erase = await client()
        .eraseTenant("tenant-a")
        .catch((e: unknown) => e);
      assert.ok(erase instanceof MemoryApiError);
      assert.equal(erase.code, "not_supported");
      assert.equal(seen[0]?.method, "DELETE");
      assert.equal(seen[0]?.url.searchParams.get("confirm"), "tenant-a");
      const missing = await client()
        .getRecordHistory("nope")
        .catch((e: unknown) => e);
      assert.ok(missing instanceof MemoryApiError);
      assert.equal(missing.code, "not_found");
      assert.equal(missing.field, undefined);
      assert.ok(seen.every((r) => r.headers.authorization === `Bearer ${KEY}`));
    });

    it("refuses bad options up front", () => {
      assert.throws(
        () => client({ maxBatchTurns: MAX_BATCH_TURNS + 1 }),
        /maxBatchTurns must be an integer from 1 to 1000/,
      );
      assert.throws(() => client({ retry: { maxAttempts: 0 } }), /maxAttempts/);
    });
  });
});
