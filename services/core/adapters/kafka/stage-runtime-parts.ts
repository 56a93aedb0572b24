/**
 * The broker-free decisions of the stage runtime (stage-runtime.ts), kept apart so that they are
 * tested without Kafka: how a batch is cut into transactions and a transaction into sends, when a
 * failed handler is retried and after how long, which offset is committed and how far behind a
 * partition is, how a message becomes a stage input (control header or value), how outputs and
 * keyed state become messages, and how the changelog is read back.
 */
import type { IHeaders, Message } from "kafkajs";
import { z } from "zod";
import type { StageStateEnvelope, TopicCodec } from "./serde.ts";
import {
  CONTROL_HEADER,
  type ControlKind,
  ERASED_IDS_HEADER,
  ERASED_IDS_PER_CONTROL,
  isControlKind,
} from "./topics.ts";

/** A handler error that no retry can fix (e.g. a key that does not match its value): straight to the DLQ. */
export class PoisonError extends Error {
  override readonly name = "PoisonError";
}

export type StageInput<I> =
  | { kind: "event"; value: I }
  | { kind: "control"; control: ControlKind; erasedIds?: readonly string[] };

/** One output message: a value, or a control message (null value + header) that keeps its place. */
export type StageOutput<O> =
  | { key: string; value: O }
  | { key: string; control: ControlKind; erasedIds?: readonly string[] };

const ErasedIdsSchema = z.array(z.string().min(1).max(256)).max(ERASED_IDS_PER_CONTROL);

// --- Chunks and sends ------------------------------------------------------------------------------

/** Consecutive slices of at most `size` items, in order: the transactions of one fetched batch. */
export const chunksOf = <T>(items: readonly T[], size: number): T[][] => {
  if (!Number.isInteger(size) || size < 1) throw new RangeError(`chunk size must be a positive integer, got ${size}`);
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
};

/**
 * Most key + value bytes one send of a transaction carries. kafkajs puts a send's messages for one
 * partition into one record batch, and the broker refuses a batch over its message limit (1 MB by
 * default); a chunk's outputs, dead letters and changelog entries can together pass that, so they
 * go in several sends of one transaction, in order.
 */
export const SEND_MAX_BYTES = 512 * 1024;

/**
 * Most key + value bytes of everything one transaction writes (outputs, dead letters, changelog):
 * a chunk whose outputs or changed states grow past it is committed in several transactions, each
 * with the offsets it covers, so a transaction's sends finish well inside its timeout and no
 * commit carries an unbounded amount of data.
 */
export const TX_MAX_BYTES = 8 * 1024 * 1024;

/**
 * The broker's default message.max.bytes (1 MB) less room for the record batch's own overhead:
 * one message over it can never be written, however the transaction is split.
 */
export const MESSAGE_MAX_BYTES = 1_000_000 - 16 * 1024;

export type TopicMessages = { topic: string; messages: Message[] };

/** Key + value bytes of a message plus a fixed allowance for its record overhead. */
export const sizeOf = (m: Message): number => {
  const bytes = (v: Message["key"] | Message["value"]): number =>
    v == null ? 0 : typeof v === "string" ? Buffer.byteLength(v) : v.length;
  return bytes(m.key) + bytes(m.value) + 64;
};

/** Consecutive groups of the messages, each at most maxBytes (a larger single message goes alone), order kept. */
export const splitBySize = (topicMessages: readonly TopicMessages[], maxBytes: number): TopicMessages[][] => {
  const parts: TopicMessages[][] = [];
  let part: TopicMessages[] = [];
  let size = 0;
  for (const { topic, messages } of topicMessages) {
    for (const m of messages) {
      const n = sizeOf(m);
      if (size > 0 && size + n > maxBytes) {
        parts.push(part);
        part = [];
        size = 0;
      }
      const last = part.at(-1);
      if (last?.topic === topic) last.messages.push(m);
      else part.push({ topic, messages: [m] });
      size += n;
    }
  }
  if (part.length > 0) parts.push(part);
  return parts;
};

// --- Retries ---------------------------------------------------------------------------------------

export type RetryDecision = { retry: true; delayMs: number } | { retry: false };

/**
 * What follows failed attempt `attempt` (1-based) of a handler: a PoisonError is never retried;
 * another error is retried after backoffMs, 2·backoffMs, 4·backoffMs … until maxAttempts attempts
 * have failed, and then the event becomes a dead letter.
 */
export const afterFailure = (err: unknown, attempt: number, maxAttempts: number, backoffMs: number): RetryDecision =>
  err instanceof PoisonError || attempt >= maxAttempts
    ? { retry: false }
    : { retry: true, delayMs: backoffMs * 2 ** (attempt - 1) };

// --- Offsets ---------------------------------------------------------------------------------------

/** The offset committed after processing `lastOffset`: the next one to read (Kafka's convention). */
export const nextOffset = (lastOffset: string): string => (BigInt(lastOffset) + 1n).toString();

/** Messages of the partition still unread after `lastOffset`, its high watermark being the next offset to write. */
export const lagAfter = (highWatermark: string, lastOffset: string): number =>
  Math.max(0, Number(BigInt(highWatermark) - BigInt(lastOffset) - 1n));

// --- Inputs ----------------------------------------------------------------------------------------

const headerString = (headers: IHeaders | undefined, name: string): string | undefined => {
  const h = headers?.[name];
  const v = Array.isArray(h) ? h[0] : h;
  return v === undefined ? undefined : v.toString();
};

export type DecodedInput<I> = { ok: true; input: StageInput<I> } | { ok: false; reason: string };

