// gRPC fuzz (issue 11): generated messages against every method of memory.v1.Memory
// (schemas/memory.proto), the client-streaming Ingest included, on the real gRPC server over an
// embedded engine (hashing embedder, temp data folder) in a child process on 127.0.0.1. Seeded and
// bounded (~400 calls, each with a 30 s deadline). Whatever the input: no INTERNAL or UNKNOWN
// status, no DEADLINE_EXCEEDED (a hang) or UNAVAILABLE (a dead server), field issues of the
// documented shape; afterwards an Ingest + Flush + Query still returns the ingested text.
//
// Messages are serialised with the service's own serialisers (so the wire is valid protobuf with
// generated field values); a second group sends raw bytes, where a body that is not protobuf gets
// grpc-js's own INTERNAL "Error deserializing request" (the status gRPC specifies for it), which is
// the one INTERNAL allowed, and only for that group.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  Client,
  type ClientWritableStream,
  credentials,
  Metadata,
  type MethodDefinition,
  type ServiceError,
  status,
} from "@grpc/grpc-js";
import fc from "fast-check";
import { MemoryGrpcClient } from "../../services/platform/grpc/client.ts";
import { memoryServiceDefinition } from "../../services/platform/grpc/service-definition.ts";
import { ISSUES_METADATA_KEY } from "../../services/platform/grpc/status-mapping.ts";
import { FUZZ_KEYS, type FuzzServer, KEY_A, startFuzzServer } from "../helpers/fuzz-child.ts";
import { HUGE_STRINGS, hugeStringName, isoTimestamp, nastyString, words } from "../helpers/fuzz-inputs.ts";
import { rawRequest } from "../helpers/raw-http.ts";

const SEED = 11_2027;
const DEADLINE_MS = 30_000;
const KEY_B = Object.keys(FUZZ_KEYS)[1] as string;

type MethodName = "Ingest" | "Flush" | "Query" | "ListRecords" | "GetRecord";
const definition = memoryServiceDefinition() as unknown as Record<MethodName, MethodDefinition<unknown, unknown>>;

/** Codes no input may produce from this server. */
const FORBIDDEN = new Set<number>([
  status.INTERNAL,
  status.UNKNOWN,
  status.DEADLINE_EXCEEDED,
  status.UNAVAILABLE,
  status.DATA_LOSS,
]);

// ---------------------------------------------------------------------------------------------------
// Generators (wire shapes, snake_case as in the .proto)

/** A string field: mostly plausible, often nasty, sometimes very long. */
const str = (plausible: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 4, arbitrary: plausible },
    { weight: 1, arbitrary: fc.constant("") },
    { weight: 3, arbitrary: nastyString(48, 300) },
    // Over the 512-character id cap, as words: unbroken runs (a tokenizer stall) have their own test.
    { weight: 1, arbitrary: fc.integer({ min: 171, max: 1700 }).map((n) => "zz ".repeat(n)) },
  );

const int32 = (plausible: fc.Arbitrary<number>): fc.Arbitrary<number> =>
  fc.oneof(
    { weight: 3, arbitrary: plausible },
    { weight: 1, arbitrary: fc.constantFrom(0, -1, 1, 49, 50, 200, 201, 32_000, 32_001, 2 ** 31 - 1, -(2 ** 31)) },
    { weight: 1, arbitrary: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }) },
  );

const ingestRequest = () =>
  fc.record({
    conversation: str(fc.constantFrom("c1", "conv-2")),
    turn_id: str(fc.stringMatching(/^[a-z0-9-]{1,12}$/).map((s) => `g-${s}`)),
    speaker: str(fc.constantFrom("Ana", "Ben")),
    role: str(fc.constantFrom("user", "assistant", "system", "other")),
    text: str(words()),
    timestamp: str(isoTimestamp()),
    session_id: str(fc.constantFrom("s1", "s2")),
    metadata: fc.dictionary(str(fc.constant("lang")), str(fc.constant("en")), { maxKeys: 3 }),
  });

