/**
 * The OpenAI-compatible adapter against a real HTTP server (node:http on 127.0.0.1, port 0) that
 * speaks the chat-completions API: retries, structured output, usage accounting, timeouts, and
 * the LLM encoder / planner wired through config into the embedded engine.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { createLlm } from "../../services/core/adapters/llm-factory.ts";
import { OpenAiLlm, retryAfterMs } from "../../services/core/adapters/openai/llm.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { LlmUsageEvent } from "../../services/core/ports.ts";
import { countTokens } from "../../services/core/tokens.ts";
import type { Segment } from "../../services/core/types.ts";
import { openEmbeddedEngine } from "../../services/embedded/open.ts";
import { emptyContext } from "../../services/encoder/context.ts";
import { LlmEncoder, LlmEncoderError } from "../../services/encoder/llm-encoder.ts";
import { Metrics } from "../../services/platform/metrics.ts";

interface ChatBody {
  model: string;
  messages: { role: string; content: string }[];
  max_tokens?: number;
  response_format?: { type: string; json_schema: { name: string; strict: boolean; schema: Record<string, unknown> } };
}
interface Seen {
  body: ChatBody;
  auth: string | undefined;
}
type Handler = (req: IncomingMessage, res: ServerResponse, body: ChatBody) => void;

const completion = (content: string, usage?: { prompt_tokens: number; completion_tokens: number }) =>
  JSON.stringify({
    id: "chatcmpl-1",
    object: "chat.completion",
    created: 1_700_000_000,
    model: "test-model",
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
    ...(usage ? { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } : {}),
  });
const ok =
  (content: string, usage?: { prompt_tokens: number; completion_tokens: number }): Handler =>
  (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(completion(content, usage));
  };
const status =
  (code: number, headers: Record<string, string> = {}): Handler =>
  (_req, res) => {
    res.writeHead(code, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify({ error: { message: `status ${code}`, type: "test" } }));
  };
const never: Handler = () => {
  // never answers: the client's timeout must fire
};

let server: Server;
let baseUrl: string;
let script: Handler[] = [];
let fallback: Handler | undefined;
let seen: Seen[] = [];

before(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c: Buffer) => {
      raw += c.toString("utf8");
    });
    req.on("end", () => {
      if (req.url !== "/v1/chat/completions") {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(raw) as ChatBody;
      seen.push({ body, auth: req.headers.authorization });
      const h = script.shift() ?? fallback;
      if (!h) status(500)(req, res, body);
      else h(req, res, body);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});
beforeEach(() => {
  script = [];
  fallback = undefined;
  seen = [];
});

const llm = (over: Partial<ConstructorParameters<typeof OpenAiLlm>[0]> = {}, events: LlmUsageEvent[] = []) =>
  new OpenAiLlm({
    model: "test-model",
    baseUrl,
    apiKey: "sk-test",
    timeoutMs: 2000,
    maxRetries: 3,
    backoffMs: 10,
    usageSink: (e) => events.push(e),
    ...over,
  });

const TS = "2023-05-08T13:56:00.000Z";
const SEGMENT: Segment = {
  id: "seg-1",
  tenant: "acme",
  conversation: "conv-1",
  sessionId: "s1",
  turns: [
    {
      turnId: "D1:1",
      speaker: "Caroline",
      role: "user",
      text: "I went to a support group yesterday.",
      compressed: "went support group yesterday",
      timestamp: TS,
      sessionId: "s1",
    },
    {
      turnId: "D1:2",
      speaker: "Melanie",
      role: "user",
      text: "That's great!",
      compressed: "great",
      timestamp: TS,
      sessionId: "s1",
    },
  ],
  start: TS,
  end: TS,
  tokens: 20,
  closedBy: "gate",
  decisions: [],
};
const VALID = JSON.stringify({
  records: [
    {
      type: "event",
      text: "Caroline went to a support group on 2023-05-07.",
      entities: [{ name: "Caroline", kind: "person", aliases: [] }],
      topics: ["support group"],
      time: { at: "2023-05-07", from: null, to: null },
      turnIds: ["D1:1"],
    },
  ],
  aliases: [],
  referents: [],
});

describe("OpenAI-compatible adapter", () => {
  it("sends system + user, the JSON schema as strict structured output, and max_tokens", async () => {
    script = [ok('{"a":1}', { prompt_tokens: 10, completion_tokens: 3 })];
    const res = await llm().complete({
      system: "sys",
      user: "hello",
      jsonSchema: {
        type: "object",
        additionalProperties: false,
        required: ["a"],
        properties: { a: { oneOf: [{ type: "integer" }, { type: "null" }] } },
      },
      maxTokens: 77,
    });
    assert.equal(res.text, '{"a":1}');
    const { body, auth } = seen[0]!;
    assert.equal(auth, "Bearer sk-test");
    assert.equal(body.model, "test-model");
    assert.deepEqual(
      body.messages.map((m) => [m.role, m.content]),
      [
        ["system", "sys"],
        ["user", "hello"],
      ],
    );
    assert.equal(body.max_tokens, 77);
    assert.equal(body.response_format?.type, "json_schema");
    assert.equal(body.response_format?.json_schema.strict, true);
    // oneOf is sent as anyOf (the Structured Outputs dialect)
    assert.match(JSON.stringify(body.response_format?.json_schema.schema), /"anyOf"/);
  });

  it("retries a 429 (honouring Retry-After) and then succeeds", async () => {
    const events: LlmUsageEvent[] = [];
    script = [status(429, { "retry-after": "0" }), status(503), ok("fine", { prompt_tokens: 5, completion_tokens: 1 })];
    const res = await llm({}, events).complete({ system: "s", user: "u" });
    assert.equal(res.text, "fine");
    assert.equal(seen.length, 3);
    assert.equal(events.length, 1);
    assert.equal(events[0]!.attempts, 3);
    assert.equal(events[0]!.ok, true);
  });

  it("gives up after maxRetries on persistent 5xx, and never retries a 400", async () => {
    fallback = status(500);
    await assert.rejects(llm({ maxRetries: 2 }).complete({ system: "s", user: "u" }), /HTTP 500 \(3 attempts\)/);
    assert.equal(seen.length, 3);
    seen = [];
    fallback = status(400);
    await assert.rejects(llm({ maxRetries: 2 }).complete({ system: "s", user: "u" }), /HTTP 400 \(1 attempt\)/);
    assert.equal(seen.length, 1);
  });

  it("parses Retry-After in seconds, as an HTTP date and as retry-after-ms", () => {
    assert.equal(retryAfterMs(new Headers({ "retry-after": "2" })), 2000);
    assert.equal(retryAfterMs(new Headers({ "retry-after-ms": "150" })), 150);
    const now = Date.parse("2024-01-01T00:00:00Z");
    assert.equal(retryAfterMs(new Headers({ "retry-after": "Mon, 01 Jan 2024 00:00:03 GMT" }), now), 3000);
    assert.equal(retryAfterMs(new Headers({})), undefined);
  });

  it("honours the server's usage; without it counts what was sent and received with o200k", async () => {
    const events: LlmUsageEvent[] = [];
    script = [ok("four five six", { prompt_tokens: 1234, completion_tokens: 56 }), ok("four five six")];
    const a = await llm({}, events).complete({ system: "You are terse.", user: "Say three words." });
    assert.deepEqual(a.usage, { inputTokens: 1234, outputTokens: 56 });
    const schema = { type: "object", properties: { x: { type: "string" } } };
    const b = await llm({}, events).complete({
      system: "You are terse.",
      user: "Say three words.",
      jsonSchema: schema,
    });
    assert.deepEqual(b.usage, {
      inputTokens:
        countTokens("You are terse.") + countTokens("Say three words.") + countTokens(JSON.stringify(schema)),
      outputTokens: countTokens("four five six"),
    });
    assert.deepEqual(
      events.map((e) => [e.stage, e.tenant, e.usage.inputTokens]),
      [
        ["unattributed", "unknown", 1234],
        ["unattributed", "unknown", b.usage.inputTokens],
      ],
    );
  });

  it("times out with a clear error, bounded by timeout x attempts", async () => {
    fallback = never;
    const t0 = performance.now();
    await assert.rejects(
      llm({ timeoutMs: 300, maxRetries: 1 }).complete({ system: "s", user: "u" }),
      /test-model at http:\/\/127\.0\.0\.1:\d+\/v1: timed out after 300 ms \(2 attempts\)/,
    );
    const ms = performance.now() - t0;
    assert.equal(seen.length, 2);
    assert.ok(ms < 2500, `took ${ms} ms`);
  });
});

describe("LLM encoder over the OpenAI-compatible adapter", () => {
  it("invalid JSON, then valid: one retry, records built, both calls counted", async () => {
    const events: LlmUsageEvent[] = [];
    script = [
      ok("Sure! Here are the records: {records: [", { prompt_tokens: 400, completion_tokens: 12 }),
      ok(VALID, { prompt_tokens: 430, completion_tokens: 90 }),
    ];
    const out = await new LlmEncoder(llm({}, events)).encode(SEGMENT, emptyContext());
    assert.equal(out.records.length, 1);
    assert.deepEqual(out.records[0]!.source.turnIds, ["D1:1"]);
    assert.deepEqual(out.cost, { llmCalls: 2, inputTokens: 830, outputTokens: 102 });
    assert.equal(seen.length, 2);
    assert.match(seen[1]!.body.messages[1]!.content, /previous answer was rejected: not valid JSON/);
    assert.deepEqual(
      events.map((e) => [e.stage, e.tenant]),
      [
        ["encoder", "acme"],
        ["encoder", "acme"],
      ],
    );
    // The schema sent restricts turn ids to the segment's.
    assert.match(JSON.stringify(seen[0]!.body.response_format?.json_schema.schema), /"enum":\["D1:1","D1:2"\]/);
  });

  it("invalid twice: the error carries the raw response (for the dead-letter store)", async () => {
    const bad = '{"records":[{"type":"event","text":"x","entities":[],"topics":[],"time":{},"turnIds":["D9:1"]}]}';
    script = [ok(bad), ok(bad)];
    await assert.rejects(new LlmEncoder(llm()).encode(SEGMENT, emptyContext()), (e: unknown) => {
      assert.ok(e instanceof LlmEncoderError);
      assert.equal(e.raw, bad);
      assert.ok(e.message.includes(bad));
      assert.equal(e.cost.llmCalls, 2);
      return true;
    });
  });
});

/** A scripted model server: answers encoder and planner requests validly from what they carry. */
const modelServer: Handler = (_req, res, body) => {
  const schema = JSON.stringify(body.response_format?.json_schema.schema ?? {});
  const user = body.messages[1]?.content ?? "";
  let content: string;
  if (schema.includes("questionType")) {
    content = JSON.stringify({
      questionType: "single-hop",
      rewrites: ["painting"],
      entities: ["Melanie"],
      topics: [],
      timeWindow: { from: null, to: null },
      routes: ["dense", "lexical", "entity"],
    });
  } else {
    const turns = [...user.matchAll(/^\[([^\]]+)\] (\S+) \(([\d-]+)\): (.*)$/gm)];
    content = JSON.stringify({
      records: turns.map((m) => ({
        type: "fact",
        text: `${m[2]} said on ${m[3]}: ${m[4]}`,
        entities: [{ name: m[2], kind: "person", aliases: [] }],
        topics: ["chat"],
        time: { at: null, from: null, to: null },
        turnIds: [m[1]],
      })),
      aliases: [],
      referents: [],
    });
  }
  res.writeHead(200, { "content-type": "application/json" });
  res.end(completion(content, { prompt_tokens: countTokens(user), completion_tokens: countTokens(content) }));
};

