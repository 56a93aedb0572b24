// HTTP fuzz (issue 11): generated requests against every route of schemas/openapi.yaml (+ probes,
// metrics, unknown paths, odd methods) on the real HTTP app over an embedded engine (hashing
// embedder, temp data folder) in a child process on 127.0.0.1. Seeded and bounded: every run sends
// the same ~680 requests, each with a 30 s bound. Whatever the input: no 5xx, an answer in time,
// error bodies of the documented shape; validation errors name the field; afterwards /healthz is
// 200 and an ingest + flush + query still returns the ingested text.
//
// The last describe ("validation contract of issue 11") asserts rules that other branches of the
// issue add (cursor authentication, asOf and timestamp validation, control characters, exact routes,
// JSON content type); it fails until they are merged.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { FUZZ_KEYS, type FuzzServer, KEY_A, startFuzzServer, TENANT_A } from "../helpers/fuzz-child.ts";
import {
  encodeAll,
  encodeMinimal,
  HUGE_STRINGS,
  hugeStringName,
  isoTimestamp,
  mutateFields,
  nastyString,
  words,
  wrongValue,
} from "../helpers/fuzz-inputs.ts";
import {
  bearer,
  type Failure,
  type HttpCase,
  headerSafe,
  healthy,
  jsonHeaders,
  REQUEST_TIMEOUT_MS,
  report,
  runCases,
  type Target,
} from "../helpers/http-fuzz-harness.ts";
import { type RawResponse, rawRequest } from "../helpers/raw-http.ts";

const SEED = 11_2026;
const KEY_B = Object.keys(FUZZ_KEYS)[1] as string;

// One source address per group of requests: a per-address limit (e.g. on failed authentication)
// hit by the fuzz sweep must not answer the later groups or the health checks.
const ADDR = { sweep: "127.0.0.2", oracle: "127.0.0.3", contract: "127.0.0.4", probe: "127.0.0.5", huge: "127.0.0.6" };

// ---------------------------------------------------------------------------------------------------
// Generators

const TURN_FIELDS = ["turnId", "speaker", "role", "text", "timestamp", "sessionId", "metadata", "tenant"] as const;
const QUERY_FIELDS = ["question", "conversation", "budget", "asOf", "tenant"] as const;
const LISTING_PARAMS = ["conversation", "entity", "type", "from", "to", "limit", "cursor", "includeSuperseded"];

const validTurn = (): fc.Arbitrary<Record<string, unknown>> =>
  fc.record(
    {
      turnId: fc.stringMatching(/^[a-z0-9-]{1,16}$/).map((s) => `f-${s}`),
      speaker: fc.constantFrom("Ana", "Ben"),
      role: fc.constantFrom("user", "assistant", "system", "other"),
      text: words(),
      timestamp: isoTimestamp(),
      sessionId: fc.constantFrom("s1", "s2"),
      metadata: fc.constant({ lang: "en" }),
    },
    { requiredKeys: ["speaker", "text", "timestamp"] },
  );

const validQuery = (): fc.Arbitrary<Record<string, unknown>> =>
  fc.record(
    {
      question: words(),
      conversation: fc.constantFrom("c1", "conv-2"),
      budget: fc.integer({ min: 50, max: 32_000 }),
      asOf: isoTimestamp(),
    },
    { requiredKeys: ["question"] },
  );

/** A path segment: a plain id, a nasty one or a very long one, percent-encoded fully or minimally. */
const pathSegment = (): fc.Arbitrary<string> =>
  fc
    .tuple(
      fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom("c1", "conv-2", "rec-1") },
        { weight: 4, arbitrary: nastyString(48, 300) },
        { weight: 1, arbitrary: fc.integer({ min: 513, max: 20_000 }).map((n) => "c".repeat(n)) },
      ),
      fc.boolean(),
    )
    .map(([s, all]) => (all ? encodeAll(s) : encodeMinimal(s)));

const queryValue = (): fc.Arbitrary<string> =>
  fc.oneof(
    fc.constantFrom("1", "50", "200", "201", "0", "-1", "1.5", "abc", "true", "false", "fact", "robot", ""),
    isoTimestamp(),
    fc.constantFrom("2023-05-01", "garbage", "9999-99-99", "+275760-09-13T00:00:00Z"),
    fc.base64String({ maxLength: 64 }),
    nastyString(),
  );

