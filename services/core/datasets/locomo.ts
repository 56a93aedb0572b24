import { readFileSync } from "node:fs";
import * as chrono from "chrono-node";
import { z } from "zod";
import type { TurnInput } from "../service.ts";

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

/** One LoCoMo sample as turns to ingest (a photo's caption goes into the text) and its questions. */
export const toConversation = (sample: z.infer<typeof LocomoSampleSchema>): LocomoConversation => {
  const conv = sample.conversation;
  const turns: TurnInput[] = [];
  for (const n of sessionNumbers(conv)) {
    const session = z.array(LocomoTurnSchema).parse(conv[`session_${n}`]);
    const dateText = z.string().parse(conv[`session_${n}_date_time`]);
    const start = parseSessionDate(dateText).getTime();
    session.forEach((t, i) => {
      const text = t.blip_caption ? `${t.text} [shared a photo: ${t.blip_caption}]` : t.text;
      turns.push({
        turnId: t.dia_id,
        speaker: t.speaker,
        role: "user",
        text: text.trim().length > 0 ? text : "(no text)",
        // Turns of a session are a few seconds apart so their order survives in the timestamps.
        timestamp: new Date(start + i * 30_000).toISOString(),
        sessionId: `session_${n}`,
      });
    });
  }
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

export const loadLocomo = (path: string): LocomoConversation[] =>
  LocomoFileSchema.parse(JSON.parse(readFileSync(path, "utf8"))).map(toConversation);