describe("config -> embedded engine with the LLM encoder and planner", () => {
  it("picks them from config, counts construction and query cost, and reports to Prometheus", async () => {
    fallback = modelServer;
    const dir = mkdtempSync(join(tmpdir(), "llm-engine-"));
    const env = {
      MEMORY_LLM_PROVIDER: "openai",
      MEMORY_LLM_BASE_URL: baseUrl,
      MEMORY_LLM_MODEL: "test-model",
      MEMORY_LLM_API_KEY: "sk-from-env",
      MEMORY_LLM_ENCODER: "llm",
      MEMORY_LLM_PLANNER: "llm",
      MEMORY_CONFIG: join(dir, "none.json"),
    };
    const config = loadConfig({ dataDir: dir }, env);
    assert.equal(config.llm.provider, "openai");
    assert.equal(config.llm.apiKey, "sk-from-env");
    const metrics = new Metrics({ defaultMetrics: false });
    const opened = await openEmbeddedEngine(config, { embedder: new HashingEmbedder(), observer: metrics });
    try {
      const turns = [
        ["Melanie", "I painted a lake sunrise last year."],
        ["Caroline", "That is beautiful! I love it."],
        ["Melanie", "Thanks, painting relaxes me after work."],
        ["Caroline", "I started pottery classes this month."],
      ].map(([speaker, text], i) => ({
        turnId: `D1:${i + 1}`,
        speaker: speaker!,
        role: "user" as const,
        text: text!,
        timestamp: TS,
        sessionId: "s1",
      }));
      await opened.engine.ingest("acme", "conv-1", turns);
      await opened.engine.flush("acme", "conv-1");
      await opened.engine.drain();
      const c = opened.engine.construction;
      const encoderCalls = seen.filter((s) => !JSON.stringify(s.body.response_format).includes("questionType"));
      assert.ok(c.llmCalls >= 1);
      assert.equal(c.llmCalls, encoderCalls.length);
      assert.equal(
        c.inputTokens,
        encoderCalls.reduce((n, s) => n + countTokens(s.body.messages[1]!.content), 0),
      );
      assert.equal(encoderCalls[0]!.auth, "Bearer sk-from-env");
      const page = await opened.engine.listRecords("acme", { conversation: "conv-1", limit: 50 });
      assert.equal(page.records.length, 4);
      const q = await opened.engine.query("acme", { question: "What does Melanie paint?", conversation: "conv-1" });
      assert.equal(q.cost.llmCalls, 1);
      assert.ok(q.cost.inputTokens > 0);
      assert.deepEqual(q.plan.entities, ["Melanie"]);
      const text = await metrics.render();
      assert.match(text, new RegExp(`memory_llm_calls_total\\{stage="encoder",tenant="acme"\\} ${c.llmCalls}`));
      assert.match(text, /memory_llm_calls_total\{stage="planner",tenant="acme"\} 1/);
      assert.doesNotMatch(text, /memory_llm_calls_total\{[^}]*tenant="unknown"/);
      assert.match(
        text,
        new RegExp(
          `memory_construction_tokens_total\\{stage="[^"]+",tenant="acme",direction="input"\\} ${c.inputTokens}`,
        ),
      );
    } finally {
      await opened.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("createLlm builds nothing for provider none, and config rejects an LLM stage without a provider", async () => {
    const env = { MEMORY_CONFIG: "/nonexistent.json" };
    assert.equal(await createLlm(loadConfig({}, env).llm, { modelDir: "." }), undefined);
    assert.throws(() => loadConfig({}, { ...env, MEMORY_LLM_ENCODER: "llm" }), /needs llm\.provider/);
  });
});
