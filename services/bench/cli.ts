import { type Command, InvalidArgumentError, Option } from "commander";
import { openEmbedder, openTurnAttention, segmenterSettingsFrom } from "../composition/parts.ts";
import type { Config } from "../core/config.ts";
import { BOUNDARY_MODES, type BoundaryMode } from "../segmenter/attention-rule.ts";
import { runBackfillBench } from "./backfill.ts";
import { resolveCompressorModel, runCompressorBench } from "./compressor.ts";
import { registerFreshnessCommand } from "./freshness.ts";
import { runLoadBench } from "./load.ts";
import { DEFAULT_BUDGETS, parseBudgets, runBench, writeReportFiles } from "./run.ts";
import { DEFAULT_SCALE_SIZES, runScaleBench, SCALE_STORES, type ScaleStore } from "./scale.ts";
import { renderSegmentationMarkdown, runSegmentationBench } from "./segmentation.ts";
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
  boundaries?: BoundaryMode;
  baselines: boolean;
  disguise?: number;
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

const keepRateArg = (v: string): number => {
  const n = Number(v);
  if (!(n > 0 && n <= 1)) throw new InvalidArgumentError("expected a number in (0, 1]");
  return n;
};

const ids = (v: string | undefined): string[] | undefined =>
  v
    ?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);

const run = async (dataset: DatasetSpec["name"], base: Config, o: BenchFlags): Promise<void> => {
  const started = performance.now();
  const config: Config = o.boundaries ? { ...base, segmenter: { ...base.segmenter, boundaries: o.boundaries } } : base;
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
    baselines: o.baselines,
    ...(o.disguise !== undefined ? { disguise: o.disguise } : {}),
  });
  console.log(markdown);
  if (files.length > 0) console.log(`written: ${files.join(", ")}`);
  console.log(`bench finished in ${((performance.now() - started) / 1000).toFixed(1)} s`);
};

interface CompressorFlags {
  data: string;
  conversations?: string;
  model?: string;
  keepRate?: number;
  batch?: number;
  threads?: number;
  repeats: number;
  out: string;
}

const runCompressor = async (config: Config, o: CompressorFlags): Promise<void> => {
  const model = resolveCompressorModel(config, o.model);
  const picked = ids(o.conversations);
  const { markdown, files } = await runCompressorBench({
    data: o.data,
    ...(picked ? { conversations: picked } : {}),
    ...(model ? { modelDir: model.dir, modelSource: model.source } : {}),
    keepRate: o.keepRate ?? config.sensory.keepRate,
    ...(o.batch !== undefined ? { batch: o.batch } : {}),
    ...(o.threads !== undefined ? { threads: o.threads } : {}),
    executionProvider: config.sensory.compressor.executionProvider,
    repeats: o.repeats,
    out: o.out,
    log: (line) => console.error(line),
  });
  console.log(markdown);
  if (files.length > 0) console.log(`written: ${files.join(", ")}`);
};

interface SegmentationFlags {
  data: string;
  conversations?: string;
  modes: BoundaryMode[];
  dipZ?: number[];
  confirmZ?: number[];
  out: string;
}

const numbersArg = (v: string): number[] => {
  const xs = v.split(",").map((s) => Number(s.trim()));
  if (xs.length === 0 || xs.some((x) => !Number.isFinite(x)))
    throw new InvalidArgumentError(`expected numbers, comma-separated, got "${v}"`);
  return xs;
};

const modesArg = (v: string): BoundaryMode[] => {
  const modes = v.split(",").map((s) => s.trim());
  const bad = modes.filter((m) => !(BOUNDARY_MODES as readonly string[]).includes(m));
  if (bad.length > 0 || modes.length === 0)
    throw new InvalidArgumentError(`expected modes among ${BOUNDARY_MODES.join(", ")}, got "${v}"`);
  return modes as BoundaryMode[];
};

const runSegmentation = async (config: Config, o: SegmentationFlags): Promise<void> => {
  const embedder = await openEmbedder(config);
  const attention = await openTurnAttention(config, "both");
  try {
    const picked = ids(o.conversations);
    const report = await runSegmentationBench({
      data: o.data,
      ...(picked ? { conversations: picked } : {}),
      embedder,
      attention: attention!,
      segmenter: segmenterSettingsFrom(config),
      modes: o.modes,
      ...(o.dipZ ? { dipZs: o.dipZ } : {}),
      ...(o.confirmZ ? { confirmZs: o.confirmZ } : {}),
    });
    const markdown = renderSegmentationMarkdown(report);
    console.log(markdown);
    const files = writeReportFiles(o.out, "segmentation", report.config.date, markdown, report);
    console.log(`written: ${files.join(", ")}`);
  } finally {
    await embedder.close();
    await attention?.close();
  }
};

