/**
 * Splitting turns into batch requests the server accepts: at most `maxTurns` turns (the batch
 * request's `turns.maxItems` in schemas/openapi.yaml, generated into limits.ts) and at most
 * `maxBytes` of JSON body (the server's `MEMORY_HTTP_MAX_BODY_BYTES`, 5 MiB by default; the
 * document states it in prose only, so it is a client option). Order is kept: the server ingests a
 * batch in order, and batches go one after another.
 */

export interface BatchLimits {
  maxTurns: number;
  maxBytes: number;
}

/** One request's turns, with each turn's index in the caller's array. */
export interface PlannedBatch<T> {
  indices: number[];
  turns: T[];
}

export interface BatchPlan<T> {
  batches: PlannedBatch<T>[];
  /** Indices of turns whose JSON alone is over `maxBytes` (no request could carry them). */
  tooLarge: number[];
}

/** `{"turns":[` and `]}` around the comma-separated turns. */
const ENVELOPE_BYTES = '{"turns":[]}'.length;
const encoder = new TextEncoder();

/** Bytes of a value's JSON body (UTF-8), as fetch will send it. */
export const jsonBytes = (value: unknown): number => encoder.encode(JSON.stringify(value)).length;

export const planBatches = <T>(turns: readonly T[], limits: BatchLimits): BatchPlan<T> => {
  if (!Number.isInteger(limits.maxTurns) || limits.maxTurns < 1) {
    throw new RangeError(`maxTurns must be a positive integer, got ${limits.maxTurns}`);
  }
  if (!(limits.maxBytes > ENVELOPE_BYTES)) {
    throw new RangeError(`maxBytes must be over ${ENVELOPE_BYTES}, got ${limits.maxBytes}`);
  }
  const batches: PlannedBatch<T>[] = [];
  const tooLarge: number[] = [];
  let current: PlannedBatch<T> = { indices: [], turns: [] };
  let bytes = ENVELOPE_BYTES;
  turns.forEach((turn, index) => {
    const size = jsonBytes(turn);
    if (ENVELOPE_BYTES + size > limits.maxBytes) {
      tooLarge.push(index);
      return;
    }
    const separator = current.turns.length > 0 ? 1 : 0;
    if (current.turns.length >= limits.maxTurns || bytes + separator + size > limits.maxBytes) {
      batches.push(current);
      current = { indices: [], turns: [] };
      bytes = ENVELOPE_BYTES;
    }
    bytes += (current.turns.length > 0 ? 1 : 0) + size;
    current.indices.push(index);
    current.turns.push(turn);
  });
  if (current.turns.length > 0) batches.push(current);
  return { batches, tooLarge };
};
