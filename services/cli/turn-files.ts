import { readFileSync } from "node:fs";
import { loadLocomo } from "../core/datasets/locomo.ts";
import { idSchema } from "../core/input-rules.ts";
import { type TurnInput, TurnInputSchema } from "../core/requests.ts";

export interface ConversationTurns {
  conversation: string;
  turns: TurnInput[];
}

const JsonlTurnSchema = TurnInputSchema.extend({ conversation: idSchema().default("default") });

/**
 * A file of turns: LoCoMo JSON (a list of samples), or JSONL with one turn per line
 * ({conversation?, turnId?, speaker, text, timestamp, sessionId?, role?}). A bad JSONL line is an
 * error naming the line, not a silent skip.
 */
export const readTurnFile = (path: string): ConversationTurns[] => {
  const raw = readFileSync(path, "utf8");
  if (raw.trimStart().startsWith("[")) return loadLocomo(path).map((c) => ({ conversation: c.id, turns: c.turns }));
  const byConversation = new Map<string, TurnInput[]>();
  raw.split("\n").forEach((line, i) => {
    if (line.trim() === "") return;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      throw new Error(`${path}:${i + 1}: not valid JSON`);
    }
    const parsed = JsonlTurnSchema.safeParse(json);
    if (!parsed.success)
      throw new Error(
        `${path}:${i + 1}: ${parsed.error.issues.map((x) => `${x.path.join(".") || "(line)"}: ${x.message}`).join("; ")}`,
      );
    const { conversation, ...turn } = parsed.data;
    const list = byConversation.get(conversation) ?? [];
    list.push(turn);
    byConversation.set(conversation, list);
  });
  return [...byConversation].map(([conversation, turns]) => ({ conversation, turns }));
};