const UNARY: Record<Exclude<MethodName, "Ingest">, fc.Arbitrary<object>> = {
  Flush: fc.record({ conversation: str(fc.constantFrom("c1", "conv-2")) }),
  Query: fc.record({
    question: str(words()),
    conversation: str(fc.constantFrom("c1", "conv-2")),
    budget: int32(fc.integer({ min: 50, max: 32_000 })),
    as_of: str(isoTimestamp()),
  }),
  ListRecords: fc.record({
    conversation: str(fc.constantFrom("c1", "conv-2")),
    entity: str(fc.constantFrom("Ana", "Pepper")),
    type: str(fc.constantFrom("fact", "event", "preference", "plan", "relation", "other")),
    from: str(isoTimestamp()),
    to: str(isoTimestamp()),
    limit: int32(fc.integer({ min: 1, max: 200 })),
    cursor: str(fc.base64String({ maxLength: 40 })),
    include_superseded: fc.boolean(),
  }),
  GetRecord: fc.record({ id: str(fc.stringMatching(/^[0-9a-f]{64}$/)) }),
};

/** Call metadata: mostly a valid key, else none, a wrong one, odd forms, extra and binary entries. */
const metadata = (): fc.Arbitrary<Metadata> =>
  fc
    .tuple(
      fc.oneof(
        { weight: 8, arbitrary: fc.constant<[string, string][]>([["authorization", `Bearer ${KEY_A}`]]) },
        { weight: 2, arbitrary: fc.constant<[string, string][]>([["x-api-key", KEY_A]]) },
        { weight: 1, arbitrary: fc.constant<[string, string][]>([["authorization", `Bearer ${KEY_B}`]]) },
        {
          weight: 3,
          arbitrary: fc.constantFrom<[string, string][]>(
            [],
            [["authorization", "Bearer wrong-key-000"]],
            [["authorization", "Bearer "]],
            [["authorization", "Basic Zm9vOmJhcg=="]],
            [["authorization", `bearer    ${KEY_A}`]],
            [["x-api-key", "__proto__"]],
            [["x-memory-tenant", "fuzz-b"]],
            [
              ["authorization", "Bearer wrong-key-000"],
              ["x-api-key", KEY_A],
            ],
          ),
        },
      ),
      fc.boolean(),
    )
    .map(([pairs, withBinary]) => {
      const md = new Metadata();
      for (const [k, v] of pairs) md.add(k, v);
      if (withBinary) md.add("x-fuzz-bin", Buffer.from([0, 255, 1, 254]));
      return md;
    });

// ---------------------------------------------------------------------------------------------------
// Calls

interface Outcome {
  code: number;
  details: string;
  issues?: string;
}

const serialize = (m: MethodName) => definition[m].requestSerialize as (v: unknown) => Buffer;
const rawBytes = (b: Buffer): Buffer => b;

const outcomeOf = (err: ServiceError | null): Outcome =>
  err
    ? {
        code: err.code,
        details: err.details,
        ...(err.metadata?.get(ISSUES_METADATA_KEY)[0] !== undefined
          ? { issues: String(err.metadata.get(ISSUES_METADATA_KEY)[0]) }
          : {}),
      }
    : { code: status.OK, details: "" };

const callUnary = (client: Client, m: MethodName, body: Buffer, md: Metadata): Promise<Outcome> =>
  new Promise((resolve) =>
    client.makeUnaryRequest(
      definition[m].path,
      rawBytes,
      rawBytes,
      body,
      md,
      { deadline: Date.now() + DEADLINE_MS },
      (err) => resolve(outcomeOf(err)),
    ),
  );

