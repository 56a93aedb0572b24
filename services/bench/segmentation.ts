/**
 * `memory bench segmentation` (docs/segmenter.md): how the segmenter's boundary modes (gate,
 * attention, both) agree with the LoCoMo conversations' session boundaries when the segmenter is
 * NOT told where sessions end: each conversation is one stream (one session id for every turn),
 * no flushes, no idle timeout. A session break cut exactly there is found; a cut inside a session
 * is allowed (a topic change), a break not cut is a miss. Also: cuts per session, segment count and
 * length distribution, and what embedding and attention cost. Embeddings and attention shares are
 * computed once per conversation and shared by the three modes, so the modes differ only in the rule.
 */

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { LocomoConversation } from "../core/datasets/locomo.ts";
import { loadLocomo } from "../core/datasets/locomo.ts";
import type { Embedder, TurnAttention } from "../core/ports.ts";
import { countTokens } from "../core/tokens.ts";
import { turnEmbeddingText } from "../core/turn-text.ts";
import type { SensoryTurn } from "../core/types.ts";
import { BOUNDARY_MODES, type BoundaryMode } from "../segmenter/attention-rule.ts";
import { AttentionScorer } from "../segmenter/attention-scorer.ts";
import {
  defaultSegmenterConfig,
  initialSegmenterState,
  type SegmenterConfig,
  segmenterStep,
} from "../segmenter/segment-state.ts";

export interface SegmentationModeResult {
  mode: BoundaryMode;
  sessions: number;
  sessionBreaks: number;
  /** Breaks cut at exactly the first turn of the new session. */
  breaksFound: number;
  /** Breaks with a cut within one turn of them. */
  breaksFoundWithin1: number;
  recall: number;
  recallWithin1: number;
  cuts: number;
  cutsPerSession: number;
  /** Cuts by reason (gate / attention / hard-cap). */
  cutReasons: Record<string, number>;
  /** Gate cuts that attention vetoed (mode both). */
  vetoed: number;
  segments: number;
  /** Turns per segment. */
  turns: Distribution;
  /** Tokens per segment. */
  tokens: Distribution;
  /** Segments holding turns of more than one session. */
  segmentsAcrossSessions: number;
}

export interface Distribution {
  min: number;
  p25: number;
  median: number;
  p75: number;
  max: number;
  mean: number;
}

/** One threshold of a sweep: the mode's rule with one attention threshold changed. */
export interface SweepRow {
  mode: "attention" | "both";
  param: "dipZ" | "confirmZ";
  value: number;
  breaksFound: number;
  sessionBreaks: number;
  recall: number;
  recallWithin1: number;
  cuts: number;
  cutsPerSession: number;
  medianTurns: number;
}

export interface SegmentationReport {
  config: {
    dataFile: string;
    dataSha256: string;
    conversations: string[];
    turns: number;
    embedder: string;
    attention: string;
    gateThreshold: number;
    attentionParams: SegmenterConfig["attention"];
    date: string;
  };
  cost: {
    embedSeconds: number;
    attentionSeconds: number;
    /** attention / embedding time for the same turns. */
    attentionOverEmbedding: number;
    attentionMsPerTurn: number;
  };
  modes: SegmentationModeResult[];
  /** Attention thresholds swept on the same model outputs (--dip-z, --confirm-z). */
  sweep: SweepRow[];
}

const quantile = (sorted: readonly number[], q: number): number => {
  if (sorted.length === 0) return Number.NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
};

export const distribution = (xs: readonly number[]): Distribution => {
  const s = [...xs].sort((a, b) => a - b);
  return {
    min: s[0] ?? Number.NaN,
    p25: quantile(s, 0.25),
    median: quantile(s, 0.5),
    p75: quantile(s, 0.75),
    max: s[s.length - 1] ?? Number.NaN,
    mean: s.length > 0 ? s.reduce((a, b) => a + b, 0) / s.length : Number.NaN,
  };
};

/** One conversation's turns as the segmenter sees them, all under one session id (the stream). */
const streamTurns = (c: LocomoConversation): { turns: SensoryTurn[]; sessions: string[] } => {
  const turns = c.turns.map(
    (t, i): SensoryTurn => ({
      tenant: "bench",
      conversation: c.id,
      turnId: t.turnId ?? `t${i}`,
      speaker: t.speaker,
      role: t.role,
      text: t.text,
      timestamp: new Date(t.timestamp).toISOString(),
      sessionId: "stream",
      compressed: t.text,
      keptRatio: 1,
    }),
  );
  return { turns, sessions: c.turns.map((t) => t.sessionId) };
};

