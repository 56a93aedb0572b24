import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { recordId } from "../../services/core/ids.ts";
import { metricsUsageSink } from "../../services/core/llm-metering.ts";
import type { Llm, LlmRequest, LlmResponse, LlmUsageEvent, MeteredLlmRequest } from "../../services/core/ports.ts";
import type { ContextItem } from "../../services/core/query-types.ts";
import { countTokens } from "../../services/core/tokens.ts";
import {
  type DisambiguationContext,
  DisambiguationContextSchema,
  MemoryRecordSchema,
  type Segment,
} from "../../services/core/types.ts";
import { contextTokens, emptyContext } from "../../services/encoder/context.ts";
import { LlmEncoder, LlmEncoderError } from "../../services/encoder/llm-encoder.ts";
import { InvalidEncoderOutput, parseJsonObject, validateAnswer } from "../../services/encoder/llm-parse.ts";
import { annotateDates, encoderJsonSchema, encoderUserPrompt } from "../../services/encoder/llm-prompt.ts";
import { Metrics } from "../../services/platform/metrics.ts";
import { answerQuestion, LlmAnswerError, withAnswerCost } from "../../services/query/answer.ts";
import { LlmPlanner, planFromAnswer } from "../../services/query/llm-planner.ts";
import { OPEN_START } from "../../services/query/question-time.ts";

/** Answers from a script, one per call; records every request. */
class ScriptedLlm implements Llm {
  readonly id = "scripted";
  readonly requests: LlmRequest[] = [];
  constructor(private readonly answers: (string | Error)[]) {}
  async complete(req: LlmRequest): Promise<LlmResponse> {
    this.requests.push(req);
    const next = this.answers.shift();
    if (next === undefined) throw new Error("script exhausted");
    if (next instanceof Error) throw next;
    return { text: next, usage: { inputTokens: countTokens(req.system) + countTokens(req.user), outputTokens: 7 } };
  }
}

const TS = "2023-05-08T13:56:00.000Z";
const seg = (turns: readonly [string, string, string][], id = "seg-1"): Segment => ({
  id,
  tenant: "acme",
  conversation: "conv-1",
  sessionId: "s1",
  turns: turns.map(([turnId, speaker, text]) => ({
    turnId,
    speaker,
    role: "user" as const,
    text,
    compressed: text,
    timestamp: TS,
    sessionId: "s1",
  })),
  start: TS,
  end: TS,
  tokens: 40,
  closedBy: "gate",
  decisions: [],
});

const SEGMENT = seg([
  ["D1:1", "Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."],
  ["D1:2", "Melanie", "Wow Caro, that's great! I'm going camping with my kids next month."],
]);

const record = (over: Record<string, unknown> = {}) => ({
  type: "event",
  text: "Caroline attended an LGBTQ support group on 2023-05-07.",
  entities: [{ name: "Caroline", kind: "person", aliases: ["Caro"] }],
  topics: ["Support Group"],
  time: { at: "2023-05-07", from: null, to: null },
  turnIds: ["D1:1"],
  ...over,
});
const answer = (records: unknown[], extra: Record<string, unknown> = {}) =>
  JSON.stringify({ records, aliases: [{ alias: "Caro", name: "Caroline" }], referents: [], ...extra });