/** A message as a stage input: a control header wins over the value; an unknown control kind or a bad value is refused. */
export const decodeStageInput = async <I>(
  m: { headers?: IHeaders; value: Buffer | null },
  codec: Pick<TopicCodec<I>, "decode">,
): Promise<DecodedInput<I>> => {
  const control = headerString(m.headers, CONTROL_HEADER);
  if (control !== undefined) {
    if (!isControlKind(control)) return { ok: false, reason: `unknown control message "${control}"` };
    const idsHeader = headerString(m.headers, ERASED_IDS_HEADER);
    if (idsHeader === undefined) return { ok: true, input: { kind: "control", control } };
    let ids: z.infer<typeof ErasedIdsSchema>;
    try {
      ids = ErasedIdsSchema.parse(JSON.parse(idsHeader));
    } catch {
      return { ok: false, reason: `${ERASED_IDS_HEADER}: not a JSON array of record ids` };
    }
    return { ok: true, input: { kind: "control", control, erasedIds: ids } };
  }
  const decoded = await codec.decode(m.value);
  return decoded.ok ? { ok: true, input: { kind: "event", value: decoded.value } } : decoded;
};

/** The metric label of a refused input: what its reason says before the first colon. */
export const refusalLabel = (reason: string): string => reason.split(":")[0] ?? "decode";

// --- Outputs and keyed state -----------------------------------------------------------------------

/** A handler's outputs as messages: values encoded with the output codec, controls as null values with the header. */
export const outputMessages = async <O>(
  stage: string,
  outputs: readonly StageOutput<O>[],
  codec: Pick<TopicCodec<O>, "encode"> | undefined,
): Promise<Message[]> => {
  const messages: Message[] = [];
  for (const out of outputs) {
    if ("control" in out)
      messages.push({
        key: out.key,
        value: null,
        headers: {
          [CONTROL_HEADER]: out.control,
          ...(out.erasedIds?.length ? { [ERASED_IDS_HEADER]: JSON.stringify(out.erasedIds) } : {}),
        },
      });
    else {
      if (!codec) throw new Error(`${stage} has no output topic`);
      messages.push({ key: out.key, value: await codec.encode(out.value) });
    }
  }
  return messages;
};

/** How a stage's keyed state is versioned and written (the part of StageStateSpec these functions need). */
export interface StateFormat<S> {
  version: number;
  codec: Pick<TopicCodec<StageStateEnvelope>, "encode">;
  toJson?(state: S): string;
}

/**
 * The changelog entries of the keys a chunk changed, all to `partition` (the input partition, so
 * that partition p's state is exactly changelog partition p); a deleted state is a tombstone.
 */
export const changelogMessages = async <S>(
  stage: string,
  dirty: ReadonlyMap<string, S | undefined>,
  format: StateFormat<S>,
  partition: number,
  now: string,
): Promise<Message[]> => {
  const messages: Message[] = [];
  for (const [key, s] of dirty) {
    const value =
      s === undefined
        ? null
        : await format.codec.encode({
            stage,
            key,
            stateVersion: format.version,
            payload: format.toJson ? format.toJson(s) : JSON.stringify(s),
            updatedAt: now,
          });
    messages.push({ key, value, partition });
  }
  return messages;
};

/**
 * Erasure (issue 13): marks deleted, in the chunk's changed states, every key held or changed that
 * `drop` selects; the commit writes their tombstones and applyStates removes them.
 */
export const dropMatching = <S>(
  states: ReadonlyMap<string, S>,
  dirty: Map<string, S | undefined>,
  drop: (key: string) => boolean,
): void => {
  for (const key of [...states.keys(), ...dirty.keys()]) if (drop(key)) dirty.set(key, undefined);
};

/** After the commit: the changed keys' states replace the held ones; undefined deletes. */
export const applyStates = <S>(states: Map<string, S>, dirty: ReadonlyMap<string, S | undefined>): void => {
  for (const [key, s] of dirty) {
    if (s === undefined) states.delete(key);
    else states.set(key, s);
  }
};

// --- Restore ---------------------------------------------------------------------------------------

/** A changelog entry's state; an older version goes through the stage's migrate(), any other is refused. */
export const stateFromEnvelope = <S>(
  format: { version: number; fromJson?(json: string): S; migrate?(fromVersion: number, json: string): S },
  env: Pick<StageStateEnvelope, "stateVersion" | "payload">,
): S => {
  if (env.stateVersion < format.version && format.migrate) return format.migrate(env.stateVersion, env.payload);
  if (env.stateVersion !== format.version)
    throw new Error(`changelog state version ${env.stateVersion}, stage expects ${format.version}`);
  return format.fromJson ? format.fromJson(env.payload) : (JSON.parse(env.payload) as S);
};

/** The changelog partitions to read at assignment, each up to its high watermark (empty ones are skipped). */
export const restoreTargets = (
  offsets: readonly { partition: number; high: string; low: string }[],
  partitions: readonly number[],
): Map<number, bigint> => {
  const target = new Map<number, bigint>();
  for (const p of partitions) {
    const o = offsets.find((x) => x.partition === p);
    const high = BigInt(o?.high ?? "0");
    const low = BigInt(o?.low ?? "0");
    if (high > low) target.set(p, high);
  }
  return target;
};

/** Whether the reader has seen partition p up to its target (the last offset before the high watermark). */
export const restoredUpTo = (seen: ReadonlyMap<number, bigint>, target: ReadonlyMap<number, bigint>, p: number) =>
  (seen.get(p) ?? -1n) >= (target.get(p) ?? 0n) - 1n;