/** A query string of generated pairs (known listing parameters, tenant, prototype names, nasty keys). */
const queryString = (): fc.Arbitrary<string> =>
  fc
    .tuple(
      fc.array(
        fc.tuple(
          fc.oneof(
            { weight: 4, arbitrary: fc.constantFrom(...LISTING_PARAMS, "confirm", "tenant") },
            { weight: 1, arbitrary: fc.constantFrom("__proto__", "constructor", "limit[]", "") },
            { weight: 1, arbitrary: nastyString(12) },
          ),
          queryValue(),
        ),
        { maxLength: 5 },
      ),
      fc.boolean(),
    )
    .map(([pairs, all]) => {
      if (pairs.length === 0) return "";
      const enc = all ? encodeAll : encodeMinimal;
      return `?${pairs.map(([k, v]) => `${enc(k)}=${enc(v)}`).join("&")}`;
    });

/** A JSON body: the given value serialised, truncated, or replaced by a wrong top-level shape or non-JSON. */
const body = (value: fc.Arbitrary<unknown>): fc.Arbitrary<{ kind: string; text: string | Buffer }> =>
  fc.oneof(
    { weight: 8, arbitrary: value.map((v) => ({ kind: "json", text: JSON.stringify(v) ?? "null" })) },
    {
      weight: 2,
      arbitrary: fc.tuple(value, fc.double({ min: 0, max: 1, noNaN: true })).map(([v, f]) => {
        const s = JSON.stringify(v) ?? "";
        return { kind: "truncated JSON", text: s.slice(0, Math.floor(s.length * f)) };
      }),
    },
    {
      weight: 1,
      arbitrary: fc
        .oneof(fc.jsonValue({ maxDepth: 3 }), fc.constant([]), fc.constant("just a string"), fc.constant(42))
        .map((v) => ({ kind: "wrong JSON shape", text: JSON.stringify(v) ?? "null" })),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(fc.integer({ min: 1000, max: 200_000 }), fc.boolean()).map(([n, arr]) => ({
        kind: `nesting depth ${n}`,
        text: arr ? `${"[".repeat(n)}${"]".repeat(n)}` : `${'{"a":'.repeat(n)}1${"}".repeat(n)}`,
      })),
    },
    {
      weight: 1,
      arbitrary: fc.oneof(
        fc.uint8Array({ maxLength: 256 }).map((b) => ({ kind: "random bytes", text: Buffer.from(b) })),
        nastyString(200).map((s) => ({ kind: "non-JSON text", text: s })),
        fc.constant({ kind: "empty", text: "" }),
      ),
    },
  );

const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "APPLICATION/JSON",
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/json; charset=latin1",
  "application/merge-patch+json",
  ";;;=",
  "*/*",
];

/** Authentication variants, mostly a valid key so that most requests reach validation. */
const auth = (): fc.Arbitrary<Record<string, string>> =>
  fc.oneof(
    { weight: 8, arbitrary: fc.constant(bearer(KEY_A)) },
    { weight: 2, arbitrary: fc.constant({ "x-api-key": KEY_A }) },
    { weight: 1, arbitrary: fc.constant(bearer(KEY_B)) },
    {
      weight: 3,
      arbitrary: fc.constantFrom<Record<string, string>>(
        {},
        { authorization: "Bearer wrong-key-0000" },
        { authorization: "Bearer " },
        { authorization: "Basic Zm9vOmJhcg==" },
        { authorization: `bearer   ${KEY_A}   ` },
        { authorization: `Bearer ${"k".repeat(20_000)}` },
        { authorization: "Bearer clé-ßecret-ÿ" },
        { "x-api-key": "" },
        { "x-api-key": "__proto__" },
        { authorization: "Bearer constructor" },
      ),
    },
    { weight: 1, arbitrary: nastyString().map((s) => ({ authorization: `Bearer ${headerSafe(s)}` })) },
  );

const headers = (): fc.Arbitrary<Record<string, string>> =>
  fc
    .tuple(
      auth(),
      fc.option(fc.constantFrom(...CONTENT_TYPES), { nil: undefined, freq: 6 }),
      fc.option(nastyString(40), { nil: undefined, freq: 3 }),
    )
    .map(([a, type, requestId]) => ({
      ...a,
      ...(type !== undefined ? { "content-type": type } : {}),
      ...(requestId !== undefined ? { "x-request-id": headerSafe(requestId) } : {}),
    }));

