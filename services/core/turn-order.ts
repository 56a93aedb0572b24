import { parseTurnRowId } from "./ids.ts";
import type { StoredTurn, TurnStore } from "./ports.ts";

export interface TurnKey {
  conversation: string;
  turnId: string;
}

/** Turn keys from `turnRowId` ids; an id that is not one names no turn and is left out. */
export const turnKeysOf = (rowIds: readonly string[]): TurnKey[] => {
  const keys: TurnKey[] = [];
  for (const id of rowIds) {
    const key = parseTurnRowId(id);
    if (key) keys.push(key);
  }
  return keys;
};

/** Found rows in the order the keys were asked, each once; keys with no row are skipped. */
export const inAskedOrder = <R, T>(
  asked: readonly TurnKey[],
  rows: readonly R[],
  keyOfRow: (row: R) => TurnKey,
  convert: (row: R) => T,
): T[] => {
  const key = (k: TurnKey): string => `${k.conversation}\u0000${k.turnId}`;
  const byKey = new Map(rows.map((r) => [key(keyOfRow(r)), r]));
  const out: T[] = [];
  const seen = new Set<string>();
  for (const k of asked) {
    const id = key(k);
    const row = byKey.get(id);
    if (row === undefined || seen.has(id)) continue;
    seen.add(id);
    out.push(convert(row));
  }
  return out;
};

/**
 * Turns by `turnRowId(conversation, turnId)`, in the order asked; malformed or unknown ids are
 * skipped. Derived from TurnStore.getTurns, the same for every store.
 */
export const getTurnsByRowIds = (
  store: Pick<TurnStore, "getTurns">,
  tenant: string,
  rowIds: readonly string[],
): Promise<StoredTurn[]> => store.getTurns(tenant, turnKeysOf(rowIds));