/** An Ingest stream of the given message bodies; `cancelAfter` cancels it after that many writes. */
const callIngest = (client: Client, bodies: Buffer[], md: Metadata, cancelAfter?: number): Promise<Outcome> =>
  new Promise((resolve) => {
    const call: ClientWritableStream<Buffer> = client.makeClientStreamRequest(
      definition.Ingest.path,
      rawBytes,
      rawBytes,
      md,
      { deadline: Date.now() + DEADLINE_MS },
      (err) => resolve(outcomeOf(err)),
    );
    call.on("error", () => undefined);
    bodies.forEach((b, i) => {
      if (cancelAfter !== undefined && i === cancelAfter) call.cancel();
      else if (cancelAfter === undefined || i < cancelAfter) call.write(b);
    });
    if (cancelAfter === undefined) call.end();
    else if (cancelAfter >= bodies.length) call.cancel();
  });

interface GrpcCase {
  label: string;
  run(client: Client): Promise<Outcome>;
  /** An INTERNAL from grpc-js's own deserialiser is allowed (raw bytes that are not protobuf). */
  raw?: boolean;
  cancelled?: boolean;
}

const problemOf = (c: GrpcCase, o: Outcome): string | undefined => {
  if (c.cancelled && o.code === status.CANCELLED) return undefined;
  if (c.raw && o.code === status.INTERNAL && o.details === "Error deserializing request") return undefined;
  if (FORBIDDEN.has(o.code)) return `${status[o.code]}: ${o.details.slice(0, 300)}`;
  if (o.issues !== undefined) {
    let issues: unknown;
    try {
      issues = JSON.parse(o.issues);
    } catch {
      return `${ISSUES_METADATA_KEY} is not JSON: ${o.issues.slice(0, 200)}`;
    }
    const ok =
      Array.isArray(issues) &&
      issues.every(
        (i: { path?: unknown; message?: unknown }) => typeof i.path === "string" && typeof i.message === "string",
      );
    if (!ok) return `malformed ${ISSUES_METADATA_KEY}: ${o.issues.slice(0, 200)}`;
  }
  if (o.code === status.INVALID_ARGUMENT && o.details.trim() === "") return "INVALID_ARGUMENT without details";
  return undefined;
};

const show = (v: unknown): string => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 240 ? `${s.slice(0, 240)}… (${s.length} chars)` : s;
};

const mdShow = (md: Metadata): string => show(Object.keys(md.getMap()));

const structuredCase = (): fc.Arbitrary<GrpcCase> =>
  fc.oneof(
    {
      weight: 5,
      arbitrary: fc.constantFrom(...(Object.keys(UNARY) as (keyof typeof UNARY)[])).chain((m) =>
        fc.tuple(UNARY[m], metadata()).map(
          ([msg, md]): GrpcCase => ({
            label: `${m} ${show(msg)} metadata=${mdShow(md)}`,
            run: (client) => callUnary(client, m, serialize(m)(msg), md),
          }),
        ),
      ),
    },
    {
      weight: 3,
      arbitrary: fc
        .tuple(
          fc.array(ingestRequest(), { maxLength: 6 }),
          metadata(),
          fc.option(fc.nat({ max: 6 }), { nil: undefined, freq: 5 }),
        )
        .map(
          ([msgs, md, cancelAfter]): GrpcCase => ({
            label: `Ingest stream of ${msgs.length}${cancelAfter !== undefined ? ` cancelled after ${cancelAfter}` : ""} ${show(msgs)} metadata=${mdShow(md)}`,
            run: (client) =>
              callIngest(
                client,
                msgs.map((x) => serialize("Ingest")(x)),
                md,
                cancelAfter,
              ),
            cancelled: cancelAfter !== undefined,
          }),
        ),
    },
  );