interface LoadFlags {
  data: string;
  ingesters: number;
  queriers: number;
  turns: number;
  queries: number;
  maxSeconds: number;
  out: string;
}

const runLoad = async (config: Config, o: LoadFlags): Promise<void> => {
  const { markdown, files } = await runLoadBench({
    config,
    data: o.data,
    ingesters: o.ingesters,
    queriers: o.queriers,
    turnsPerClient: o.turns,
    queriesPerClient: o.queries,
    maxSeconds: o.maxSeconds,
    out: o.out,
    log: (line) => console.error(line),
  });
  console.log(markdown);
  if (files.length > 0) console.log(`written: ${files.join(", ")}`);
};

interface ScaleFlags {
  data: string;
  records: number[];
  store: ScaleStore;
  queries: number;
  tenants: number;
  keepStore?: string;
  reuseStore?: string;
  growStore?: string;
  out: string;
  progress: boolean;
}

const sizesArg = (v: string): number[] => {
  const sizes = v.split(",").map((s) => Number(s.trim().replace(/_/g, "")));
  if (sizes.some((n) => !Number.isInteger(n) || n <= 0))
    throw new InvalidArgumentError("expected positive integers, comma-separated");
  return sizes;
};

const runScale = async (config: Config, o: ScaleFlags): Promise<void> => {
  // A grown store is built over several runs: SIGINT / SIGTERM stop this one between two
  // segments with the vector indexes saved, and the next run carries on from there.
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    console.error(`bench scale: ${signal}: stopping after the segment being written`);
    stop.abort();
  };
  if (o.growStore) {
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  }
  const { markdown, files } = await runScaleBench({
    config,
    data: o.data,
    sizes: o.records,
    store: o.store,
    queries: o.queries,
    tenants: o.tenants,
    ...(o.keepStore ? { keepStore: o.keepStore } : {}),
    ...(o.reuseStore ? { reuseStore: o.reuseStore } : {}),
    ...(o.growStore ? { growStore: o.growStore, signal: stop.signal } : {}),
    out: o.out,
    progress: o.progress,
    log: (line) => console.error(line),
  }).finally(() => {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  });
  console.log(markdown);
  if (files.length > 0) console.log(`written: ${files.join(", ")}`);
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
    .addOption(
      new Option("--boundaries <mode>", "segmenter boundaries (default: config segmenter.boundaries)").choices([
        ...BOUNDARY_MODES,
      ]),
    )
    .option("--no-baselines", "run only our engine (no baseline embeddings or rankings): quicker before/after runs")
    .option("--out <dir>", "output folder for the markdown and JSON reports", "bench-out")
    .option("--limit <n>", "run at most n conversations / items", positive)
    .option("--no-progress", "no progress bar");

