import { readFileSync } from "node:fs";
import { z } from "zod";
import type { TurnInput } from "../requests.ts";

const LongMemEvalTurnSchema = z.object({
  role: z.string(),
  content: z.string(),
  has_answer: z.boolean().optional(),
});

const LongMemEvalItemSchema = z
  .object({
    question_id: z.union([z.string(), z.number()]).transform(String),
    question_type: z.string(),
    question: z.string(),
    answer: z.union([z.string(), z.number()]).transform(String),
    question_date: z.string().optional(),
    haystack_session_ids: z.array(z.union([z.string(), z.number()]).transform(String)),
    haystack_dates: z.array(z.string()),
    haystack_sessions: z.array(z.array(LongMemEvalTurnSchema)),
    answer_session_ids: z.array(z.union([z.string(), z.number()]).transform(String)).default([]),
  })
  .refine(
    (i) =>
      i.haystack_session_ids.length === i.haystack_sessions.length &&
      i.haystack_dates.length === i.haystack_sessions.length,
    { message: "haystack_session_ids, haystack_dates and haystack_sessions must have the same length" },
  );

export const LongMemEvalFileSchema = z.array(LongMemEvalItemSchema);
export type LongMemEvalRawItem = z.infer<typeof LongMemEvalItemSchema>;

export interface LongMemEvalItem {
  id: string;
  type: string;
  question: string;
  answer: string;
  /** ISO time the question is asked, when given. */
  questionDate?: string;
  /** Abstention items (ids ending in "_abs") have no answer in the haystack. */
  abstention: boolean;
  /** Every haystack turn, sessions in haystack order; turn id `${sessionId}:${index}` (sessionId carries the session). */
  turns: TurnInput[];
  sessionIds: string[];
  answerSessionIds: string[];
  /** Turn ids of the turns marked has_answer. */
  answerTurnIds: string[];
}

const DATE = /^(\d{4})\/(\d{1,2})\/(\d{1,2})(?:\s*\([A-Za-z]+\))?(?:\s+(\d{1,2}):(\d{2}))?$/;

/** "2023/05/20 (Sat) 02:21" (the dataset's format) as an instant in UTC; ISO strings pass too. */
export const parseLongMemEvalDate = (text: string): Date => {
  const m = DATE.exec(text.trim());
  if (m) return new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4] ?? 0), Number(m[5] ?? 0)));
  const t = Date.parse(text);
  if (Number.isNaN(t)) throw new Error(`unparseable LongMemEval date: "${text}"`);
  return new Date(t);
};

const ROLES = new Set(["user", "assistant", "system"]);
const MAX_TEXT = 100_000;

export const toLongMemEvalItem = (raw: LongMemEvalRawItem): LongMemEvalItem => {
  const turns: TurnInput[] = [];
  const answerTurnIds: string[] = [];
  const prefixes = new Set<string>();
  raw.haystack_sessions.forEach((session, s) => {
    const sessionId = raw.haystack_session_ids[s] as string;
    // A session id repeated in a haystack still gets distinct turn ids.
    const prefix = prefixes.has(sessionId) ? `${sessionId}~${s}` : sessionId;
    prefixes.add(prefix);
    const start = parseLongMemEvalDate(raw.haystack_dates[s] as string).getTime();
    session.forEach((t, i) => {
      const turnId = `${prefix}:${i}`;
      const role = ROLES.has(t.role) ? (t.role as "user" | "assistant" | "system") : "other";
      const text = t.content.trim().length > 0 ? t.content.slice(0, MAX_TEXT) : "(no text)";
      turns.push({
        turnId,
        speaker: role === "other" ? t.role || "other" : role,
        role,
        text,
        // Turns of a session are a few seconds apart so their order survives in the timestamps.
        timestamp: new Date(start + i * 30_000).toISOString(),
        sessionId,
      });
      if (t.has_answer) answerTurnIds.push(turnId);
    });
  });
  return {
    id: raw.question_id,
    type: raw.question_type,
    question: raw.question,
    answer: raw.answer,
    ...(raw.question_date ? { questionDate: parseLongMemEvalDate(raw.question_date).toISOString() } : {}),
    abstention: raw.question_id.endsWith("_abs"),
    turns,
    sessionIds: raw.haystack_session_ids,
    answerSessionIds: [...new Set(raw.answer_session_ids)],
    answerTurnIds,
  };
};

export const loadLongMemEval = (path: string): LongMemEvalItem[] =>
  LongMemEvalFileSchema.parse(JSON.parse(readFileSync(path, "utf8"))).map(toLongMemEvalItem);