const rawCase = (): fc.Arbitrary<GrpcCase> =>
  fc
    .tuple(
      fc.constantFrom<MethodName>("Ingest", "Flush", "Query", "ListRecords", "GetRecord"),
      fc.array(
        fc.oneof(
          fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
          // A valid message with bytes flipped or cut short.
          fc.tuple(UNARY.Query, fc.nat(), fc.nat({ max: 255 })).map(([m, at, x]) => {
            const b = Buffer.from(serialize("Query")(m));
            if (b.length > 0) b[at % b.length] = x;
            return b.subarray(0, Math.max(0, b.length - (x % 4)));
          }),
        ),
        { minLength: 1, maxLength: 3 },
      ),
    )
    .map(
      ([m, bodies]): GrpcCase => ({
        label: `${m} raw bytes ${show(bodies.map((b) => b.toString("hex")))}`,
        raw: true,
        run: (client) =>
          m === "Ingest" ? callIngest(client, bodies, authMd()) : callUnary(client, m, bodies[0] as Buffer, authMd()),
      }),
    );

const authMd = (): Metadata => {
  const md = new Metadata();
  md.set("authorization", `Bearer ${KEY_A}`);
  return md;
};

/** HTTP /healthz of the same process: 200 within 10 s, else what went wrong. */
const unhealthy = async (server: FuzzServer): Promise<string | undefined> => {
  if (server.exited()) return "the server process exited";
  const res = await rawRequest(server.http, { method: "GET", path: "/healthz", timeoutMs: 10_000 }).catch(
    (err: unknown) => ({ status: 0, body: String(err) }),
  );
  return res.status === 200 ? undefined : `/healthz: ${res.status} ${res.body.slice(0, 200)}`;
};

/**
 * Runs every case, collecting every failure; stops early once the server no longer answers
 * /healthz (a stalled event loop would make every later call wait out its deadline).
 */
