// Evidence recall of a LoCoMo conversation's questions and the counts of a consolidation report,
// shared by the parity test (conv-30, in CI) and the opt-in two-conversation consolidation test.
import { evidenceRecall } from "../../../services/bench/scoring.ts";
import type { LocomoConversation } from "../../../services/core/datasets/locomo.ts";
import type { ConsolidationReport } from "../../../services/core/maintenance.ts";
import type { QueryResult } from "../../../services/core/query-types.ts";

export const BUDGETS = [1000, 2000] as const;
export type Recall = Record<(typeof BUDGETS)[number], number>;

const round = (x: number): number => Number(x.toFixed(4));

/** Mean evidence recall of the category 1-4 questions at each budget, `ask` answering one query. */
export const recallOf = async (
  conv: LocomoConversation,
  ask: (question: string, budget: number) => Promise<QueryResult>,
): Promise<Recall> => {
  const out = {} as Recall;
  const questions = conv.questions.filter((q) => q.category >= 1 && q.category <= 4 && q.evidence.length > 0);
  for (const budget of BUDGETS) {
    let sum = 0;
    for (const q of questions) sum += evidenceRecall(q.evidence, (await ask(q.question, budget)).items) ?? 0;
    out[budget] = round(sum / questions.length);
  }
  return out;
};

/** The decision counts of a report (its timing differs between runs). */
export const consolidationCounts = (r: ConsolidationReport) => ({
  examined: r.examined,
  candidates: r.candidates,
  merged: r.merged,
  superseded: r.superseded,
  linked: r.linked,
  unchanged: r.unchanged,
  dropped: r.dropped,
});
