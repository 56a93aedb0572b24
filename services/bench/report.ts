import type { CategoryAggregate } from "./scoring.ts";
import { fmt, fmtInt, markdownTable } from "./table.ts";
import { type BenchReport, type BudgetSweep, SYSTEMS, type SystemName, type SystemSummary } from "./types.ts";

const recallCell = (a: { mean: number | undefined } | undefined): string => fmt(a?.mean);

const recallRow = (report: BenchReport, name: string, s: SystemSummary) => {
  const [primary, ...others] = report.spec.metrics;
  const p: CategoryAggregate | undefined = primary ? s.metrics[primary] : undefined;
  return [
    name,
    ...report.spec.categories.map((c) => recallCell(p?.byCategory[c.id])),
    recallCell(p?.overall),
    ...others.map((m) => recallCell(s.metrics[m]?.overall)),
    recallCell(s.coverage?.overall),
    fmt(s.foundPerKTokens, 2),
    fmtInt(s.meanTokens),
  ];
};

const recallHeader = (report: BenchReport): string[] => {
  const [primary, ...others] = report.spec.metrics;
  return [
    "system",
    ...report.spec.categories.map((c) => `${c.label} (n=${countIn(report, c.id)})`),
    `${primary} recall, overall`,
    ...others.map((m) => `${m} recall, overall`),
    "answer coverage",
    `${primary} turns per 1,000 tokens`,
    "mean context tokens",
  ];
};

/** Cases get a column of their own in the markdown only up to this many (LoCoMo's conversations, not LongMemEval's 500 items). */
const MAX_CASES_SHOWN = 12;

const casesShown = (report: BenchReport): string[] => {
  const cases = Object.keys(report.byCase ?? {});
  return cases.length <= MAX_CASES_SHOWN ? cases : [];
};

const systemsIn = (report: BenchReport): SystemName[] =>
  SYSTEMS.filter((s) => report.questions.some((q) => q.system === s));

/** One row per system: first-metric recall and answer coverage for each case at each budget. */
const perCaseTable = (report: BenchReport): string => {
  const primary = report.spec.metrics[0] ?? "";
  const cases = Object.keys(report.byCase);
  const budgets = Object.keys(report.summary);
  const header = ["system", ...cases.flatMap((c) => budgets.map((b) => `${c} @${b}`))];
  const rows = systemsIn(report).map((system) => [
    system,
    ...cases.flatMap((c) =>
      budgets.map((b) => {
        const s = report.byCase[c]?.[b]?.[system];
        return `${fmt(s?.metrics[primary]?.overall.mean)} / ${fmt(s?.coverage.overall.mean)}`;
      }),
    ),
  ]);
  return markdownTable(header, rows);
};

/** One row per system: its means over the sweep's budgets, per category, overall and per case. */
const sweepTable = (report: BenchReport, sweep: BudgetSweep): string => {
  const cases = casesShown(report);
  const header = [
    "system",
    ...report.spec.categories.map((c) => c.label),
    `${sweep.metric} recall, overall`,
    "answer coverage",
    ...cases.map((c) => `${c} recall / coverage`),
  ];
  const rows = systemsIn(report).flatMap((system) => {
    const s = sweep.systems[system];
    if (!s) return [];
    return [
      [
        system,
        ...report.spec.categories.map((c) => fmt(s.byCategory[c.id]?.recall, 4)),
        fmt(s.overall.recall, 4),
        fmt(s.overall.coverage, 4),
        ...cases.map((c) => `${fmt(s.byCase[c]?.recall, 4)} / ${fmt(s.byCase[c]?.coverage, 4)}`),
      ],
    ];
  });
  return markdownTable(header, rows);
};

const countIn = (report: BenchReport, category: string): number => {
  const first = Object.values(report.summary)[0];
  const primary = report.spec.metrics[0];
  return first && primary ? (first.ours.metrics[primary]?.byCategory[category]?.n ?? 0) : 0;
};