const ODD_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "PROPFIND", "FOO"];
const method = (usual: string): fc.Arbitrary<string> =>
  fc.oneof({ weight: 6, arbitrary: fc.constant(usual) }, { weight: 1, arbitrary: fc.constantFrom(...ODD_METHODS) });

const turnBody = () => mutateFields(validTurn(), TURN_FIELDS, wrongValue());

type Route = {
  name: string;
  usual: string;
  path: fc.Arbitrary<string>;
  body?: fc.Arbitrary<{ kind: string; text: string | Buffer }>;
};

const ROUTES: Route[] = [
  { name: "healthz", usual: "GET", path: fc.constant("/healthz") },
  { name: "readyz", usual: "GET", path: fc.constant("/readyz") },
  { name: "metrics", usual: "GET", path: fc.constant("/metrics") },
  {
    name: "ingest turn",
    usual: "POST",
    path: pathSegment().map((c) => `/v1/conversations/${c}/turns`),
    body: body(turnBody().map((m) => m.value)),
  },
  {
    name: "ingest batch",
    usual: "POST",
    path: pathSegment().map((c) => `/v1/conversations/${c}/turns:batch`),
    body: body(
      fc.oneof(
        {
          weight: 4,
          arbitrary: fc
            .array(
              turnBody().map((m) => m.value),
              { minLength: 1, maxLength: 5 },
            )
            .map((turns) => ({ turns })),
        },
        { weight: 1, arbitrary: fc.record({ turns: wrongValue() }) },
        {
          weight: 1,
          arbitrary: fc
            .integer({ min: 1001, max: 1500 })
            .map((n) => ({ turns: Array.from({ length: n }, () => ({})) })),
        },
      ),
    ),
  },
  {
    name: "flush conversation",
    usual: "POST",
    path: pathSegment().map((c) => `/v1/conversations/${c}/flush`),
    body: body(fc.jsonValue({ maxDepth: 2 })),
  },
  { name: "flush all", usual: "POST", path: fc.constant("/v1/flush") },
  {
    name: "query",
    usual: "POST",
    path: fc.constant("/v1/query"),
    body: body(mutateFields(validQuery(), QUERY_FIELDS, wrongValue()).map((m) => m.value)),
  },
  { name: "list records", usual: "GET", path: queryString().map((q) => `/v1/records${q}`) },
  { name: "get record", usual: "GET", path: pathSegment().map((id) => `/v1/records/${id}`) },
  { name: "record history", usual: "GET", path: pathSegment().map((id) => `/v1/records/${id}/history`) },
  { name: "consolidate", usual: "POST", path: fc.constant("/v1/consolidate") },
  { name: "list conversations", usual: "GET", path: queryString().map((q) => `/v1/conversations${q}`) },
  {
    name: "conversation timeline",
    usual: "GET",
    path: fc.tuple(pathSegment(), queryString()).map(([c, q]) => `/v1/conversations/${c}/timeline${q}`),
  },
  {
    name: "explorer page",
    usual: "GET",
    path: fc.oneof(
      fc.constantFrom("/ui", "/ui/", "/ui/app.js", "/ui/explorer.css"),
      pathSegment().map((f) => `/ui/${f}`),
    ),
  },
  { name: "erase conversation", usual: "DELETE", path: pathSegment().map((c) => `/v1/conversations/${c}`) },
  {
    name: "erase tenant",
    usual: "DELETE",
    path: fc
      .oneof(fc.constant(TENANT_A), fc.constant("fuzz-b"), nastyString())
      .map((t) => `/v1/tenant?confirm=${encodeAll(t)}`),
  },
  {
    name: "unknown path",
    usual: "GET",
    path: fc.oneof(
      fc.constantFrom(
        "/",
        "*",
        "/v1",
        "/v1/",
        "/v1/records/",
        "//v1//records",
        "/v1/../healthz",
        "/%2e%2e/healthz",
        "/v1/conversations/c/turnsX",
        "/v1/conversations/c/turns:foo",
        "/v1/conversations/c/turns:batchX",
        "/v1/conversations//turns",
        "/v1/query/extra",
        "/healthz/../v1/records",
        "/v1/records?limit=1#frag",
      ),
      fc.array(pathSegment(), { minLength: 1, maxLength: 4 }).map((segs) => `/${segs.join("/")}`),
    ),
  },
];