describe("LLM encoder: prompt", () => {
  it("shows the session date, the capped context and each turn with its id, speaker and resolved dates", () => {
    const ctx: DisambiguationContext = {
      aliases: { Mel: "Melanie" },
      referents: { she: "Caroline" },
      speakers: ["Caroline", "Melanie"],
      recentRecords: ["Melanie painted a lake sunrise in 2022."],
    };
    const user = encoderUserPrompt([SEGMENT], ctx, { contextTokenCap: 300, maxTurnTokens: 600 });
    assert.match(user, /^Session date: 2023-05-08 \(Monday\)/);
    assert.match(user, /Aliases: Mel = Melanie/);
    assert.match(user, /Referents: she = Caroline/);
    assert.match(user, /- Melanie painted a lake sunrise in 2022\./);
    assert.match(
      user,
      /\[D1:1\] Caroline \(2023-05-08\): I went to a LGBTQ support group yesterday \[yesterday = on 2023-05-07\]/,
    );
    assert.match(user, /\[D1:2\] Melanie \(2023-05-08\): .*next month \[next month = in June 2023\]/);
  });

  it("keeps the context it sends under its token cap", () => {
    const big: DisambiguationContext = {
      aliases: {},
      referents: {},
      speakers: ["Caroline", "Melanie"],
      recentRecords: Array.from({ length: 30 }, (_, i) => `Record number ${i} says something long enough to count.`),
    };
    const user = encoderUserPrompt([SEGMENT], big, { contextTokenCap: 80, maxTurnTokens: 600 });
    assert.ok(!user.includes("Record number 0 "), "the oldest records are evicted");
    assert.ok(user.includes("Record number 29 "), "the newest stay");
  });

  it("annotates relative dates only (absolute ones stay as written)", () => {
    assert.equal(annotateDates("I moved on 2022-03-01.", TS), "I moved on 2022-03-01.");
    assert.match(annotateDates("We met two days ago.", TS), /two days ago \[two days ago = on 2023-05-06\]/);
  });

  it("the schema lists exactly the segment's turn ids and only strict-mode-friendly objects", () => {
    const s = encoderJsonSchema(["D1:1", "D1:2"], { maxRecords: 5, maxTextChars: 300 }) as {
      properties: { records: { items: { properties: { turnIds: { items: { enum: string[] } } } } } };
    };
    assert.deepEqual(s.properties.records.items.properties.turnIds.items.enum, ["D1:1", "D1:2"]);
  });
});

describe("LLM encoder: parse and validate", () => {
  const allowed = new Set(["D1:1", "D1:2"]);
  it("accepts a valid answer, also inside a code fence", () => {
    const a = validateAnswer(`\`\`\`json\n${answer([record()])}\n\`\`\``, allowed);
    assert.equal(a.records.length, 1);
    assert.equal(a.records[0]!.time.at, "2023-05-07");
  });
  it("rejects turn ids outside the segment, naming them", () => {
    assert.throws(
      () => validateAnswer(answer([record({ turnIds: ["D9:9"] })]), allowed),
      (e: unknown) => e instanceof InvalidEncoderOutput && /"D9:9" not in the segment/.test(e.message),
    );
  });
  it("rejects broken JSON, a wrong type, a missing text and a bad date", () => {
    assert.throws(() => parseJsonObject("{records: ["), InvalidEncoderOutput);
    assert.throws(() => validateAnswer(answer([record({ type: "gossip" })]), allowed), InvalidEncoderOutput);
    assert.throws(() => validateAnswer(answer([record({ text: "" })]), allowed), InvalidEncoderOutput);
    assert.throws(
      () => validateAnswer(answer([record({ time: { at: "last week", from: null, to: null } })]), allowed),
      /not a YYYY-MM-DD date/,
    );
    assert.throws(() => validateAnswer(answer([record({ turnIds: [] })]), allowed), InvalidEncoderOutput);
  });
});

