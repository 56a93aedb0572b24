import { segmentId } from "../core/ids.ts";
import { countTokens } from "../core/tokens.ts";
import type { BoundaryDecision, CloseReason, Segment, SegmentTurn, SensoryTurn } from "../core/types.ts";
import { DEFAULT_GATE, evaluateGate, type GateParams } from "./gate.ts";

export interface SegmenterConfig {
  gate: GateParams;
  /** Short-term buffer: closed segments are held until they add up to this many tokens. 0 = no buffer. */
  bufferTokens: number;
  idleTimeoutMs: number;
}

export const defaultSegmenterConfig = (overrides: Partial<SegmenterConfig> = {}): SegmenterConfig => ({
  gate: DEFAULT_GATE,
  bufferTokens: 512,
  idleTimeoutMs: 30 * 60_000,
  ...overrides,
});

interface OpenSegment {
  sessionId: string;
  turns: SegmentTurn[];
  /** Plain arrays so the state serialises as JSON (it is durable keyed state). */
  embeddings: number[][];
  tokens: number;
  decisions: BoundaryDecision[];
}

/** Keyed state of one tenant/conversation. */
export interface SegmenterState {
  tenant: string;
  conversation: string;
  open: OpenSegment | null;
  surprises: number[];
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
  | { kind: "turn"; turn: SensoryTurn; embedding: Float32Array; nowMs: number }
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

const toSegmentTurn = (t: SensoryTurn): SegmentTurn => ({
  turnId: t.turnId,
  speaker: t.speaker,
  role: t.role,
  text: t.text,
  compressed: t.compressed,
  timestamp: t.timestamp,
  sessionId: t.sessionId,
});

const openWith = (turn: SensoryTurn, embedding: Float32Array, tokens: number): OpenSegment => ({
  sessionId: turn.sessionId,
  turns: [toSegmentTurn(turn)],
  embeddings: [Array.from(embedding)],
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
  const gate = evaluateGate(
    {
      segment: open.embeddings.map((e) => Float32Array.from(e)),
      segmentTokens: open.tokens,
      candidate: embedding,
      surpriseHistory: s.surprises,
    },
    cfg.gate,
  );
  const surprises = [...s.surprises, gate.surprise].slice(-cfg.gate.historySize);
  const overCap = open.tokens + tokens > cfg.gate.hardCapTokens;
  const cut = gate.cut || overCap;
  const decision: BoundaryDecision = {
    turnId: turn.turnId,
    ...gate,
    cut,
    ...(cut ? { reason: overCap && !gate.cut ? ("hard-cap" as const) : ("gate" as const) } : {}),
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
        turns: [...open.turns, toSegmentTurn(turn)],
        embeddings: [...open.embeddings, Array.from(embedding)],
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
