#!/usr/bin/env node
import { Command, InvalidArgumentError } from "commander";
import { registerBenchCommands } from "../bench/cli.ts";
import { loadProcessConfig } from "../core/config.ts";
import { registerAskCommand } from "./ask.ts";
import { registerBackfillCommand } from "./backfill.ts";
import { runIngest, runQueryCommand, runServe } from "./commands.ts";
import { registerConsolidationCommands } from "./consolidate.ts";
import { runDemo } from "./demo.ts";
import { registerMcpCommand } from "./mcp.ts";
import { queryRequestFromArgs, USAGE_EXIT_CODE, UsageError } from "./usage.ts";

const int = (v: string): number => {
  const n = Number.parseInt(v, 10);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("expected a positive integer");
  return n;
};

const program = new Command()
  .name("memory")
  .description("Streaming long-term memory for LLM agents (embedded runtime)")
  .option("--data-dir <dir>", "data folder (default ./data or MEMORY_DATA_DIR)")
  .option("--model-dir <dir>", "model folder (default ./models or MEMORY_MODEL_DIR)");

const config = () => {
  const o = program.opts<{ dataDir?: string; modelDir?: string }>();
  return loadProcessConfig({
    ...(o.dataDir ? { dataDir: o.dataDir } : {}),
    ...(o.modelDir ? { modelDir: o.modelDir } : {}),
  });
};

program
  .command("demo")
  .description("ingest a LoCoMo conversation into a fresh data folder and show what memory makes of it")
  .option("--data <file>", "LoCoMo JSON file", "../shared/data/locomo-dev.json")
  .option("--conversation <id>", "sample id", "conv-26")
  .option("--questions <n>", "questions to answer", int, 4)
  .option("--budget <tokens>", "context budget", int, 1000)
  .action(async (o: { data: string; conversation: string; questions: number; budget: number }) => {
    await runDemo(config(), o);
  });

program
  .command("ingest <file>")
  .description("ingest a LoCoMo JSON file or a JSONL file of turns")
  .option("--tenant <tenant>", "tenant to ingest into", "default")
  .action(async (file: string, o: { tenant: string }) => {
    await runIngest(config(), file, o.tenant);
  });

program
  .command("query <question>")
  .description("retrieve a packed, dated, sourced context for a question")
  .option("--tenant <tenant>", "tenant", "default")
  .option("--conversation <id>", "restrict to one conversation")
  .option("--budget <tokens>", "context budget in tokens (50-32000, as the API)", "1000")
  .option("--json", "print the full result as JSON")
  .action(async (question: string, o: { tenant: string; conversation?: string; budget: string; json?: boolean }) => {
    // Checked before the engine opens: a bad argument costs nothing and touches no data.
    const request = queryRequestFromArgs(question, o);
    await runQueryCommand(config(), request, { tenant: o.tenant, ...(o.json ? { json: true } : {}) });
  });

program
  .command("serve")
  .description("serve the HTTP API on 127.0.0.1")
  .option("--port <port>", "port (default 8787 or MEMORY_HTTP_PORT)")
  .action(async (o: { port?: string }) => {
    await runServe(o.port ? loadProcessConfig({ ...config(), http: { ...config().http, port: o.port } }) : config());
  });

registerBenchCommands(program, config);
registerConsolidationCommands(program, config);
registerAskCommand(program, config);
registerMcpCommand(program, config);
registerBackfillCommand(program, config, int);

program.parseAsync().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(err instanceof UsageError ? USAGE_EXIT_CODE : 1);
});