/** The turns each mode cuts before (index of the first turn of a new segment) and the reasons. */
export const segmentStream = (
  turns: readonly SensoryTurn[],
  embeddings: readonly Float32Array[],
  shares: readonly number[],
  cfg: SegmenterConfig,
): { cuts: number[]; reasons: string[]; vetoed: number } => {
  let state = initialSegmenterState("bench", turns[0]?.conversation ?? "c");
  const cuts: number[] = [];
  const reasons: string[] = [];
  let vetoed = 0;
  turns.forEach((turn, i) => {
    const share = shares[i];
    const out = segmenterStep(
      state,
      {
        kind: "turn",
        turn,
        embedding: embeddings[i]!,
        ...(share !== undefined && Number.isFinite(share) ? { attention: share } : {}),
        nowMs: i,
      },
      cfg,
    );
    state = out.state;
    const open = state.open;
    if (i > 0 && open && open.turns.length === 1) {
      cuts.push(i);
      const last = state.buffer[state.buffer.length - 1] ?? out.segments[out.segments.length - 1];
      reasons.push(last?.closedBy ?? "?");
    }
    const decision = open?.decisions[open.decisions.length - 1];
    if (i > 0 && open && open.turns.length > 1 && decision?.attention?.decision === "vetoed") vetoed++;
  });
  return { cuts, reasons, vetoed };
};

const modeResult = (
  mode: BoundaryMode,
  convs: readonly { turns: SensoryTurn[]; sessions: string[]; cuts: number[]; reasons: string[]; vetoed: number }[],
): SegmentationModeResult => {
  let sessions = 0;
  let breaks = 0;
  let found = 0;
  let found1 = 0;
  let cuts = 0;
  let vetoed = 0;
  let across = 0;
  const reasons: Record<string, number> = {};
  const turnsPer: number[] = [];
  const tokensPer: number[] = [];
  for (const c of convs) {
    sessions += new Set(c.sessions).size;
    const cutSet = new Set(c.cuts);
    for (let i = 1; i < c.sessions.length; i++) {
      if (c.sessions[i] === c.sessions[i - 1]) continue;
      breaks++;
      if (cutSet.has(i)) found++;
      if (cutSet.has(i) || cutSet.has(i - 1) || cutSet.has(i + 1)) found1++;
    }
    cuts += c.cuts.length;
    vetoed += c.vetoed;
    for (const r of c.reasons) reasons[r] = (reasons[r] ?? 0) + 1;
    const starts = [0, ...c.cuts, c.turns.length];
    for (let k = 0; k + 1 < starts.length; k++) {
      const seg = c.turns.slice(starts[k], starts[k + 1]);
      turnsPer.push(seg.length);
      tokensPer.push(seg.reduce((a, t) => a + countTokens(t.text), 0));
      if (new Set(c.sessions.slice(starts[k], starts[k + 1])).size > 1) across++;
    }
  }
  return {
    mode,
    sessions,
    sessionBreaks: breaks,
    breaksFound: found,
    breaksFoundWithin1: found1,
    recall: breaks > 0 ? found / breaks : Number.NaN,
    recallWithin1: breaks > 0 ? found1 / breaks : Number.NaN,
    cuts,
    cutsPerSession: cuts / Math.max(sessions, 1),
    cutReasons: reasons,
    vetoed,
    segments: turnsPer.length,
    turns: distribution(turnsPer),
    tokens: distribution(tokensPer),
    segmentsAcrossSessions: across,
  };
};

export interface SegmentationBenchOptions {
  data: string;
  conversations?: readonly string[];
  embedder: Embedder;
  attention: TurnAttention;
  /** Segmenter settings (gate threshold, hard cap, attention thresholds); the mode is set per run. */
  segmenter: SegmenterConfig;
  modes?: readonly BoundaryMode[];
  /** Mode attention's dipZ values to sweep (default none). */
  dipZs?: readonly number[];
  /** Mode both's confirmZ values to sweep (default none). */
  confirmZs?: readonly number[];
}

