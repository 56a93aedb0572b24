import { ValidationError } from "./errors.ts";
import type { Turn } from "./types.ts";

/**
 * Turn ids the service assigns (to turns sent without one) start with this prefix, which client
 * ids may not use: an assigned id can never be one a client sent before or will send later. The
 * embedded runtime numbers them per tenant and conversation (`@1`, `@2`, ...: a durable counter, so
 * no tenant learns how much another ingested); the distributed gateway, which keeps no counter,
 * appends a random UUID (`@` + UUID).
 */
export const SERVER_TURN_ID_PREFIX = "@";

export const isServerTurnId = (turnId: string): boolean => turnId.startsWith(SERVER_TURN_ID_PREFIX);

/** Why a client turn id with the reserved prefix is refused (the 400 names the turnId field). */
export const RESERVED_TURN_ID_MESSAGE = `must not start with "${SERVER_TURN_ID_PREFIX}": that prefix is reserved for turn ids the service assigns`;

/**
 * What makes two turns with one id the same turn: everything the client sent. A retry with the same
 * content is idempotent; with other content it is a conflict (services/core/errors.ts ConflictError).
 */
export const turnContent = (t: Turn): string =>
  JSON.stringify([
    t.speaker,
    t.role,
    t.text,
    t.timestamp,
    t.sessionId,
    Object.entries(t.metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  ]);

/** Refuses client turn ids with the reserved prefix (for callers that bypass TurnInputSchema). */
export const assertClientTurnIds = (turns: readonly { turnId?: string | undefined }[]): void => {
  turns.forEach((t, i) => {
    if (t.turnId !== undefined && isServerTurnId(t.turnId))
      throw new ValidationError(`invalid turn at index ${i}: turnId: ${RESERVED_TURN_ID_MESSAGE}`, [
        { path: `turns.${i}.turnId`, message: RESERVED_TURN_ID_MESSAGE },
      ]);
  });
};
