/**
 * Turn validation for every writer (the embedded engine's inbox, the gateway's Kafka producer):
 * one rule set, so a turn either runtime accepts the other accepts too, with the same 400.
 */
import { ValidationError } from "./errors.ts";
import type { TurnInput } from "./requests.ts";
import { assertClientTurnIds } from "./turn-ids.ts";
import { type Turn, TurnSchema } from "./types.ts";

export const toTurn = (tenant: string, conversation: string, input: TurnInput, fallbackId: string): Turn => ({
  tenant,
  conversation,
  turnId: input.turnId ?? fallbackId,
  speaker: input.speaker,
  role: input.role,
  text: input.text,
  // Normalised to UTC ISO when it parses; left as sent otherwise, for the schema to reject by name.
  timestamp: Number.isNaN(Date.parse(input.timestamp)) ? input.timestamp : new Date(input.timestamp).toISOString(),
  sessionId: input.sessionId,
  ...(input.metadata ? { metadata: input.metadata } : {}),
});

/**
 * Completes a batch of client turns (tenant from the credential, the conversation, an id from
 * `assignId` where the client sent none) and checks each with TurnSchema. Callers that bypass
 * TurnInputSchema are held to the same rules: a reserved client id, or any invalid field, throws a
 * ValidationError naming the turn's index and the fields, and nothing of the batch is accepted.
 */
export const validateTurns = (
  tenant: string,
  conversation: string,
  turns: readonly TurnInput[],
  assignId: (index: number) => string,
): Turn[] => {
  assertClientTurnIds(turns);
  return turns.map((t, i) => {
    const parsed = TurnSchema.safeParse(toTurn(tenant, conversation, t, t.turnId ?? assignId(i)));
    if (!parsed.success) {
      const fields = parsed.error.issues.map((x) => `${x.path.join(".")}: ${x.message}`).join("; ");
      throw ValidationError.fromZod(parsed.error, `invalid turn at index ${i}: ${fields}`);
    }
    return parsed.data;
  });
};
