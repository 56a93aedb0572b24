/**
 * `memory ask <question>`: answers a question from memory with the configured LLM. The query
 * retrieves the packed, dated context as `memory query` does; one answer call
 * (query/answer.ts) then answers from that context only and cites the items it used.
 *
 * Without an LLM (llm.provider "none", the default) it is a usage error raised before anything
 * opens: `memory query` is the LLM-free way to the same context.
 */
import type { Command } from "commander";
import { openLlm } from "../composition/parts.ts";
import type { Config } from "../core/config.ts";
import type { MemoryService } from "../core/memory-service.ts";
import type { Llm } from "../core/ports.ts";
import type { ContextItem, QueryCost, QueryResult } from "../core/query-types.ts";
import type { QueryRequest } from "../core/requests.ts";
import { type OpenOptions, openEmbeddedEngine } from "../embedded/open.ts";
import { answerQuestion, withAnswerCost } from "../query/answer.ts";
import { queryRequestFromArgs, UsageError } from "./usage.ts";

export const NO_LLM_MESSAGE =
  "memory ask needs an LLM, and none is configured (llm.provider is none). Set MEMORY_LLM_PROVIDER=openai " +
  "with MEMORY_LLM_MODEL and MEMORY_LLM_API_KEY (MEMORY_LLM_BASE_URL for any OpenAI-compatible server), " +
  "or MEMORY_LLM_PROVIDER=local for a GGUF model (MEMORY_LLM_GGUF). `memory query` retrieves the context without an LLM.";

export interface AskResult {
  answer: string;
  /** The context items the answer cites, in the order it cites them. */
  used: ContextItem[];
  /** The retrieval behind the answer. */
  result: QueryResult;
  /** The query's cost with the answer call's added. */
  cost: QueryCost;
}

/** Retrieve, then answer from what was retrieved; the answer's LLM cost is booked to the tenant. */
export const askFromMemory = async (
  service: Pick<MemoryService, "query">,
  llm: Llm,
  tenant: string,
  request: QueryRequest,
): Promise<AskResult> => {
  const result = await service.query(tenant, request);
  const a = await answerQuestion(llm, request.question, result, { tenant });
  const byId = new Map(result.items.map((item) => [item.id, item]));
  const used = a.usedIds.flatMap((id) => {
    const item = byId.get(id);
    return item ? [item] : [];
  });
  return { answer: a.answer, used, result, cost: withAnswerCost(result.cost, a.cost) };
};

export const formatAsk = (a: AskResult): string =>
  [
    a.answer,
    "",
    ...(a.used.length > 0
      ? ["from:", ...a.used.map((it) => `  - (${it.date.slice(0, 10)}; ${it.speakers.join(", ")}) ${it.text}`)]
      : ["(no memory cited)"]),
    "",
    `${a.result.items.length} items retrieved, ${a.result.contextTokens}/${a.result.budget} tokens; ` +
      `LLM ${a.cost.llmCalls} calls, ${a.cost.inputTokens} in / ${a.cost.outputTokens} out tokens`,
  ].join("\n");

export const runAskCommand = async (
  config: Config,
  request: QueryRequest,
  o: { tenant: string; json?: boolean },
  open: OpenOptions = {},
): Promise<void> => {
  if (config.llm.provider === "none") throw new UsageError(NO_LLM_MESSAGE);
  const llm = await openLlm(config, { answer: true });
  if (!llm) throw new UsageError(NO_LLM_MESSAGE);
  try {
    const opened = await openEmbeddedEngine(config, open);
    try {
      const a = await askFromMemory(opened.engine, llm, o.tenant, request);
      console.log(
        o.json
          ? JSON.stringify(
              { answer: a.answer, used: a.used.map((it) => it.id), cost: a.cost, query: a.result },
              null,
              2,
            )
          : formatAsk(a),
      );
    } finally {
      await opened.close();
    }
  } finally {
    await llm.close?.();
  }
};

/** `memory ask <question> [--tenant] [--conversation] [--budget] [--json]`. */
export const registerAskCommand = (program: Command, config: () => Config): void => {
  program
    .command("ask <question>")
    .description("answer a question from memory with the configured LLM, citing the memories used")
    .option("--tenant <tenant>", "tenant", "default")
    .option("--conversation <id>", "restrict to one conversation")
    .option("--budget <tokens>", "context budget in tokens (50-32000, as the API)", "1000")
    .option("--json", "print the answer, the cited item ids, the cost and the query result as JSON")
    .action(async (question: string, o: { tenant: string; conversation?: string; budget: string; json?: boolean }) => {
      // Checked before anything opens: a bad argument or a missing LLM costs nothing.
      const request = queryRequestFromArgs(question, o);
      await runAskCommand(config(), request, { tenant: o.tenant, ...(o.json ? { json: true } : {}) });
    });
};