const sweepCase = (): fc.Arbitrary<HttpCase> =>
  fc
    .constantFrom(...ROUTES)
    .chain((r) =>
      fc.record({
        r: fc.constant(r),
        method: method(r.usual),
        path: r.path,
        extraQuery:
          r.name === "list records" || r.name === "erase tenant"
            ? fc.constant("")
            : fc.option(queryString(), { nil: "", freq: 4 }),
        headers: headers(),
        body: r.body ? fc.option(r.body, { nil: undefined, freq: 12 }) : fc.constant(undefined),
      }),
    )
    .map(({ r, method, path, extraQuery, headers, body }) => ({
      label: `${r.name}${body ? ` (${body.kind})` : ""}`,
      method,
      path: `${path}${extraQuery && !path.includes("?") ? extraQuery : ""}`,
      headers,
      ...(body !== undefined && method !== "GET" && method !== "HEAD" ? { body: body.text } : {}),
    }));

// ---------------------------------------------------------------------------------------------------
// Oracles

interface ErrorBody {
  error?: string;
  issues?: { path: string; message: string }[];
  rejected?: { index: number; issues: { path: string; message: string }[] }[];
}

const parse = (res: RawResponse): ErrorBody => {
  try {
    return JSON.parse(res.body) as ErrorBody;
  } catch {
    return {};
  }
};

/** An issue path names `field` when it is the field or a path inside it (metadata.lang names metadata). */
const names = (paths: readonly string[], field: string): boolean =>
  paths.some((p) => p === field || p.startsWith(`${field}.`));

/** A 400 whose issues name `field`. */
const expectNamed =
  (field: string) =>
  (_c: HttpCase, res: RawResponse): string | undefined => {
    if (res.status !== 400) return `expected 400 naming "${field}", got ${res.status}: ${res.body.slice(0, 300)}`;
    const paths = (parse(res).issues ?? []).map((i) => i.path);
    return names(paths, field) ? undefined : `400 does not name "${field}": issues at ${JSON.stringify(paths)}`;
  };

// ---------------------------------------------------------------------------------------------------
// The round trip that shows the server still works

