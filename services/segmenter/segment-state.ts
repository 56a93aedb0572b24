import { z } from "zod";
import { segmentId } from "../core/ids.ts";
import { countTokens } from "../core/tokens.ts";
import {
  type BoundaryDecision,
  type CloseReason,
  type Segment,
  type SegmentTurn,
  type SensoryTurn,
  segmentTurnOf,
} from "../core/types.ts";
import {
  type AttentionParams,
  attentionCheck,
  attentionZ,
  type BoundaryMode,
  DEFAULT_ATTENTION,
} from "./attention-rule.ts";
import { DEFAULT_GATE, evaluateGate, extendSummary, type GateParams, type SegmentSummary, summarise } from "./gate.ts";

export interface SegmenterConfig {
  gate: GateParams;
  /**
   * Which signals cut (docs/segmenter.md): the similarity gate, the attention dip, or the gate
   * confirmed by attention. Default "gate".
   */
  boundaries?: BoundaryMode;
  /** The attention rule's thresholds (default DEFAULT_ATTENTION). */
  attention?: AttentionParams;
  /** Short-term buffer: closed segments are held until they add up to this many tokens. 0 = no buffer. */
  bufferTokens: number;
  idleTimeoutMs: number;
}

export const defaultSegmenterConfig = (overrides: Partial<SegmenterConfig> = {}): SegmenterConfig => ({
  gate: DEFAULT_GATE,
  boundaries: "gate",
  attention: DEFAULT_ATTENTION,
  bufferTokens: 512,
  idleTimeoutMs: 30 * 60_000,
  ...overrides,
});

/**
 * The gate's summary of the open segment's embeddings (gate.ts SegmentSummary) in a JSON-safe form:
 * vectors as base64 of their little-endian float32 / float64 bytes, exact and about 4x smaller than
 * JSON numbers. Constant size whatever the number of turns (about 10 KB at 384 dimensions).
 */
export interface StoredSummary {
  count: number;
  sum: string;
  last: string[];
  unitSum: string;
  pairCosines: number;
}

export interface OpenSegment {
  sessionId: string;
  turns: SegmentTurn[];
  gate: StoredSummary;
  tokens: number;
  decisions: BoundaryDecision[];
}

/** Keyed state of one tenant/conversation. */
export interface SegmenterState {
  tenant: string;
  conversation: string;
  open: OpenSegment | null;
  surprises: number[];
  /** Recent attention shares (modes attention / both); absent in states written before them. */
  attentionShares?: number[];
  buffer: Segment[];
  bufferTokens: number;
  lastActivityMs: number;
}

export const initialSegmenterState = (tenant: string, conversation: string): SegmenterState => ({
  tenant,
  conversation,
  open: null,
  surprises: [],
  buffer: [],
  bufferTokens: 0,
  lastActivityMs: 0,
});

export type SegmenterInput =
  | {
      kind: "turn";
      turn: SensoryTurn;
      embedding: Float32Array;
      /**
       * Share of this turn's attention on the previous turn (the last of the open segment), when
       * the boundaries use attention; undefined or NaN = no attention signal for this turn.
       */
      attention?: number;
      nowMs: number;
    }
  | { kind: "flush"; reason: Extract<CloseReason, "session-end" | "idle" | "flush">; nowMs: number };

export interface SegmenterOutput {
  state: SegmenterState;
  /** Segments released by the short-term buffer, in order. */
  segments: Segment[];
}

const close = (state: SegmenterState, open: OpenSegment, reason: CloseReason): Segment => {
  const first = open.turns[0] as SegmentTurn;
  const last = open.turns[open.turns.length - 1] as SegmentTurn;
  return {
    id: segmentId(state.tenant, state.conversation, first.turnId, last.turnId),
    tenant: state.tenant,
    conversation: state.conversation,
    sessionId: open.sessionId,
    turns: open.turns,
    start: first.timestamp,
    end: last.timestamp,
    tokens: open.tokens,
    closedBy: reason,
    decisions: open.decisions,
  };
};