describe("LLM encoder: encode", () => {
  it("builds valid records: ids by recordId, sources inside the segment, absolute times, context updated", async () => {
    const llm = new ScriptedLlm([
      answer(
        [
          record(),
          record({
            type: "plan",
            text: "Melanie is going camping with her kids next month",
            entities: [{ name: "Mel", kind: "person", aliases: [] }],
            topics: ["camping", "Camping"],
            time: { at: null, from: null, to: null },
            turnIds: ["D1:2", "D1:1", "D1:2"],
          }),
        ],
        { aliases: [{ alias: "Mel", name: "Melanie" }], referents: [{ pronoun: "She", name: "Caroline" }] },
      ),
    ]);
    const enc = new LlmEncoder(llm);
    const out = await enc.encode(SEGMENT, emptyContext());
    assert.equal(out.records.length, 2);
    for (const r of out.records) {
      MemoryRecordSchema.parse(r);
      assert.equal(r.id, recordId("acme", r.text));
      for (const t of r.source.turnIds) assert.ok(SEGMENT.turns.some((x) => x.turnId === t));
      assert.equal(r.source.segmentId, "seg-1");
    }
    const [a, b] = out.records;
    assert.deepEqual(a!.time, { at: "2023-05-07T00:00:00.000Z" });
    assert.deepEqual(a!.topics, ["support group"]);
    // Leftover relative dates are resolved against the cited turn's time; the time follows.
    assert.equal(b!.text, "Melanie is going camping with her kids in June 2023.");
    assert.deepEqual(b!.time, { from: "2023-06-01T00:00:00.000Z", to: "2023-06-30T23:59:59.999Z" });
    assert.deepEqual(b!.source.turnIds, ["D1:1", "D1:2"]);
    assert.deepEqual(b!.source.speakers, ["Caroline", "Melanie"]);
    assert.deepEqual(b!.topics, ["camping"]);
    // Aliases from the answer canonicalise entities ("Mel" -> "Melanie", with the alias kept).
    assert.deepEqual(
      b!.entities.find((e) => e.name === "Melanie"),
      { name: "Melanie", kind: "person", aliases: ["Mel"] },
    );
    DisambiguationContextSchema.parse(out.context);
    assert.equal(out.context.aliases.Mel, "Melanie");
    assert.equal(out.context.referents.she, "Caroline");
    assert.deepEqual(out.context.speakers, ["Caroline", "Melanie"]);
    assert.deepEqual(out.context.recentRecords, [a!.text, b!.text]);
    assert.equal(out.cost.llmCalls, 1);
    assert.equal(out.cost.outputTokens, 7);
    assert.ok(out.cost.inputTokens > 100);
    const req = llm.requests[0] as MeteredLlmRequest;
    assert.deepEqual(req.meta, { stage: "encoder", tenant: "acme" });
    assert.ok(req.jsonSchema);
  });

  it("retries once on invalid output (with the reason) and sums both calls' cost", async () => {
    const llm = new ScriptedLlm(["not json at all", answer([record()])]);
    const out = await new LlmEncoder(llm).encode(SEGMENT, emptyContext());
    assert.equal(out.records.length, 1);
    assert.equal(out.cost.llmCalls, 2);
    assert.equal(out.cost.outputTokens, 14);
    assert.match(llm.requests[1]!.user, /Your previous answer was rejected: not valid JSON/);
  });

  it("retries on a turn id outside the segment, then throws with the raw response", async () => {
    const bad = answer([record({ turnIds: ["D7:1"] })]);
    const llm = new ScriptedLlm([bad, bad]);
    await assert.rejects(new LlmEncoder(llm).encode(SEGMENT, emptyContext()), (e: unknown) => {
      assert.ok(e instanceof LlmEncoderError);
      assert.equal(e.raw, bad);
      assert.match(e.message, /invalid output after 2 attempts: records\.0\.turnIds: "D7:1" not in the segment/);
      assert.ok(e.message.includes(bad), "the message (what the dead-letter store keeps) carries the raw response");
      assert.equal(e.cost.llmCalls, 2);
      return true;
    });
  });

  it("a transport error is not retried by the encoder (the adapter retries) and propagates", async () => {
    const llm = new ScriptedLlm([new Error("HTTP 500 (4 attempts)")]);
    await assert.rejects(new LlmEncoder(llm).encode(SEGMENT, emptyContext()), /HTTP 500/);
    assert.equal(llm.requests.length, 1);
  });

  it("keeps the context under its cap across many segments", async () => {
    const cap = 120;
    const longText = (i: number) =>
      `Caroline told Melanie about the ${i}th long story with many details and names in it.`;
    const answers = Array.from({ length: 6 }, (_, i) =>
      answer([record({ text: longText(i) }), record({ text: `${longText(i)} Again.`, turnIds: ["D1:2"] })], {
        aliases: [{ alias: `Alias${i}`, name: `Person Number ${i}` }],
        referents: [{ pronoun: `role ${i}`, name: `Person Number ${i}` }],
      }),
    );
    const enc = new LlmEncoder(new ScriptedLlm(answers), { contextTokenCap: cap });
    let ctx = emptyContext();
    for (let i = 0; i < 6; i++) {
      ctx = (await enc.encode(SEGMENT, ctx)).context;
      assert.ok(contextTokens(ctx) <= cap, `context ${contextTokens(ctx)} tokens > cap ${cap}`);
    }
    // Eviction order (capContext): oldest record texts first, then the oldest aliases and referents.
    assert.equal(ctx.aliases.Alias5, "Person Number 5", "the newest alias is kept");
    assert.equal(ctx.aliases.Alias0, undefined, "the oldest alias is evicted");
  });

  it("batches several segments into one call and splits the records back", async () => {
    const s2 = seg([["D1:3", "Caroline", "I love painting sunsets."]], "seg-2");
    const llm = new ScriptedLlm([
      answer([
        record(),
        record({ type: "preference", text: "Caroline loves painting sunsets.", turnIds: ["D1:3"], time: {} }),
        record({ text: "A record that spans both segments.", turnIds: ["D1:2", "D1:3"] }),
      ]),
    ]);
    const enc = new LlmEncoder(llm, { batchSegments: 4 });
    const out = await enc.encodeBatch([SEGMENT, s2], emptyContext());
    assert.equal(llm.requests.length, 1);
    assert.match(llm.requests[0]!.user, /Segment 1 of 2:[\s\S]*Segment 2 of 2:\n\[D1:3\]/);
    assert.deepEqual(
      out.map((o) => o.records.map((r) => r.source.turnIds)),
      [[["D1:1"], ["D1:2"]], [["D1:3"]]],
    );
    assert.equal(out[0]!.cost.llmCalls, 1);
    assert.equal(out[1]!.cost.llmCalls, 0);
  });
});

