import { isConflictError, type TurnIdConflict } from "./errors.ts";
import type { IngestResult, MemoryWriter } from "./memory-service.ts";
import type { TurnInput } from "./requests.ts";

export interface IngestAroundConflicts extends IngestResult {
  /** Turns set aside because their id exists with other content; `index` is the position in the input. */
  conflicts: TurnIdConflict[];
}

/**
 * Batch ingest that sets conflicting turns aside: a call that fails with ConflictError (nothing
 * ingested) is repeated without the turns it named, so the others are ingested in their order.
 * Bounded: every repetition has at least one turn fewer.
 */
export const ingestAroundConflicts = async (
  service: Pick<MemoryWriter, "ingest">,
  tenant: string,
  conversation: string,
  turns: readonly TurnInput[],
): Promise<IngestAroundConflicts> => {
  let remaining = turns.map((turn, index) => ({ turn, index }));
  const conflicts: TurnIdConflict[] = [];
  while (remaining.length > 0) {
    try {
      const r = await service.ingest(
        tenant,
        conversation,
        remaining.map((x) => x.turn),
      );
      return { ...r, conflicts: conflicts.sort((a, b) => a.index - b.index) };
    } catch (err) {
      if (!isConflictError(err) || err.conflicts.length === 0) throw err;
      const named = new Set(err.conflicts.map((c) => c.index));
      for (const c of err.conflicts) {
        const at = remaining[c.index];
        if (at) conflicts.push({ index: at.index, turnId: c.turnId });
      }
      remaining = remaining.filter((_, i) => !named.has(i));
    }
  }
  return { accepted: 0, turnIds: [], conflicts: conflicts.sort((a, b) => a.index - b.index) };
};
