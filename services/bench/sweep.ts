/**
 * The budget sweep: each system's recall and answer coverage averaged over the run's budgets. A
 * packing change moves which item is the last to fit, so at any one budget it can gain or lose a
 * question by where the boundary falls; the mean over many budgets judges it over the curve. Pure.
 */
import { mean } from "./scoring.ts";
import type { BudgetSweep, SweepMeans, SystemName, SystemSummary } from "./types.ts";

/** A run with at least this many budgets has a sweep (the default run has three: 500, 1,000 and 2,000). */
export const SWEEP_MIN_BUDGETS = 4;

type PerBudget = Record<string, Partial<Record<SystemName, SystemSummary>>>;

const defined = (values: readonly (number | undefined)[]): number[] =>
  values.filter((v): v is number => v !== undefined);

/** Mean over budgets of one per-budget value; a budget without a value is left out. */
const overBudgets = (budgets: readonly string[], value: (budget: string) => number | undefined) =>
  mean(defined(budgets.map(value)));

const sweepOf = (
  perBudget: PerBudget,
  budgets: readonly string[],
  system: SystemName,
  metric: string,
  category?: string,
): SweepMeans => {
  const pick = (s: SystemSummary | undefined, which: "recall" | "coverage") => {
    const agg = which === "recall" ? s?.metrics[metric] : s?.coverage;
    return category === undefined ? agg?.overall.mean : agg?.byCategory[category]?.mean;
  };
  return {
    recall: overBudgets(budgets, (b) => pick(perBudget[b]?.[system], "recall")),
    coverage: overBudgets(budgets, (b) => pick(perBudget[b]?.[system], "coverage")),
  };
};

/**
 * The sweep of a run, or undefined when it has fewer than SWEEP_MIN_BUDGETS budgets. `summary` is
 * summary[budget][system]; `byCase` the same per case. A system is listed when some budget scored a
 * question for it.
 */
export const budgetSweep = (
  summary: PerBudget,
  byCase: Record<string, PerBudget>,
  metric: string,
  categories: readonly string[],
): BudgetSweep | undefined => {
  const budgets = Object.keys(summary).sort((a, b) => Number(a) - Number(b));
  if (budgets.length < SWEEP_MIN_BUDGETS) return undefined;
  const systems: BudgetSweep["systems"] = {};
  const names = [...new Set(budgets.flatMap((b) => Object.keys(summary[b] ?? {})))] as SystemName[];
  for (const system of names) {
    const scored = budgets.some((b) => (summary[b]?.[system]?.metrics[metric]?.overall.n ?? 0) > 0);
    if (!scored) continue;
    const byCategory: Record<string, SweepMeans> = {};
    for (const c of categories) byCategory[c] = sweepOf(summary, budgets, system, metric, c);
    const perCase: Record<string, SweepMeans> = {};
    for (const [id, cased] of Object.entries(byCase)) perCase[id] = sweepOf(cased, budgets, system, metric);
    systems[system] = { overall: sweepOf(summary, budgets, system, metric), byCategory, byCase: perCase };
  }
  return { budgets: budgets.map(Number), metric, systems };
};