const roundTrip = async (t: Target, tag: string): Promise<void> => {
  const marker = `Zorblat${tag}`;
  const conversation = `health-${tag}`;
  const send = (method: string, path: string, json?: unknown) =>
    rawRequest(t.base, {
      method,
      path,
      headers: jsonHeaders(),
      ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
      localAddress: ADDR.probe,
      timeoutMs: REQUEST_TIMEOUT_MS,
    });
  const ingest = await send("POST", `/v1/conversations/${conversation}/turns`, {
    speaker: "Ana",
    text: `Ana adopted a dog called ${marker} last Saturday.`,
    timestamp: "2024-05-06T10:15:00Z",
  });
  assert.equal(ingest.status, 202, ingest.body);
  const flush = await send("POST", `/v1/conversations/${conversation}/flush`);
  assert.equal(flush.status, 202, flush.body);
  // The pipeline runs after the 202: poll the query (bounded) until the text is indexed.
  const deadline = Date.now() + 60_000;
  let last = "";
  while (Date.now() < deadline) {
    const q = await send("POST", "/v1/query", { question: `What dog did Ana adopt, ${marker}?`, conversation });
    assert.equal(q.status, 200, q.body);
    last = q.body;
    if ((JSON.parse(q.body) as { context: string }).context.includes(marker)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`the ingested text never came back from /v1/query; last answer: ${last.slice(0, 500)}`);
};

const sample = <T>(arb: fc.Arbitrary<T>, numRuns: number, offset = 0): T[] =>
  fc.sample(arb, { seed: SEED + offset, numRuns });

const assertNoFailures = (failures: readonly Failure[], server: FuzzServer): void => {
  if (failures.length === 0) return;
  const log = server.log
    .filter((l) => l.trim())
    .slice(-8)
    .map((l) => (l.length > 400 ? `${l.slice(0, 400)}…` : l));
  assert.fail(`${report(failures)}${log.length ? `\nserver log (last lines):\n${log.join("\n")}` : ""}`);
};

// ---------------------------------------------------------------------------------------------------

describe("HTTP fuzz: generated requests against every route", { timeout: 600_000 }, () => {
  let server: FuzzServer;
  let target: Target;
  before(async () => {
    server = await startFuzzServer();
    target = { base: server.http, exited: () => server.exited() };
  });
  after(async () => {
    await server?.stop();
  });

  it("answers every generated request (450 + fixed edge cases) in time, never with a 5xx, with well-formed errors", async () => {
    const cases: HttpCase[] = [
      ...sample(sweepCase(), 450),
      {
        label: "body over the 5 MiB limit",
        method: "POST",
        path: "/v1/conversations/c1/turns",
        headers: jsonHeaders(),
        body: JSON.stringify({ speaker: "Ana", text: "y".repeat(6 * 1024 * 1024), timestamp: "2024-05-06T10:15:00Z" }),
      },
      { label: "OPTIONS *", method: "OPTIONS", path: "*", headers: {} },
      { label: "absolute-form target", method: "GET", path: "http://127.0.0.1/healthz", headers: {} },
      { label: "query only", method: "GET", path: "/?", headers: {} },
      {
        label: "8 KiB of query string",
        method: "GET",
        path: `/v1/records?entity=${"e".repeat(8000)}`,
        headers: bearer(),
      },
    ];
    const failures = await runCases(target, cases, {
      sourceAddress: ADDR.sweep,
      probeAddress: ADDR.probe,
      concurrency: 4,
    });
    assertNoFailures(failures, server);
  });

  it("names the bad field in every validation error (a valid turn, batch item, query or listing with one field broken)", async () => {
    // Values invalid under the documented API (openapi.yaml), whatever the exact rules.
    const badTurnValue: Record<string, unknown[]> = {
      speaker: [undefined, "", "   ", 42, null, [], {}],
      text: [undefined, "", 7, null, {}, "x".repeat(100_001)],
      timestamp: [undefined, "", "yesterday-ish", 0, null, "2023-13-45T99:00:00Z"],
      role: ["robot", 1, ""],
      sessionId: ["", "  ", 3],
      turnId: ["", "  ", 5, {}],
      metadata: ["str", [1], { lang: 3 }, { a: null }],
    };
    const brokenTurn = fc
      .tuple(validTurn(), fc.constantFrom(...Object.keys(badTurnValue)), fc.nat())
      .map(([turn, field, n]) => {
        const values = badTurnValue[field] as unknown[];
        const v = values[n % values.length];
        const broken: Record<string, unknown> = { ...turn };
        if (v === undefined) delete broken[field];
        else broken[field] = v;
        return { turn: broken, field, shown: v === undefined ? "(missing)" : JSON.stringify(v).slice(0, 40) };
      });

    const turnCases = sample(brokenTurn, 40, 1).map((b): HttpCase & { field: string } => ({
      label: `turn with ${b.field}=${b.shown}`,
      method: "POST",
      path: "/v1/conversations/oracle/turns",
      headers: jsonHeaders(),
      body: JSON.stringify(b.turn),
      field: b.field,
    }));

    const batchCases = sample(
      fc.tuple(brokenTurn, fc.array(validTurn(), { minLength: 1, maxLength: 4 }), fc.nat()),
      25,
      2,
    ).map(([b, good, at]): HttpCase & { field: string; index: number } => {
      const index = at % (good.length + 1);
      const turns: unknown[] = good.map((t) => ({ ...t, turnId: undefined }));
      turns.splice(index, 0, b.turn);
      return {
        label: `batch item ${index} with ${b.field}=${b.shown}`,
        method: "POST",
        path: "/v1/conversations/oracle/turns:batch",
        headers: jsonHeaders(),
        body: JSON.stringify({ turns }),
        field: b.field,
        index,
      };
    });

    const badQueryValue: Record<string, unknown[]> = {
      question: [undefined, "", "   ", 5, "q".repeat(4001)],
      budget: [10, 32_001, 1.5, "100", -1],
      conversation: ["", "  ", 3],
    };
    const queryCases = sample(
      fc.tuple(validQuery(), fc.constantFrom(...Object.keys(badQueryValue)), fc.nat()),
      25,
      3,
    ).map(([q, field, n]): HttpCase & { field: string } => {
      const values = badQueryValue[field] as unknown[];
      const v = values[n % values.length];
      const broken: Record<string, unknown> = { ...q };
      if (v === undefined) delete broken[field];
      else broken[field] = v;
      return {
        label: `query with ${field}=${v === undefined ? "(missing)" : JSON.stringify(v).slice(0, 40)}`,
        method: "POST",
        path: "/v1/query",
        headers: jsonHeaders(),
        body: JSON.stringify(broken),
        field,
      };
    });

    const badParam: Record<string, string[]> = {
      limit: ["0", "201", "abc", "-1", "1.5"],
      type: ["robot", "FACT"],
      includeSuperseded: ["yes", "2"],
      from: ["garbage", "2023-99-99"],
      to: ["not-a-date"],
      conversation: ["c".repeat(513)],
      entity: ["e".repeat(513)],
    };
    const listingCases = sample(fc.tuple(fc.constantFrom(...Object.keys(badParam)), fc.nat()), 20, 4).map(
      ([field, n]): HttpCase & { field: string } => {
        const values = badParam[field] as string[];
        const v = values[n % values.length] as string;
        return {
          label: `listing with ${field}=${v.slice(0, 20)}`,
          method: "GET",
          path: `/v1/records?${field === "limit" ? "" : "limit=5&"}${field}=${encodeAll(v)}`,
          headers: bearer(),
          field,
        };
      },
    );
    listingCases.push({
      label: "listing with from after to",
      method: "GET",
      path: "/v1/records?from=2024-01-01&to=2023-01-01",
      headers: bearer(),
      field: "from",
    });

    const fieldOf = new Map<HttpCase, string>(
      [...turnCases, ...queryCases, ...listingCases].map((c) => [c, c.field] as const),
    );
    const batchOf = new Map<HttpCase, { field: string; index: number }>(batchCases.map((c) => [c, c]));
    const failures = await runCases(target, [...turnCases, ...batchCases, ...queryCases, ...listingCases], {
      sourceAddress: ADDR.oracle,
      probeAddress: ADDR.probe,
      concurrency: 2,
      check: (c, res) => {
        const field = fieldOf.get(c);
        if (field !== undefined) return expectNamed(field)(c, res);
        const batch = batchOf.get(c);
        if (!batch) return undefined;
        if (res.status !== 207) return `expected 207 (one bad item), got ${res.status}: ${res.body.slice(0, 300)}`;
        const rejected = parse(res).rejected ?? [];
        const item = rejected.find((r) => r.index === batch.index);
        if (rejected.length !== 1 || !item)
          return `expected exactly item ${batch.index} rejected: ${res.body.slice(0, 300)}`;
        const paths = item.issues.map((i) => i.path);
        return names(paths, batch.field)
          ? undefined
          : `item issues do not name "${batch.field}": ${JSON.stringify(paths)}`;
      },
    });
    assertNoFailures(failures, server);
  });

  it("is healthy afterwards: /healthz 200 in time, and ingest + flush + query return the ingested text", async () => {
    assert.equal(await healthy(target, ADDR.probe), undefined);
    await roundTrip(target, "sweep");
  });
});

describe("HTTP fuzz: huge and pathological strings in every field", { timeout: 600_000 }, () => {
  let server: FuzzServer;
  let target: Target;
  before(async () => {
    server = await startFuzzServer();
    target = { base: server.http, exited: () => server.exited() };
  });
  after(async () => {
    await server?.stop();
  });

  /** Where a huge string goes: a builder of the request around it. */
  const PLACES: Record<string, (s: string) => HttpCase> = {
    "turn text": (s) => turnCase({ text: s }),
    "turn speaker": (s) => turnCase({ speaker: s }),
    "turn turnId": (s) => turnCase({ turnId: s }),
    "turn sessionId": (s) => turnCase({ sessionId: s }),
    "turn metadata value": (s) => turnCase({ metadata: { note: s } }),
    "batch item text": (s) => ({
      label: "",
      method: "POST",
      path: "/v1/conversations/huge/turns:batch",
      headers: jsonHeaders(),
      body: JSON.stringify({
        turns: [
          { speaker: "Ana", text: "ok then", timestamp: "2024-05-06T10:15:00Z" },
          { speaker: "Ben", text: s, timestamp: "2024-05-06T10:16:00Z" },
        ],
      }),
    }),
    "query question": (s) => queryCase({ question: s }),
    "query question (first 4000)": (s) => queryCase({ question: s.slice(0, 4000) }),
    "query conversation": (s) => queryCase({ question: "what dog?", conversation: s }),
    "query asOf": (s) => queryCase({ question: "what dog?", asOf: s }),
    "listing entity": (s) => ({
      label: "",
      method: "GET",
      path: `/v1/records?entity=${encodeAll(s.slice(0, 4000))}`,
      headers: bearer(),
    }),
    "listing cursor": (s) => ({
      label: "",
      method: "GET",
      path: `/v1/records?cursor=${encodeAll(s.slice(0, 4000))}`,
      headers: bearer(),
    }),
    "record id": (s) => ({
      label: "",
      method: "GET",
      path: `/v1/records/${encodeAll(s.slice(0, 3000))}`,
      headers: bearer(),
    }),
    "conversation in the path": (s) => ({
      label: "",
      method: "POST",
      path: `/v1/conversations/${encodeAll(s.slice(0, 500))}/turns`,
      headers: jsonHeaders(),
      body: JSON.stringify({ speaker: "Ana", text: "fine", timestamp: "2024-05-06T10:15:00Z" }),
    }),
  };
  const turnCase = (fields: Record<string, unknown>): HttpCase => ({
    label: "",
    method: "POST",
    path: "/v1/conversations/huge/turns",
    headers: jsonHeaders(),
    body: JSON.stringify({ speaker: "Ana", text: "hello there", timestamp: "2024-05-06T10:15:00Z", ...fields }),
  });
  const queryCase = (fields: Record<string, unknown>): HttpCase => ({
    label: "",
    method: "POST",
    path: "/v1/query",
    headers: jsonHeaders(),
    body: JSON.stringify(fields),
  });

  it("answers each in time without a 5xx, and /healthz keeps answering after each (no stalled event loop)", async () => {
    const picks = sample(fc.tuple(hugeStringName(), fc.constantFrom(...Object.keys(PLACES))), 40, 5);
    const cases = picks.map(([name, place]) => {
      const build = PLACES[place] as (s: string) => HttpCase;
      return { ...build(HUGE_STRINGS[name] as string), label: `${name} in ${place}` };
    });
    // Closing every open segment makes the pipeline encode and index what was accepted.
    cases.push({ label: "flush all after the huge turns", method: "POST", path: "/v1/flush", headers: bearer() });
    const failures = await runCases(target, cases, {
      sourceAddress: ADDR.huge,
      probeAddress: ADDR.probe,
      probeEach: true,
    });
    assertNoFailures(failures, server);
    // The flush makes the pipeline process what was accepted; the round trip waits for it.
    await roundTrip(target, "huge");
    assert.equal(await healthy(target, ADDR.probe), undefined);
  });
});

describe("HTTP fuzz: the validation contract of issue 11", { timeout: 300_000 }, () => {
  let server: FuzzServer;
  let target: Target;
  before(async () => {
    server = await startFuzzServer();
    target = { base: server.http, exited: () => server.exited() };
  });
  after(async () => {
    await server?.stop();
  });

  const run = async (cases: HttpCase[], check: (c: HttpCase, res: RawResponse) => string | undefined) =>
    assertNoFailures(
      await runCases(target, cases, { sourceAddress: ADDR.contract, probeAddress: ADDR.probe, check }),
      server,
    );
  const turnPost = (label: string, turn: Record<string, unknown>, conversation = "contract"): HttpCase => ({
    label,
    method: "POST",
    path: `/v1/conversations/${conversation}/turns`,
    headers: jsonHeaders(),
    body: JSON.stringify({ speaker: "Ana", text: "hello there", timestamp: "2024-05-06T10:15:00Z", ...turn }),
  });

  it("refuses a cursor it did not issue: 400 naming cursor", async () => {
    const forged = fc.oneof(
      fc.base64String({ minLength: 1, maxLength: 80 }),
      fc.string({ minLength: 1, maxLength: 40 }),
      // Well-formed for today's unsigned format ([saidAt, id] as base64url JSON), but never issued.
      fc
        .tuple(fc.integer(), fc.string({ maxLength: 12 }))
        .map((v) => Buffer.from(JSON.stringify(v)).toString("base64url")),
      fc.constantFrom("W10", "bnVsbA", "WzEsMl0", "not-a-cursor"),
    );
    const cases = sample(forged, 15, 6).map((c) => ({
      label: `cursor ${JSON.stringify(c).slice(0, 40)}`,
      method: "GET",
      path: `/v1/records?limit=5&cursor=${encodeAll(c)}`,
      headers: bearer(),
    }));
    await run(cases, expectNamed("cursor"));
  });

  it("refuses an asOf that is not a timestamp: 400 naming asOf", async () => {
    const garbage = fc.oneof(
      fc.constantFrom("garbage", "yesterday", "not a date", "2023-13-45T99:99:99Z", "<script>"),
      fc.string({ minLength: 1, maxLength: 30 }).filter((s) => Number.isNaN(Date.parse(s))),
    );
    const cases = sample(garbage, 12, 7).map((asOf) => ({
      label: `asOf ${JSON.stringify(asOf)}`,
      method: "POST",
      path: "/v1/query",
      headers: jsonHeaders(),
      body: JSON.stringify({ question: "what dog?", asOf }),
    }));
    await run(cases, expectNamed("asOf"));
  });

  it("refuses timestamps that are not ISO 8601 date-times with an offset in a sane year: 400 naming timestamp", async () => {
    const bad = [
      "1",
      "May 8",
      "0001-01-01T00:00:00Z",
      "9999-12-31T23:59:59Z",
      "+275760-09-13T00:00:00.000Z",
      "-000001-01-01T00:00:00Z",
      "2023-05-08T10:00:00",
      "Tue, 01 Dec 2026 08:00:00 GMT",
    ];
    await run(
      bad.map((timestamp) => turnPost(`timestamp ${timestamp}`, { timestamp })),
      expectNamed("timestamp"),
    );
  });

  it("refuses NUL and control characters in ids and speakers: 400 naming the field", async () => {
    const control = fc.constantFrom("\u0000", "\u0001", "\u0007", "\u001b", "\u007f");
    const field = fc.constantFrom("turnId", "sessionId", "speaker", "metadata");
    const cases = sample(fc.tuple(field, control), 12, 8).map(([f, ch]): HttpCase & { field: string } => ({
      ...turnPost(
        `${f} with U+${ch.charCodeAt(0).toString(16).padStart(4, "0")}`,
        f === "metadata" ? { metadata: { [`k${ch}`]: "v" } } : { [f]: `a${ch}b` },
      ),
      field: f,
    }));
    cases.push({ ...turnPost("conversation with NUL", {}, "c%00x"), field: "conversation" });
    cases.push({ ...turnPost("conversation with U+0001", {}, "c%01x"), field: "conversation" });
    const fieldOf = new Map<HttpCase, string>(cases.map((c) => [c, c.field]));
    await run(cases, (c, res) => expectNamed(fieldOf.get(c) ?? "")(c, res));
  });

  it("refuses whitespace-only text and over-long ids: 400 naming the field", async () => {
    const cases: (HttpCase & { field: string })[] = [
      { ...turnPost("whitespace-only text", { text: " \n\t " }), field: "text" },
      { ...turnPost("5,000-char turnId", { turnId: "t".repeat(5000) }), field: "turnId" },
      { ...turnPost("5,000-char sessionId", { sessionId: "s".repeat(5000) }), field: "sessionId" },
      {
        label: "query conversation of 5,000 chars",
        method: "POST",
        path: "/v1/query",
        headers: jsonHeaders(),
        body: JSON.stringify({ question: "what dog?", conversation: "c".repeat(5000) }),
        field: "conversation",
      },
    ];
    const fieldOf = new Map<HttpCase, string>(cases.map((c) => [c, c.field]));
    await run(cases, (c, res) => expectNamed(fieldOf.get(c) ?? "")(c, res));
  });

  it("matches routes exactly: look-alikes of /turns and /turns:batch are 404", async () => {
    const lookAlikes = ["turnsX", "turns:foo", "turns:batchX", "turnsbatch", "turns:", "turns:batch:batch"];
    const cases = lookAlikes.map((tail) => ({
      label: `POST …/${tail}`,
      method: "POST",
      path: `/v1/conversations/c1/${tail}`,
      headers: jsonHeaders(),
      body: JSON.stringify({ speaker: "Ana", text: "hello", timestamp: "2024-05-06T10:15:00Z" }),
    }));
    await run(cases, (_c, res) =>
      res.status === 404 ? undefined : `expected 404, got ${res.status}: ${res.body.slice(0, 200)}`,
    );
  });

  it("wants a JSON content type on bodies: 415 otherwise", async () => {
    const types = [undefined, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"];
    const cases = types.flatMap((type) =>
      [
        ["/v1/conversations/c1/turns", { speaker: "Ana", text: "hello", timestamp: "2024-05-06T10:15:00Z" }],
        ["/v1/query", { question: "what dog?" }],
      ].map(([path, json]) => ({
        label: `POST ${path} with content-type ${type ?? "(none)"}`,
        method: "POST",
        path: path as string,
        headers: { ...bearer(), ...(type ? { "content-type": type } : {}) },
        body: JSON.stringify(json),
      })),
    );
    await run(cases, (_c, res) =>
      res.status === 415 ? undefined : `expected 415, got ${res.status}: ${res.body.slice(0, 200)}`,
    );
  });
});