const withClosed = (state: SegmenterState, segment: Segment): SegmenterState => ({
  ...state,
  open: null,
  buffer: [...state.buffer, segment],
  bufferTokens: state.bufferTokens + segment.tokens,
});

const release = (state: SegmenterState, force: boolean, bufferTokens: number): SegmenterOutput => {
  if (state.buffer.length > 0 && (force || state.bufferTokens >= bufferTokens))
    return { state: { ...state, buffer: [], bufferTokens: 0 }, segments: state.buffer };
  return { state, segments: [] };
};

const f32ToBase64 = (v: Float32Array): string => {
  const b = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) b.writeFloatLE(v[i] as number, i * 4);
  return b.toString("base64");
};
const f64ToBase64 = (v: Float64Array): string => {
  const b = Buffer.alloc(v.length * 8);
  for (let i = 0; i < v.length; i++) b.writeDoubleLE(v[i] as number, i * 8);
  return b.toString("base64");
};
const base64ToF32 = (s: string): Float32Array => {
  const b = Buffer.from(s, "base64");
  const v = new Float32Array(b.length >> 2);
  for (let i = 0; i < v.length; i++) v[i] = b.readFloatLE(i * 4);
  return v;
};
const base64ToF64 = (s: string): Float64Array => {
  const b = Buffer.from(s, "base64");
  const v = new Float64Array(b.length >> 3);
  for (let i = 0; i < v.length; i++) v[i] = b.readDoubleLE(i * 8);
  return v;
};

export const storeSummary = (s: SegmentSummary): StoredSummary => ({
  count: s.count,
  sum: f32ToBase64(s.sum),
  last: s.last.map(f32ToBase64),
  unitSum: f64ToBase64(s.unitSum),
  pairCosines: s.pairCosines,
});

export const loadSummary = (s: StoredSummary): SegmentSummary => ({
  count: s.count,
  sum: base64ToF32(s.sum),
  last: s.last.map(base64ToF32),
  unitSum: base64ToF64(s.unitSum),
  pairCosines: s.pairCosines,
});

const openWith = (turn: SensoryTurn, embedding: Float32Array, tokens: number): OpenSegment => ({
  sessionId: turn.sessionId,
  turns: [segmentTurnOf(turn)],
  gate: storeSummary(extendSummary(undefined, embedding)),
  tokens,
  decisions: [],
});

/**
 * The segmenter handler (pure): one open segment per key, closed by the boundary gate, the hard
 * token cap, a session change, idleness or an explicit flush; closed segments pass through the
 * short-term buffer. Every decision is kept with the segment it was taken against.
 */