/** Runs the three modes over the chosen conversations; the model work is done once per conversation. */
export const runSegmentationBench = async (options: SegmentationBenchOptions): Promise<SegmentationReport> => {
  const dataFile = resolve(options.data);
  const all = loadLocomo(dataFile);
  const wanted = options.conversations && options.conversations.length > 0 ? new Set(options.conversations) : null;
  const chosen = wanted ? all.filter((c) => wanted.has(c.id)) : all;
  const missing = wanted ? [...wanted].filter((id) => !all.some((c) => c.id === id)) : [];
  if (missing.length > 0) throw new Error(`unknown conversation id(s) ${missing.join(", ")} in ${dataFile}`);
  if (chosen.length === 0) throw new Error(`no conversations in ${dataFile}`);
  const scorer = new AttentionScorer(options.attention);
  let embedMs = 0;
  let attentionMs = 0;
  let turnCount = 0;
  const prepared: { turns: SensoryTurn[]; sessions: string[]; embeddings: Float32Array[]; shares: number[] }[] = [];
  for (const c of chosen) {
    const { turns, sessions } = streamTurns(c);
    const texts = turns.map((t) => turnEmbeddingText(t.speaker, t.text));
    let t0 = performance.now();
    const embeddings = await options.embedder.embed(texts);
    embedMs += performance.now() - t0;
    t0 = performance.now();
    const pairs = texts.slice(1).map((current, i) => ({ previous: texts[i]!, current }));
    await scorer.prepare(pairs);
    const shares = [Number.NaN, ...(await Promise.all(pairs.map((p) => scorer.share(p.previous, p.current))))];
    attentionMs += performance.now() - t0;
    turnCount += turns.length;
    prepared.push({ turns, sessions, embeddings, shares });
  }
  const modes = options.modes ?? BOUNDARY_MODES;
  const runMode = (cfg: SegmenterConfig, mode: BoundaryMode) =>
    modeResult(
      mode,
      prepared.map((p) => ({ ...p, ...segmentStream(p.turns, p.embeddings, p.shares, cfg) })),
    );
  const results = modes.map((mode) => runMode({ ...options.segmenter, boundaries: mode }, mode));
  const base = options.segmenter.attention ?? defaultSegmenterConfig().attention!;
  const sweepOf = (mode: "attention" | "both", param: "dipZ" | "confirmZ", values: readonly number[]): SweepRow[] =>
    values.map((value) => {
      const m = runMode({ ...options.segmenter, boundaries: mode, attention: { ...base, [param]: value } }, mode);
      return {
        mode,
        param,
        value,
        breaksFound: m.breaksFound,
        sessionBreaks: m.sessionBreaks,
        recall: m.recall,
        recallWithin1: m.recallWithin1,
        cuts: m.cuts,
        cutsPerSession: m.cutsPerSession,
        medianTurns: m.turns.median,
      };
    });
  const sweep = [
    ...sweepOf("attention", "dipZ", options.dipZs ?? []),
    ...sweepOf("both", "confirmZ", options.confirmZs ?? []),
  ];
  return {
    config: {
      dataFile,
      dataSha256: createHash("sha256").update(readFileSync(dataFile)).digest("hex"),
      conversations: chosen.map((c) => c.id),
      turns: turnCount,
      embedder: options.embedder.id,
      attention: options.attention.id,
      gateThreshold: options.segmenter.gate.threshold,
      attentionParams: options.segmenter.attention ?? defaultSegmenterConfig().attention,
      date: new Date().toISOString(),
    },
    cost: {
      embedSeconds: embedMs / 1000,
      attentionSeconds: attentionMs / 1000,
      attentionOverEmbedding: attentionMs / Math.max(embedMs, 1e-9),
      attentionMsPerTurn: attentionMs / Math.max(turnCount, 1),
    },
    modes: results,
    sweep,
  };
};

const f = (x: number, d = 2): string => (Number.isFinite(x) ? x.toFixed(d) : "–");
const dist = (d: Distribution, digits = 0): string =>
  `${f(d.min, digits)} / ${f(d.p25, digits)} / ${f(d.median, digits)} / ${f(d.p75, digits)} / ${f(d.max, digits)} (mean ${f(d.mean, 1)})`;

export const renderSegmentationMarkdown = (r: SegmentationReport): string => {
  const lines = [
    `# Segmentation vs session breaks (${r.config.conversations.join(", ")}; ${r.config.turns} turns, one stream per conversation)`,
    "",
    `Embedder ${r.config.embedder}; attention ${r.config.attention}; gate threshold ${r.config.gateThreshold}; attention ${JSON.stringify(r.config.attentionParams)}.`,
    "",
    "| mode | session breaks found | within ±1 turn | cuts | cuts / session | segments | segments across sessions | vetoed gate cuts | turns / segment (min / p25 / median / p75 / max) | tokens / segment (min / p25 / median / p75 / max) |",
    "|---|---|---|---|---|---|---|---|---|---|",
    ...r.modes.map(
      (m) =>
        `| ${m.mode} | ${m.breaksFound}/${m.sessionBreaks} (${f(100 * m.recall, 1)}%) | ${m.breaksFoundWithin1}/${m.sessionBreaks} (${f(100 * m.recallWithin1, 1)}%) | ${m.cuts} | ${f(m.cutsPerSession)} | ${m.segments} | ${m.segmentsAcrossSessions} | ${m.vetoed} | ${dist(m.turns)} | ${dist(m.tokens)} |`,
    ),
    "",
    ...(r.sweep.length > 0
      ? [
          "Attention thresholds on the same model outputs:",
          "",
          "| mode | threshold | session breaks found | within ±1 turn | cuts | cuts / session | median turns / segment |",
          "|---|---|---|---|---|---|---|",
          ...r.sweep.map(
            (w) =>
              `| ${w.mode} | ${w.param} ${w.value} | ${w.breaksFound}/${w.sessionBreaks} (${f(100 * w.recall, 1)}%) | ${f(100 * w.recallWithin1, 1)}% | ${w.cuts} | ${f(w.cutsPerSession)} | ${f(w.medianTurns, 0)} |`,
          ),
          "",
        ]
      : []),
    `Cost (same turns): embedding ${f(r.cost.embedSeconds)} s, attention ${f(r.cost.attentionSeconds)} s (${f(100 * r.cost.attentionOverEmbedding, 0)}% of the embedding time, ${f(r.cost.attentionMsPerTurn, 1)} ms per turn).`,
    "",
  ];
  return lines.join("\n");
};
