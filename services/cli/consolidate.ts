import type { Command } from "commander";
import type { ConsolidationReport, ErasureReport } from "../consolidator/types.ts";
import type { Config } from "../core/config.ts";
import type { EmbeddedEngine } from "../embedded/engine.ts";
import { openEmbeddedEngine } from "../embedded/open.ts";

/** Current (not superseded) and stored record counts of a tenant. */
export const recordCounts = async (
  engine: EmbeddedEngine,
  tenant: string,
): Promise<{ current: number; stored: number }> => {
  const count = async (includeSuperseded: boolean): Promise<number> => {
    let n = 0;
    let cursor: string | undefined;
    do {
      const page = await engine.listRecords(tenant, { limit: 1000, includeSuperseded, ...(cursor ? { cursor } : {}) });
      n += page.records.length;
      cursor = page.nextCursor;
    } while (cursor);
    return n;
  };
  return { current: await count(false), stored: await count(true) };
};

export const formatConsolidationReport = (r: ConsolidationReport): string =>
  [
    `consolidated ${r.tenants.length === 0 ? "no tenant (nothing pending)" : `tenant(s) ${r.tenants.join(", ")}`} with ${r.decider}`,
    `  examined ${r.examined} records (${r.candidates} candidate pairs)`,
    `  merged ${r.merged}, superseded ${r.superseded}, linked ${r.linked}, unchanged ${r.unchanged} (dropped pairs ${r.dropped})`,
    `  ${(r.ms / 1000).toFixed(2)} s; LLM ${r.cost.llmCalls} calls, ${r.cost.inputTokens} in / ${r.cost.outputTokens} out tokens`,
  ].join("\n");

export const runConsolidateCommand = async (config: Config, o: { tenant?: string; json?: boolean }): Promise<void> => {
  const opened = await openEmbeddedEngine(config);
  try {
    const before = o.tenant !== undefined ? await recordCounts(opened.engine, o.tenant) : undefined;
    const report = await opened.engine.consolidate(o.tenant);
    const after = o.tenant !== undefined ? await recordCounts(opened.engine, o.tenant) : undefined;
    if (o.json) {
      console.log(JSON.stringify({ ...report, ...(before && after ? { records: { before, after } } : {}) }, null, 2));
      return;
    }
    console.log(formatConsolidationReport(report));
    if (before && after)
      console.log(
        `  current records ${before.current} -> ${after.current} (stored ${after.stored}: nothing is deleted)`,
      );
  } finally {
    await opened.close();
  }
};

export const formatErasureReport = (r: ErasureReport): string =>
  `erased ${r.conversation !== undefined ? `conversation "${r.conversation}" of ` : ""}tenant "${r.tenant}": ` +
  `${r.records} records${r.turns !== undefined ? `, ${r.turns} turns` : ""}, ${r.vectors} vectors, ` +
  `${r.inboxEntries} inbox entries, ${r.stateKeys} state keys; ${r.restored} records restored; ${r.ms.toFixed(0)} ms`;

export const runEraseCommand = async (
  config: Config,
  o: { tenant: string; conversation?: string; yes?: boolean; json?: boolean },
): Promise<void> => {
  if (o.conversation === undefined && !o.yes) {
    throw new Error(`erasing all of tenant "${o.tenant}" cannot be undone: repeat with --yes`);
  }
  const opened = await openEmbeddedEngine(config);
  try {
    const report = await opened.engine.erase(o.tenant, o.conversation);
    console.log(o.json ? JSON.stringify(report, null, 2) : formatErasureReport(report));
  } finally {
    await opened.close();
  }
};

/** `memory consolidate [--tenant]` and `memory erase --tenant [--conversation]`. */
export const registerConsolidationCommands = (program: Command, config: () => Config): void => {
  program
    .command("consolidate")
    .description("sleep-time consolidation now: merge duplicates, supersede contradicted records, link refinements")
    .option("--tenant <tenant>", "only this tenant (default: every tenant with pending work)")
    .option("--json", "print the report as JSON")
    .action(async (o: { tenant?: string; json?: boolean }) => {
      await runConsolidateCommand(config(), o);
    });
  program
    .command("erase")
    .description("delete everything of a tenant, or of one of its conversations, from every store")
    .requiredOption("--tenant <tenant>", "tenant to erase (from)")
    .option("--conversation <id>", "erase only this conversation")
    .option("--yes", "confirm erasing a whole tenant")
    .option("--json", "print the report as JSON")
    .action(async (o: { tenant: string; conversation?: string; yes?: boolean; json?: boolean }) => {
      await runEraseCommand(config(), o);
    });
};
