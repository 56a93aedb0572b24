// `memory ask`: retrieval from the embedded engine, then one answer call to the configured LLM
// (here an OpenAI-compatible server on 127.0.0.1 that answers from the memories it is sent),
// citing the items used; without an LLM it is a usage error before anything opens.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it, mock } from "node:test";
import { askFromMemory, formatAsk, NO_LLM_MESSAGE, runAskCommand } from "../../services/cli/ask.ts";
import { UsageError } from "../../services/cli/usage.ts";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { Llm, LlmResponse, MeteredLlmRequest } from "../../services/core/ports.ts";
import { openEmbeddedEngine } from "../../services/embedded/open.ts";

const TS = "2023-05-08T13:56:00.000Z";
const TURNS = [
  ["Melanie", "I painted a lake sunrise last year."],
  ["Caroline", "I started pottery classes this month."],
].map(([speaker, text], i) => ({
  turnId: `D1:${i + 1}`,
  speaker: speaker!,
  role: "user" as const,
  text: text!,
  timestamp: TS,
  sessionId: "s1",
}));

/** The answer a model would give: cites the first memory line that mentions "paint". */
const answerFrom = (user: string): string => {
  const lines = user.split("\n").filter((l) => /^\[\d+\]/.test(l));
  const hit = lines.find((l) => /paint/i.test(l));
  return JSON.stringify(
    hit ? { answer: "A lake sunrise", used: [Number(/^\[(\d+)\]/.exec(hit)![1])] } : { answer: "unknown", used: [] },
  );
};

class AnsweringLlm implements Llm {
  readonly id = "answering";
  readonly requests: MeteredLlmRequest[] = [];
  async complete(req: MeteredLlmRequest): Promise<LlmResponse> {
    this.requests.push(req);
    return { text: answerFrom(req.user), usage: { inputTokens: 10, outputTokens: 5 } };
  }
}

describe("memory ask", () => {
  const dir = mkdtempSync(join(tmpdir(), "memory-ask-"));
  const env = { MEMORY_CONFIG: join(dir, "no-such-config.json") };
  let server: Server;
  let baseUrl = "";
  const seen: string[] = [];

  before(async () => {
    // Memories of tenant acme, in the data folder every test of this suite reads.
    const opened = await openEmbeddedEngine(loadConfig({ dataDir: join(dir, "data"), modelDir: dir }, env), {
      embedder: new HashingEmbedder(),
    });
    try {
      await opened.engine.ingest("acme", "conv-1", TURNS);
      await opened.engine.flush("acme", "conv-1");
      await opened.engine.drain();
    } finally {
      await opened.close();
    }
    server = createServer((req, res) => {
      let raw = "";
      req.on("data", (c: Buffer) => {
        raw += c.toString("utf8");
      });
      req.on("end", () => {
        const body = JSON.parse(raw) as { messages: { content: string }[] };
        const user = body.messages[1]?.content ?? "";
        seen.push(user);
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            id: "chatcmpl-1",
            object: "chat.completion",
            created: 1_700_000_000,
            model: "test-model",
            choices: [{ index: 0, message: { role: "assistant", content: answerFrom(user) }, finish_reason: "stop" }],
            usage: { prompt_tokens: 40, completion_tokens: 8, total_tokens: 48 },
          }),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers from the retrieved context, cites the items used and books the call to the tenant", async () => {
    const opened = await openEmbeddedEngine(loadConfig({ dataDir: join(dir, "data"), modelDir: dir }, env), {
      embedder: new HashingEmbedder(),
    });
    try {
      const llm = new AnsweringLlm();
      const a = await askFromMemory(opened.engine, llm, "acme", { question: "What did Melanie paint?", budget: 1000 });
      assert.equal(a.answer, "A lake sunrise");
      assert.equal(a.used.length, 1);
      assert.match(a.used[0]!.text, /lake sunrise/);
      assert.ok(a.result.items.some((it) => it.id === a.used[0]!.id));
      assert.equal(llm.requests.length, 1);
      assert.deepEqual(llm.requests[0]!.meta, { stage: "answer", tenant: "acme" });
      assert.equal(a.cost.llmCalls, a.result.cost.llmCalls + 1);
      assert.equal(a.cost.inputTokens, a.result.cost.inputTokens + 10);
      // Dated by the event ("last year" from 2023-05-08), not by when it was said.
      assert.match(formatAsk(a), /^A lake sunrise\n\nfrom:\n {2}- \(2022-\d\d-\d\d; Melanie\) .*lake sunrise/);

      // Another tenant's memory is not this tenant's context.
      const other = await askFromMemory(opened.engine, llm, "other", {
        question: "What did Melanie paint?",
        budget: 1000,
      });
      assert.equal(other.result.items.length, 0);
      assert.equal(other.answer, "unknown");
      assert.match(formatAsk(other), /\(no memory cited\)/);
    } finally {
      await opened.close();
    }
  });

  it("runs through the configured OpenAI-compatible LLM and prints the answer with its sources", async () => {
    const config = loadConfig(
      { dataDir: join(dir, "data"), modelDir: dir },
      { ...env, MEMORY_LLM_PROVIDER: "openai", MEMORY_LLM_BASE_URL: baseUrl, MEMORY_LLM_MODEL: "test-model" },
    );
    const log = mock.method(console, "log", () => {});
    try {
      await runAskCommand(
        config,
        { question: "What did Melanie paint?", budget: 1000 },
        { tenant: "acme" },
        { embedder: new HashingEmbedder() },
      );
      await runAskCommand(
        config,
        { question: "What did Melanie paint?", budget: 1000 },
        { tenant: "acme", json: true },
        { embedder: new HashingEmbedder() },
      );
      const [text, json] = log.mock.calls.map((c) => String(c.arguments[0]));
      assert.match(text!, /^A lake sunrise\n\nfrom:\n.*lake sunrise/);
      const parsed = JSON.parse(json!) as { answer: string; used: string[]; cost: { llmCalls: number } };
      assert.equal(parsed.answer, "A lake sunrise");
      assert.equal(parsed.used.length, 1);
      assert.equal(parsed.cost.llmCalls, 1);
    } finally {
      log.mock.restore();
    }
    assert.equal(seen.length, 2);
    assert.match(seen[0]!, /Question: What did Melanie paint\?/);
  });

  it("says that an LLM must be configured when none is, before opening anything", async () => {
    const empty = join(dir, "empty");
    const config = loadConfig({ dataDir: empty, modelDir: dir }, env);
    assert.equal(config.llm.provider, "none");
    await assert.rejects(
      runAskCommand(config, { question: "What did Melanie paint?", budget: 1000 }, { tenant: "acme" }),
      (e: unknown) => e instanceof UsageError && e.message === NO_LLM_MESSAGE,
    );
    assert.match(NO_LLM_MESSAGE, /needs an LLM.*MEMORY_LLM_PROVIDER/);
    assert.ok(!existsSync(empty) || readdirSync(empty).length === 0);
  });
});