/** `memory bench locomo|longmemeval|compressor|load|scale|freshness`: retrieval quality, cost and speed against baselines. */
export const registerBenchCommands = (program: Command, config: () => Config): void => {
  const bench = program
    .command("bench")
    .description("benchmark retrieval quality, cost and speed against baselines in the same run");
  common(
    bench.command("locomo").description("LoCoMo-format file: evidence recall per category at each budget"),
    "../shared/data/locomo-dev.json",
  )
    .option("--conversations <ids>", "sample ids, comma-separated (default all)")
    .option(
      "--disguise <n>",
      "ask disguised copy n of each conversation (other speaker names and places, dates n years earlier; evidence ids unchanged)",
      positive,
    )
    .action(async (o: BenchFlags) => run("locomo", config(), o));
  common(
    bench
      .command("longmemeval")
      .description("LongMemEval-format file: session and turn recall per question type at each budget"),
    "data/longmemeval_s.json",
  )
    .option("--items <ids>", "question ids, comma-separated (default all)")
    .action(async (o: BenchFlags) => run("longmemeval", config(), o));
  bench
    .command("compressor")
    .description(
      "sensory compressor speed and kept share on LoCoMo turns: statistical baseline vs the ONNX token classifier, one turn per call and batched",
    )
    .option("--data <file>", "LoCoMo-format file", "../shared/data/locomo-dev.json")
    .option("--conversations <ids>", "sample ids, comma-separated (default all)")
    .option(
      "--model <dir>",
      "token-classifier folder (default config sensory.compressor.modelDir when it has a manifest.json)",
    )
    .option("--keep-rate <r>", "keep rate r in (0, 1] (default config sensory.keepRate)", keepRateArg)
    .option("--batch <n>", "sequences per ONNX session run (default 16)", positive)
    .option("--threads <n>", "intra-op threads of the ONNX session (default 2)", positive)
    .option("--repeats <n>", "interleaved rounds; the median round is reported", positive, 3)
    .option("--out <dir>", "output folder for the markdown and JSON reports", "bench-out")
    .action(async (o: CompressorFlags) => runCompressor(config(), o));
  bench
    .command("segmentation")
    .description(
      "segmenter boundary modes (gate, attention, both) against LoCoMo session breaks, each conversation one stream (no session ends, no idle flush): recall of breaks, cuts per session, segment sizes, attention cost",
    )
    .option("--data <file>", "LoCoMo-format file", "../shared/data/locomo-dev.json")
    .option("--conversations <ids>", "sample ids, comma-separated (default all)")
    .addOption(
      new Option("--modes <list>", "boundary modes, comma-separated")
        .argParser(modesArg)
        .default([...BOUNDARY_MODES], BOUNDARY_MODES.join(",")),
    )
    .option("--dip-z <list>", "also sweep mode attention's dipZ over these values (same model outputs)", numbersArg)
    .option("--confirm-z <list>", "also sweep mode both's confirmZ over these values", numbersArg)
    .option("--out <dir>", "output folder for the markdown and JSON reports", "bench-out")
    .action(async (o: SegmentationFlags) => runSegmentation(config(), o));
  bench
    .command("load")
    .description(
      "responsiveness under load: embedded engine behind the HTTP app, concurrent ingesting and querying clients; ack, query and /healthz latency and event-loop delay",
    )
    .option("--data <file>", "LoCoMo-format file", "../shared/data/locomo-dev.json")
    .option("--ingesters <n>", "clients posting turns, each its own conversation", positive, 8)
    .option("--queriers <n>", "clients asking questions", positive, 2)
    .option("--turns <n>", "turns each ingesting client posts at most", positive, 150)
    .option("--queries <n>", "questions each querying client asks at most", positive, 40)
    .option("--max-seconds <n>", "wall-clock limit of the load phase", positive, 60)
    .option("--out <dir>", "output folder for the markdown and JSON reports", "bench-out")
    .action(async (o: LoadFlags) => runLoad(config(), o));
  bench
    .command("scale")
    .description(
      "store growth: query latency (per route, against the question embedding), write throughput, memory, disk and cold start at growing record counts over many tenants",
    )
    .option("--data <file>", "LoCoMo-format file the records are generated from", "../shared/data/locomo-dev.json")
    .addOption(
      new Option("--records <list>", "store sizes in memory records, comma-separated")
        .argParser(sizesArg)
        .default(DEFAULT_SCALE_SIZES, DEFAULT_SCALE_SIZES.join(",")),
    )
    .addOption(
      new Option(
        "--store <kind>",
        "store kind (neo4j: the configured server, tenants of a run prefix, erased at the end)",
      )
        .choices(SCALE_STORES)
        .default("embedded"),
    )
    .option("--queries <n>", "questions of each scope (conversation, tenant-wide) at each size", positive, 100)
    .option("--tenants <n>", "tenants the conversation copies are spread over", positive, 10)
    .option("--keep-store <dir>", "build the store in this (empty) folder and keep it, to profile or inspect it")
    .option("--reuse-store <dir>", "measure a store kept by --keep-store (no build; --records is ignored)")
    .option(
      "--grow-store <dir>",
      "grow a kept store (or start one in an empty folder) to the sizes asked, over several runs if need be: SIGINT/SIGTERM stops between segments, the next run carries on",
    )
    .option("--out <dir>", "output folder for the markdown and JSON reports", "bench-out")
    .option("--no-progress", "no progress bar")
    .action(async (o: ScaleFlags) => runScale(config(), o));
  bench
    .command("backfill")
    .description(
      "second-opinion backfill: query latency with the second opinion on over a store built with it off, before and after `memory backfill-second-opinion`",
    )
    .option("--data <file>", "LoCoMo-format file", "../shared/data/locomo-dev.json")
    .option("--conversation <id>", "sample id (default the file's first)")
    .option("--turns <n>", "turns ingested at most (default all)", positive)
    .option("--questions <n>", "questions asked before and after", positive, 100)
    .option("--budget <tokens>", "context budget of each question", positive, 1000)
    .option("--out <dir>", "output folder for the markdown and JSON reports", "bench-out")
    .action(async (o: BackfillFlags) => {
      const { markdown, files } = await runBackfillBench({
        config: config(),
        data: o.data,
        ...(o.conversation ? { conversation: o.conversation } : {}),
        ...(o.turns ? { turns: o.turns } : {}),
        questions: o.questions,
        budget: o.budget,
        out: o.out,
        log: (line) => console.error(line),
      });
      console.log(markdown);
      if (files.length > 0) console.log(`written: ${files.join(", ")}`);
    });
  registerFreshnessCommand(bench, config);
};

interface BackfillFlags {
  data: string;
  conversation?: string;
  turns?: number;
  questions: number;
  budget: number;
  out: string;
}
