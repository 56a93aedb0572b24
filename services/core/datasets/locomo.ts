import { readFileSync } from "node:fs";
import * as chrono from "chrono-node";
import { z } from "zod";
import { type TurnInput, TurnInputSchema } from "../requests.ts";

const LocomoTurnSchema = z.object({
  speaker: z.string(),
  dia_id: z.string(),
  text: z.string(),
  blip_caption: z.string().optional(),
});

const LocomoQaSchema = z.object({
  question: z.string(),
  answer: z.union([z.string(), z.number()]).optional(),
  adversarial_answer: z.union([z.string(), z.number()]).optional(),
  evidence: z.array(z.string()).default([]),
  category: z.number().int(),
});

const LocomoSampleSchema = z.object({
  sample_id: z.string(),
  conversation: z.record(z.string(), z.unknown()),
  qa: z.array(LocomoQaSchema).default([]),
});

export const LocomoFileSchema = z.array(LocomoSampleSchema);

export interface LocomoQuestion {
  question: string;
  answer: string;
  category: number;
  /** Evidence turn ids, cleaned: "D8:6; D9:17" split in two, malformed ids dropped. */
  evidence: string[];
}

export interface LocomoConversation {
  id: string;
  speakers: [string, string];
  turns: TurnInput[];
  questions: LocomoQuestion[];
}

const TURN_ID = /^D\d+:\d+$/;

/** Evidence strings as the dataset has them, including its quirks, into clean turn ids. */
export const cleanEvidence = (evidence: readonly string[]): string[] => [
  ...new Set(
    evidence
      .flatMap((e) => e.split(/[;,]/))
      .map((e) => e.trim())
      .filter((e) => TURN_ID.test(e)),
  ),
];

/** "1:56 pm on 8 May, 2023" as an instant in UTC. */
export const parseSessionDate = (text: string): Date => {
  const d = chrono.parseDate(text.replace(" on ", " "), { instant: new Date(Date.UTC(2000, 0, 1)), timezone: 0 });
  if (!d) throw new Error(`unparseable session date: "${text}"`);
  return d;
};

const sessionNumbers = (conv: Record<string, unknown>): number[] =>
  Object.keys(conv)
    .map((k) => /^session_(\d+)$/.exec(k)?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number)
    .sort((a, b) => a - b);

type LocomoSample = z.infer<typeof LocomoSampleSchema>;

/** Problems listed in a LocomoFormatError at most (the count says how many there were). */
const MAX_LISTED_PROBLEMS = 20;

/** A LoCoMo file that cannot be ingested as a whole: every problem, each naming its sample, session and turn. */
export class LocomoFormatError extends Error {
  override readonly name = "LocomoFormatError";
  constructor(
    source: string,
    readonly problems: string[],
  ) {
    const listed = problems.slice(0, MAX_LISTED_PROBLEMS).join("\n  ");
    const more =
      problems.length > MAX_LISTED_PROBLEMS ? `\n  ... and ${problems.length - MAX_LISTED_PROBLEMS} more` : "";
    super(`${source}: ${problems.length} problem(s), nothing ingested:\n  ${listed}${more}`);
  }
}

const zodProblems = (where: string, error: z.ZodError): string[] =>
  error.issues.map((i) => `${where}${i.path.length > 0 ? ` ${i.path.join(".")}` : ""}: ${i.message}`);

/**
 * One LoCoMo sample as turns to ingest (a photo's caption goes into the text) and its questions.
 * Each turn is checked with the API's TurnInputSchema; problems are pushed to `problems`, named by
 * sample, session and turn, and the sample is undefined when it has any.
 */
const sampleToConversation = (
  sample: LocomoSample,
  where: string,
  problems: string[],
): LocomoConversation | undefined => {
  const before = problems.length;
  const conv = sample.conversation;
  const turns: TurnInput[] = [];
  for (const n of sessionNumbers(conv)) {
    const sessionWhere = `${where}, session_${n}`;
    const session = z.array(z.unknown()).safeParse(conv[`session_${n}`]);
    if (!session.success) {
      problems.push(`${sessionWhere}: must be a list of turns`);
      continue;
    }
    const dateText = conv[`session_${n}_date_time`];
    let start: number | undefined;
    if (typeof dateText !== "string") problems.push(`${sessionWhere}: session_${n}_date_time is missing`);
    else {
      try {
        start = parseSessionDate(dateText).getTime();
      } catch (err) {
        problems.push(`${sessionWhere}: ${(err as Error).message}`);
      }
    }
    session.data.forEach((raw, i) => {
      const rawId = (raw as { dia_id?: unknown } | null)?.dia_id;
      const turnWhere = `${sessionWhere}, turn ${i}${typeof rawId === "string" ? ` (${rawId})` : ""}`;
      const t = LocomoTurnSchema.safeParse(raw);
      if (!t.success) {
        problems.push(...zodProblems(turnWhere, t.error));
        return;
      }
      if (start === undefined) return;
      const text = t.data.blip_caption ? `${t.data.text} [shared a photo: ${t.data.blip_caption}]` : t.data.text;
      const turn = TurnInputSchema.safeParse({
        turnId: t.data.dia_id,
        speaker: t.data.speaker,
        role: "user",
        text: text.trim().length > 0 ? text : "(no text)",
        // Turns of a session are a few seconds apart so their order survives in the timestamps.
        timestamp: new Date(start + i * 30_000).toISOString(),
        sessionId: `session_${n}`,
      });
      if (!turn.success) problems.push(...zodProblems(turnWhere, turn.error));
      else turns.push(turn.data);
    });
  }
  if (problems.length > before) return undefined;
  return {
    id: sample.sample_id,
    speakers: [String(conv.speaker_a), String(conv.speaker_b)],
    turns,
    questions: sample.qa.map((q) => ({
      question: q.question,
      answer: String(q.answer ?? q.adversarial_answer ?? ""),
      category: q.category,
      evidence: cleanEvidence(q.evidence),
    })),
  };
};

/** One LoCoMo sample as turns and questions; a LocomoFormatError naming session and turn when it is malformed. */
export const toConversation = (sample: LocomoSample): LocomoConversation => {
  const problems: string[] = [];
  const conversation = sampleToConversation(sample, `sample ${sample.sample_id}`, problems);
  if (!conversation) throw new LocomoFormatError(`sample ${sample.sample_id}`, problems);
  return conversation;
};

/**
 * A LoCoMo file (a list of samples), checked as a whole before anything is returned: a file with any
 * bad sample, session or turn is a LocomoFormatError listing them all, so an ingest of it is all or
 * nothing.
 */
export const parseLocomo = (json: unknown, source = "LoCoMo file"): LocomoConversation[] => {
  if (!Array.isArray(json)) throw new LocomoFormatError(source, ["expected a JSON list of samples"]);
  const problems: string[] = [];
  const out: LocomoConversation[] = [];
  json.forEach((raw, index) => {
    const rawId = (raw as { sample_id?: unknown } | null)?.sample_id;
    const where = `sample ${index}${typeof rawId === "string" ? ` (${rawId})` : ""}`;
    const sample = LocomoSampleSchema.safeParse(raw);
    if (!sample.success) {
      problems.push(...zodProblems(where, sample.error));
      return;
    }
    const conversation = sampleToConversation(sample.data, where, problems);
    if (conversation) out.push(conversation);
  });
  if (problems.length > 0) throw new LocomoFormatError(source, problems);
  return out;
};

export const loadLocomo = (path: string): LocomoConversation[] => {
  const text = readFileSync(path, "utf8");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${path}: not valid JSON (${(err as Error).message})`);
  }
  return parseLocomo(json, path);
};
