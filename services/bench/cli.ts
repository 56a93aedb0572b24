import { type Command, InvalidArgumentError, Option } from "commander";
import type { Config } from "../core/config.ts";
import { DEFAULT_BUDGETS, parseBudgets, runBench } from "./run.ts";
import type { DatasetSpec } from "./types.ts";

interface BenchFlags {
  data: string;
  budgets: number[];
  encoder: string;
  out: string;
  conversations?: string;
  items?: string;
  limit?: number;
  progress: boolean;
  consolidate?: boolean;
}

const budgetsArg = (v: string): number[] => {
  try {
    return parseBudgets(v);
  } catch (err) {
    throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
  }
};

const positive = (v: string): number => {
  const n = Number.parseInt(v, 10);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("expected a positive integer");
  return n;
};

const ids = (v: string | undefined): string[] | undefined =>
  v
    ?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);

const run = async (dataset: DatasetSpec["name"], config: Config, o: BenchFlags): Promise<void> => {
  const started = performance.now();
  const picked = ids(dataset === "locomo" ? o.conversations : o.items);
  const { markdown, files } = await runBench(dataset, config, {
    data: o.data,
    budgets: o.budgets,
    encoder: o.encoder,
    out: o.out,
    ...(picked ? { ids: picked } : {}),
    ...(o.limit !== undefined ? { limit: o.limit } : {}),
    progress: o.progress,
    consolidate: o.consolidate ?? false,
  });
  console.log(markdown);
  if (files.length > 0) console.log(`written: ${files.join(", ")}`);
  console.log(`bench finished in ${((performance.now() - started) / 1000).toFixed(1)} s`);
};

const common = (cmd: Command, defaultData: string): Command =>
  cmd
    .option("--data <file>", "dataset file", defaultData)
    .addOption(
      new Option("--budgets <list>", "context budgets in tokens, comma-separated")
        .argParser(budgetsArg)
        .default(DEFAULT_BUDGETS, DEFAULT_BUDGETS.join(",")),
    )
    .option("--encoder <name>", "record encoder: extractive | llm (needs MEMORY_LLM_PROVIDER)", "extractive")
    .option("--consolidate", "also ask every question again after sleep-time consolidation")
    .option("--out <dir>", "output folder for the markdown and JSON reports", "bench-out")
    .option("--limit <n>", "run at most n conversations / items", positive)
    .option("--no-progress", "no progress bar");

/** `memory bench locomo|longmemeval`: retrieval quality, cost and speed against baselines. */
export const registerBenchCommands = (program: Command, config: () => Config): void => {
  const bench = program
    .command("bench")
    .description("benchmark retrieval quality, cost and speed against baselines in the same run");
  common(
    bench.command("locomo").description("LoCoMo-format file: evidence recall per category at each budget"),
    "../shared/data/locomo-dev.json",
  )
    .option("--conversations <ids>", "sample ids, comma-separated (default all)")
    .action(async (o: BenchFlags) => run("locomo", config(), o));
  common(
    bench
      .command("longmemeval")
      .description("LongMemEval-format file: session and turn recall per question type at each budget"),
    "data/longmemeval_s.json",
  )
    .option("--items <ids>", "question ids, comma-separated (default all)")
    .action(async (o: BenchFlags) => run("longmemeval", config(), o));
};
