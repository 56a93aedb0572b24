/**
 * The streaming form of the attention boundary rule (docs/segmenter.md; after LightMem: a boundary
 * needs both signals). For each candidate turn the segmenter gets `share`, how much of the turn's
 * attention goes to the previous turn (attention-boundaries.ts previousSpanAttention over the pair
 * window), and compares it with the recent shares of the same conversation (a robust z, like the
 * gate's surprise): a turn that looks back at its predecessor much less than usual is a dip, a
 * sign the text stopped referring back. A streaming segmenter cannot wait for the next turn to see
 * a local minimum, so "below the recent median by a margin" stands in for it.
 *
 *   gate       the similarity gate alone (attention is not computed)
 *   attention  cut at a dip (z <= dipZ), the gate's features only logged
 *   both       the gate proposes, attention confirms (z <= confirmZ) or vetoes
 *
 * The hard token cap cuts in every mode (segment-state.ts).
 */
import type { BoundaryDecision } from "../core/types.ts";
import { robustZ } from "./gate.ts";

export const BOUNDARY_MODES = ["gate", "attention", "both"] as const;
export type BoundaryMode = (typeof BOUNDARY_MODES)[number];

export interface AttentionParams {
  /** Mode attention: a turn whose share's robust z is at most this is a cut. */
  dipZ: number;
  /** Mode both: the gate's cut stands when the share's robust z is at most this (else vetoed). */
  confirmZ: number;
  /** Recent shares kept per conversation (the z's reference). */
  historySize: number;
  /** Shares needed before z is read (z is 0 until then). */
  minHistory: number;
}

/** Starting values (docs/segmenter.md has the measurements they were chosen by). */
export const DEFAULT_ATTENTION: AttentionParams = { dipZ: -1, confirmZ: 0, historySize: 64, minHistory: 5 };

/**
 * Robust z of a share against the recent shares, oriented for dips: the gate's robustZ of the
 * negated values, negated back, so it lies in [-4, 2] and a share far below the median (or below a
 * constant history) is strongly negative. 0 until `minHistory` shares.
 */
export const attentionZ = (share: number, history: readonly number[], minHistory: number): number =>
  -robustZ(
    -share,
    history.map((h) => -h),
    minHistory,
  ) || 0;

export type AttentionRecord = NonNullable<BoundaryDecision["attention"]>;

/** What attention says about one candidate turn, and whether the rule cuts there. */
export const attentionCheck = (
  mode: Exclude<BoundaryMode, "gate">,
  gateCut: boolean,
  share: number,
  z: number,
  p: AttentionParams,
): { share: number; cut: boolean; record: AttentionRecord } => {
  if (mode === "attention") {
    const agrees = z <= p.dipZ;
    return { share, cut: agrees, record: { share, z, agrees, decision: agrees ? "proposed" : "none" } };
  }
  const agrees = z <= p.confirmZ;
  const decision = !gateCut ? "none" : agrees ? "confirmed" : "vetoed";
  return { share, cut: gateCut && agrees, record: { share, z, agrees, decision } };
};
