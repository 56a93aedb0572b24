import type { LocomoConversation } from "../core/datasets/locomo.ts";
import type { LongMemEvalItem } from "../core/datasets/longmemeval.ts";
import type { BenchCase, DatasetSpec } from "./types.ts";

export const LOCOMO_CATEGORIES = [
  { id: "1", label: "cat 1 multi-hop" },
  { id: "2", label: "cat 2 temporal" },
  { id: "3", label: "cat 3 open-domain" },
  { id: "4", label: "cat 4 single-hop" },
] as const;

const SCORED = new Set(LOCOMO_CATEGORIES.map((c) => Number(c.id)));

/** LoCoMo conversations as bench cases: categories 1-4 asked, category 5 (adversarial) skipped. */
export const locomoCases = (
  conversations: readonly LocomoConversation[],
): { spec: DatasetSpec; cases: BenchCase[] } => {
  let skipped = 0;
  const cases = conversations.map((c) => ({
    id: c.id,
    turns: c.turns,
    questions: c.questions.flatMap((q, i) => {
      if (!SCORED.has(q.category)) {
        skipped++;
        return [];
      }
      return [
        {
          id: `${c.id}#${i}`,
          question: q.question,
          category: String(q.category),
          answer: q.answer,
          targets: { evidence: { level: "turn" as const, ids: q.evidence } },
        },
      ];
    }),
  }));
  return {
    cases,
    spec: {
      name: "locomo",
      metrics: ["evidence"],
      categories: LOCOMO_CATEGORIES.map((c) => ({ ...c })),
      skipped: [{ count: skipped, reason: "questions of category 5 (adversarial) or outside 1-4" }],
    },
  };
};

/** LongMemEval items as bench cases, one haystack and one question each; abstention items skipped. */
export const longMemEvalCases = (items: readonly LongMemEvalItem[]): { spec: DatasetSpec; cases: BenchCase[] } => {
  const scored = items.filter((i) => !i.abstention);
  const types = [...new Set(scored.map((i) => i.type))].sort();
  return {
    cases: scored.map((i) => ({
      id: i.id,
      turns: i.turns,
      questions: [
        {
          id: i.id,
          question: i.question,
          category: i.type,
          answer: i.answer,
          ...(i.questionDate ? { askedAt: i.questionDate } : {}),
          targets: {
            session: { level: "session" as const, ids: i.answerSessionIds },
            turn: { level: "turn" as const, ids: i.answerTurnIds },
          },
        },
      ],
    })),
    spec: {
      name: "longmemeval",
      metrics: ["session", "turn"],
      categories: types.map((t) => ({ id: t, label: t })),
      skipped: [{ count: items.length - scored.length, reason: "abstention items (_abs: no answer in the haystack)" }],
    },
  };
};