describe("LLM planner", () => {
  const input = {
    question: "When did Caroline go to the LGBTQ support group?",
    knownEntities: ["Caroline", "Melanie"],
    knownTopics: ["support group", "camping"],
    now: new Date("2023-06-01T00:00:00Z"),
  };
  const plan = (over: Record<string, unknown> = {}) =>
    JSON.stringify({
      questionType: "temporal",
      rewrites: ["Caroline LGBTQ support group date"],
      entities: ["caroline", "Bob"],
      topics: ["Support Group"],
      timeWindow: { from: "2023-05-31", to: "2023-05-01" },
      routes: ["lexical", "entity", "time"],
      ...over,
    });

  it("validates the plan: known entities/topics, ordered window, routes completed", () => {
    const p = planFromAnswer(plan(), input);
    assert.deepEqual(p.entities, ["Caroline"]);
    assert.deepEqual(p.topics, ["support group"]);
    assert.deepEqual(p.timeWindow, { from: "2023-05-01T00:00:00.000Z", to: "2023-05-31T23:59:59.999Z" });
    assert.deepEqual(p.routes, ["dense", "lexical", "entity", "topic", "time"]);
    assert.equal(p.questionType, "temporal");
  });

  it("opens the window on the side the plan leaves null, as the deterministic planner does", () => {
    const asOf = planFromAnswer(plan({ timeWindow: { from: null, to: "2023-05-15" } }), input);
    assert.deepEqual(asOf.timeWindow, { from: OPEN_START, to: "2023-05-15T23:59:59.999Z" });
    assert.ok(asOf.routes.includes("time"));
    const since = planFromAnswer(plan({ timeWindow: { from: "2023-05-15", to: null } }), input);
    assert.deepEqual(since.timeWindow, { from: "2023-05-15T00:00:00.000Z", to: "2023-06-01T00:00:00.000Z" });
    // A start after now with no end: that day.
    const ahead = planFromAnswer(plan({ timeWindow: { from: "2023-07-04", to: null } }), input);
    assert.deepEqual(ahead.timeWindow, { from: "2023-07-04T00:00:00.000Z", to: "2023-07-04T23:59:59.999Z" });
    const one = planFromAnswer(plan({ timeWindow: { from: "2023-05-15", to: "2023-05-15" } }), input);
    assert.deepEqual(one.timeWindow, { from: "2023-05-15T00:00:00.000Z", to: "2023-05-15T23:59:59.999Z" });
    const none = planFromAnswer(plan({ timeWindow: { from: null, to: null } }), input);
    assert.equal(none.timeWindow, undefined);
    assert.ok(!none.routes.includes("time"));
  });

  it("falls back to the deterministic planner on invalid output, counting the failed call", async () => {
    const llm = new ScriptedLlm([plan({ routes: ["telepathy"] })]);
    const planner = new LlmPlanner(llm);
    const out = await planner.plan({ ...input, tenant: "acme" });
    assert.equal(out.cost.llmCalls, 1);
    assert.equal(out.cost.outputTokens, 7);
    assert.ok(out.fallback);
    assert.deepEqual(out.plan.entities, ["Caroline"]);
    assert.equal((llm.requests[0] as MeteredLlmRequest).meta?.tenant, "acme");
  });

  it("falls back on a transport error too", async () => {
    const out = await new LlmPlanner(new ScriptedLlm([new Error("timed out")])).plan(input);
    assert.equal(out.plan.questionType, "temporal");
    assert.equal(out.cost.llmCalls, 1);
    assert.match(out.fallback ?? "", /timed out/);
  });
});