export const segmenterStep = (state: SegmenterState, input: SegmenterInput, cfg: SegmenterConfig): SegmenterOutput => {
  if (input.kind === "flush") {
    const closed = state.open ? withClosed(state, close(state, state.open, input.reason)) : state;
    return release({ ...closed, lastActivityMs: input.nowMs }, true, cfg.bufferTokens);
  }
  const { turn, embedding, nowMs } = input;
  const tokens = countTokens(turn.text);
  let s: SegmenterState = { ...state, lastActivityMs: nowMs };
  let sessionEnded = false;

  if (s.open && s.open.sessionId !== turn.sessionId) {
    s = withClosed(s, close(s, s.open, "session-end"));
    sessionEnded = true;
  }
  if (!s.open) {
    const out = release(s, sessionEnded, cfg.bufferTokens);
    return { state: { ...out.state, open: openWith(turn, embedding, tokens) }, segments: out.segments };
  }

  const open = s.open;
  const summary = loadSummary(open.gate);
  const gate = evaluateGate(
    {
      segment: summary,
      segmentTokens: open.tokens,
      candidate: embedding,
      surpriseHistory: s.surprises,
    },
    cfg.gate,
  );
  const surprises = [...s.surprises, gate.surprise].slice(-cfg.gate.historySize);
  const overCap = open.tokens + tokens > cfg.gate.hardCapTokens;
  // The attention rule (attention-rule.ts): none in mode gate; otherwise it proposes (mode
  // attention) or confirms / vetoes the gate's cut (mode both).
  const mode = cfg.boundaries ?? "gate";
  const params = cfg.attention ?? DEFAULT_ATTENTION;
  const shares = s.attentionShares ?? [];
  const att =
    mode === "gate" || input.attention === undefined || !Number.isFinite(input.attention)
      ? undefined
      : attentionCheck(mode, gate.cut, input.attention, attentionZ(input.attention, shares, params.minHistory), params);
  if (att) s = { ...s, attentionShares: [...shares, att.share].slice(-params.historySize) };
  // Without a share (no model output for this turn) mode both falls back to the gate, mode attention does not cut.
  const boundary = att ? att.cut : mode !== "attention" && gate.cut;
  const cut = boundary || overCap;
  const ruleReason = mode === "attention" ? ("attention" as const) : ("gate" as const);
  const decision: BoundaryDecision = {
    turnId: turn.turnId,
    ...gate,
    cut,
    ...(cut ? { reason: overCap && !boundary ? ("hard-cap" as const) : ruleReason } : {}),
    ...(att ? { attention: att.record } : {}),
  };

  if (cut) {
    const reason: CloseReason = decision.reason ?? "gate";
    s = withClosed({ ...s, surprises }, close(s, { ...open, decisions: [...open.decisions, decision] }, reason));
    const out = release(s, false, cfg.bufferTokens);
    return { state: { ...out.state, open: openWith(turn, embedding, tokens) }, segments: out.segments };
  }
  return {
    state: {
      ...s,
      surprises,
      open: {
        ...open,
        turns: [...open.turns, segmentTurnOf(turn)],
        gate: storeSummary(extendSummary(summary, embedding)),
        tokens: open.tokens + tokens,
        decisions: [...open.decisions, decision],
      },
    },
    segments: [],
  };
};

/** Idle check (runtime tick): a key silent for longer than the timeout is flushed. */
export const isIdle = (state: SegmenterState, nowMs: number, cfg: SegmenterConfig): boolean =>
  (state.open !== null || state.buffer.length > 0) && nowMs - state.lastActivityMs >= cfg.idleTimeoutMs;

/**
 * Whether the key's state can be deleted (a changelog tombstone): nothing open, nothing buffered
 * and no surprise history. The history is what the gate's robust z reads when the conversation
 * resumes (z stays 0 until minHistory surprises), so a key that has one keeps it — at most
 * historySize numbers, about 1.3 KB — rather than change the next session's boundaries.
 */
export const isDisposable = (state: SegmenterState): boolean =>
  state.open === null &&
  state.buffer.length === 0 &&
  state.surprises.length === 0 &&
  (state.attentionShares?.length ?? 0) === 0;

// --- Old state formats ---------------------------------------------------------------------------

/** State format 1 kept every open turn's embedding as a JSON number array (~8 KB per turn). */
const V1OpenSchema = z.object({ embeddings: z.array(z.array(z.number())) }).passthrough();

/**
 * A stored segmenter state of either format as the current one: a format-1 open segment's
 * embeddings become the gate summary they add up to (the same summary the current code would have
 * built turn by turn, so decisions after an upgrade are those of a fresh run). Used by the Kafka
 * changelog migration and by the embedded runtime's state store, which holds the same JSON.
 */
export const upgradeSegmenterState = <S extends SegmenterState>(raw: S): S => {
  const open: unknown = raw.open;
  if (open === null || typeof open !== "object" || !("embeddings" in open)) return raw;
  const v1 = V1OpenSchema.parse(open);
  const { embeddings, ...rest } = v1;
  if (embeddings.length === 0) throw new Error("format-1 segmenter state: an open segment without embeddings");
  const gate = storeSummary(summarise(embeddings.map((e) => Float32Array.from(e))));
  return { ...raw, open: { ...(rest as Omit<OpenSegment, "gate">), gate } };
};