const runAll = async (
  server: FuzzServer,
  client: Client,
  cases: readonly GrpcCase[],
  concurrency: number,
): Promise<string[]> => {
  const failures: string[] = [];
  let next = 0;
  let stalled = false;
  const worker = async (): Promise<void> => {
    while (!stalled && next < cases.length) {
      const n = next++;
      const c = cases[n] as GrpcCase;
      const problem = problemOf(c, await c.run(client));
      if (!problem) continue;
      failures.push(`[${c.label}]\n   -> ${problem}`);
      const sick = await unhealthy(server);
      if (sick && !stalled) {
        stalled = true;
        failures.push(`[after call #${n + 1} of ${cases.length}] server unhealthy, the rest were not sent: ${sick}`);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return failures;
};

const report = (failures: readonly string[], server: FuzzServer): string =>
  `${failures.length} failing call(s):\n${failures.slice(0, 25).join("\n")}${failures.length > 25 ? `\n… and ${failures.length - 25} more` : ""}\nserver log (last lines):\n${server.log
    .filter((l) => l.trim())
    .slice(-6)
    .map((l) => l.slice(0, 400))
    .join("\n")}`;

/** The server still works: Ingest + Flush + Query over gRPC return the text, and HTTP /healthz is 200. */
const roundTrip = async (server: FuzzServer, tag: string): Promise<void> => {
  assert.equal(server.exited(), false, "the server process exited");
  const health = await rawRequest(server.http, { method: "GET", path: "/healthz", timeoutMs: 10_000 });
  assert.equal(health.status, 200);
  const client = new MemoryGrpcClient({ address: server.grpc, apiKey: KEY_A, deadlineMs: DEADLINE_MS });
  try {
    const marker = `Quibbleton${tag}`;
    const conversation = `grpc-health-${tag}`;
    const summary = await client.ingest([
      {
        conversation,
        speaker: "Ana",
        text: `Ana adopted a dog called ${marker} last Saturday.`,
        timestamp: "2024-05-06T10:15:00Z",
      },
    ]);
    assert.equal(summary.accepted, 1);
    await client.flush(conversation);
    // The pipeline runs after the reply: poll the query (bounded) until the text is indexed.
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const r = await client.query({ question: `What dog did Ana adopt, ${marker}?`, conversation });
      if (r.context.includes(marker)) return;
      await new Promise((res) => setTimeout(res, 200));
    }
    assert.fail("the ingested text never came back from Query");
  } finally {
    client.close();
  }
};

describe("gRPC fuzz: generated messages against every method", { timeout: 600_000 }, () => {
  let server: FuzzServer;
  let client: Client;
  before(async () => {
    server = await startFuzzServer();
    client = new Client(server.grpc, credentials.createInsecure(), {
      "grpc.max_send_message_length": 32 * 1024 * 1024,
    });
  });
  after(async () => {
    client?.close();
    await server?.stop();
  });

  it("answers 300 generated calls (unary and Ingest streams, some cancelled) without INTERNAL/UNKNOWN, in time", async () => {
    const cases = fc.sample(structuredCase(), { seed: SEED, numRuns: 300 });
    const failures = await runAll(server, client, cases, 4);
    if (failures.length > 0) assert.fail(report(failures, server));
  });

  it("answers 60 calls of raw bytes (random, or valid messages flipped and cut) with no status but the deserialiser's", async () => {
    const cases = fc.sample(rawCase(), { seed: SEED + 1, numRuns: 60 });
    const failures = await runAll(server, client, cases, 4);
    if (failures.length > 0) assert.fail(report(failures, server));
  });

  it("is healthy afterwards: Ingest + Flush + Query return the ingested text", async () => {
    await roundTrip(server, "grpc");
  });

  it("answers huge and pathological strings in every field in time, and keeps answering", async () => {
    const FIELDS: Record<string, (s: string) => GrpcCase> = {
      "Ingest text": (s) => ingestOne({ text: s }),
      "Ingest speaker": (s) => ingestOne({ speaker: s }),
      "Ingest conversation": (s) => ingestOne({ conversation: s }),
      "Ingest turn_id": (s) => ingestOne({ turn_id: s }),
      "Ingest metadata value": (s) => ingestOne({ metadata: { note: s } }),
      "Query question": (s) => unaryOne("Query", { question: s }),
      "Query as_of": (s) => unaryOne("Query", { question: "what dog?", as_of: s }),
      "ListRecords entity": (s) => unaryOne("ListRecords", { entity: s }),
      "ListRecords cursor": (s) => unaryOne("ListRecords", { cursor: s }),
      "GetRecord id": (s) => unaryOne("GetRecord", { id: s }),
      "Flush conversation": (s) => unaryOne("Flush", { conversation: s }),
    };
    const ingestOne = (fields: Record<string, unknown>): GrpcCase => ({
      label: "",
      run: (c) =>
        callIngest(
          c,
          [
            serialize("Ingest")({
              conversation: "huge",
              speaker: "Ana",
              text: "hello there",
              timestamp: "2024-05-06T10:15:00Z",
              ...fields,
            }),
          ],
          authMd(),
        ),
    });
    const unaryOne = (m: MethodName, msg: object): GrpcCase => ({
      label: "",
      run: (c) => callUnary(c, m, serialize(m)(msg), authMd()),
    });
    const picks = fc.sample(fc.tuple(hugeStringName(), fc.constantFrom(...Object.keys(FIELDS))), {
      seed: SEED + 2,
      numRuns: 25,
    });
    const failures: string[] = [];
    for (const [name, field] of picks) {
      const c = (FIELDS[field] as (s: string) => GrpcCase)(HUGE_STRINGS[name] as string);
      const problem = problemOf(c, await c.run(client));
      if (problem) failures.push(`[${name} in ${field}]\n   -> ${problem}`);
      // Attribute an asynchronous stall (pipeline work after the reply) to the call that caused it.
      const sick = await unhealthy(server);
      if (sick) {
        failures.push(`[${name} in ${field}]\n   -> server unhealthy afterwards (the rest were not sent): ${sick}`);
        break;
      }
    }
    if (failures.length > 0) assert.fail(report(failures, server));
    await roundTrip(server, "huge");
  });
});