/** The report as markdown: one recall table per budget, then cost and speed. */
export const renderMarkdown = (report: BenchReport): string => {
  const { config, cost } = report;
  const out: string[] = [];
  out.push(`# Benchmark: ${config.dataset}`);
  out.push("");
  out.push(
    `data \`${config.dataFile}\` (sha256 ${config.dataSha256.slice(0, 12)}…)${config.disguise !== undefined ? `, disguised copy ${config.disguise} (other names and places, dates ${config.disguise} year(s) earlier)` : ""}, cases ${config.cases.length} (${config.cases.slice(0, 8).join(", ")}${config.cases.length > 8 ? ", …" : ""}), encoder ${config.encoder}, embedder ${config.embedder}${config.secondOpinion ? `, second opinion ${config.secondOpinion}` : ""}, compressor ${config.compressor}, keep rate ${config.keepRate}, commit ${config.gitCommit?.slice(0, 10) ?? "unknown"}${config.gitDirty ? " (dirty)" : ""}, ${config.date}, wall ${config.wallSeconds.toFixed(1)} s`,
  );
  for (const s of report.spec.skipped) out.push(`skipped: ${s.count} ${s.reason}`);
  out.push(
    `recall = share of a question's ${report.spec.metrics.join(" / ")} targets covered by the turns the context was built from; mean over the questions that have targets (macro over questions); tokens counted with o200k. Answer coverage = share of the gold answer's content words (lower case, stop words dropped, Porter-stemmed) found in the context, source ids left out; mean over the questions whose answer has one. Turns per 1,000 tokens = ${report.spec.metrics[0]} targets found over all questions per 1,000 context tokens. Our engine is asked as of the question's date where the dataset gives one (LongMemEval), else of the conversation's last turn (\`asOf\`: LoCoMo's questions are asked at its end), so "last year" or "in June" resolve against the conversation's time, not the clock's; the baselines use no time.`,
  );
  for (const [budget, systems] of Object.entries(report.summary)) {
    out.push("");
    out.push(`## Budget ${budget} tokens`);
    out.push("");
    out.push(
      markdownTable(
        recallHeader(report),
        systemsIn(report).map((s) => recallRow(report, s, systems[s])),
      ),
    );
  }
  // A table per case only while it stays readable.
  if (casesShown(report).length > 1) {
    out.push("");
    out.push(`## Per ${report.config.dataset === "locomo" ? "conversation" : "item"}`);
    out.push("");
    out.push(`${report.spec.metrics[0]} recall / answer coverage, overall, per case and budget.`);
    out.push("");
    out.push(perCaseTable(report));
  }
  if (report.sweep) {
    const b = report.sweep.budgets;
    out.push("");
    out.push("## Budget sweep");
    out.push("");
    out.push(
      `Means over the ${b.length} budgets (${b.join(", ")}) of each budget's ${report.sweep.metric} recall and answer coverage: a packing change judged over the curve, not at three boundaries where one item more or less fits.${Object.keys(report.byCase).length > MAX_CASES_SHOWN ? " Per case: in the JSON's sweep section." : ""}`,
    );
    out.push("");
    out.push(sweepTable(report, report.sweep));
  }
  out.push("");
  out.push(
    `Full context, unbounded: ${fmtInt(cost.fullContextUnbounded.meanTokens)} tokens per question on average; ${report.spec.metrics
      .map((m) => `${m} recall ${fmt(cost.fullContextUnbounded.metrics[m]?.overall.mean)}`)
      .join(
        ", ",
      )}, answer coverage ${fmt(cost.fullContextUnbounded.coverage?.overall.mean)}. The full-context rows above keep the most recent turns that fit the budget.`,
  );
  out.push("");
  out.push("## Cost and speed");
  out.push("");
  const o = cost.ours;
  const b = cost.baselines;
  out.push(
    markdownTable(
      [
        "system",
        "construction LLM calls",
        "construction LLM tokens (in/out)",
        "build embedding calls (texts)",
        "indexed units",
        "build s",
        "query p50 ms",
        "query p95 ms",
      ],
      [
        [
          "ours",
          fmtInt(o.constructionLlmCalls),
          `${fmtInt(o.constructionInputTokens)}/${fmtInt(o.constructionOutputTokens)}`,
          `${fmtInt(o.ingestEmbeddingCalls)} (${fmtInt(o.ingestEmbeddedTexts)})`,
          `${fmtInt(o.segments)} segments, ${fmtInt(o.records)} records`,
          fmt(o.ingestSeconds, 1),
          fmt(o.queryMsP50, 1),
          fmt(o.queryMsP95, 1),
        ],
        ...(["bm25-turns", "dense-turns", "window5-dense", "full-context"] as const).map((s) => [
          s,
          "0",
          "0/0",
          `${fmtInt(b[s].embeddingCalls)} (${fmtInt(b[s].embeddedTexts)})`,
          `${fmtInt(b[s].units)} ${s === "window5-dense" ? "windows" : "turns"}`,
          fmt(b[s].buildSeconds, 1),
          fmt(b[s].queryMsP50, 2),
          fmt(b[s].queryMsP95, 2),
        ]),
      ],
    ),
  );
  out.push("");
  out.push(
    `ours: ingest ${fmtInt(o.turns)} turns in ${fmt(o.ingestSeconds, 1)} s = ${fmt(o.ingestTurnsPerSecond, 1)} turns/s (${fmt(o.ingestEmbeddingSeconds, 1)} ${report.config.secondOpinion ? `s of model time on the threads of ${report.config.embedder} and ${report.config.secondOpinion}, which run side by side` : "s of it in the embedder"}); the embedder alone (${cost.embedder.id}, batches of 32, same run) ${cost.embedder.texts > 0 ? `${fmt(cost.embedder.sentencesPerSecond, 1)} sentences/s` : "not measured (--no-baselines)"}. Sensory kept ratio ${fmt(o.keptRatio)} (words kept / words, mean over turns). Dead-lettered segments: ${fmtInt(o.deadLetters)}. Query: ${fmtInt(o.queryEmbeddingCalls)} embedding calls, ${fmtInt(o.queryLlmCalls)} LLM calls; engine-reported p50 ${fmt(o.engineQueryMsP50, 1)} ms. Dense baselines' query times include embedding the question; build embedding counts include the question embeddings.`,
  );
  return `${out.join("\n")}\n`;
};