describe("answer step", () => {
  const item = (id: string, text: string): ContextItem => ({
    kind: "record",
    id,
    text,
    date: "2023-05-07T00:00:00.000Z",
    conversation: "conv-1",
    turnIds: ["D1:1"],
    speakers: ["Caroline"],
    routes: [],
    fusedScore: 1,
    tokens: 10,
  });
  const items = [item("r1", "Caroline went to a support group on 2023-05-07."), item("r2", "Melanie camps.")];

  it("returns the answer and the ids of the items it cites", async () => {
    const llm = new ScriptedLlm([JSON.stringify({ answer: "On 2023-05-07", used: [1] })]);
    const a = await answerQuestion(llm, "When?", { items });
    assert.equal(a.answer, "On 2023-05-07");
    assert.deepEqual(a.usedIds, ["r1"]);
    assert.match(llm.requests[0]!.user, /\[1\] \(2023-05-07; Caroline\) Caroline went/);
    const cost = withAnswerCost(
      { embeddingCalls: 1, llmCalls: 1, inputTokens: 10, outputTokens: 2, ms: 1, routeMs: {} },
      a.cost,
    );
    assert.equal(cost.llmCalls, 2);
  });

  it("rejects a citation outside the context", async () => {
    const llm = new ScriptedLlm([JSON.stringify({ answer: "x", used: [3] })]);
    await assert.rejects(answerQuestion(llm, "When?", { items }), LlmAnswerError);
  });
});

describe("usage sink into Prometheus metrics", () => {
  it("counts calls and tokens per stage and tenant", async () => {
    const m = new Metrics({ defaultMetrics: false });
    const e: LlmUsageEvent = {
      stage: "encoder",
      tenant: "acme",
      llm: "x",
      usage: { inputTokens: 120, outputTokens: 30 },
      ms: 250,
      ok: true,
      attempts: 1,
    };
    metricsUsageSink(m)(e);
    const text = await m.render();
    assert.match(text, /memory_llm_calls_total\{stage="encoder",tenant="acme"\} 1/);
    assert.match(text, /memory_llm_tokens_total\{stage="encoder",tenant="acme",direction="input"\} 120/);
    assert.match(text, /memory_stage_latency_seconds_count\{stage="llm:encoder"\} 1/);
  });
});
