import { countTokens } from "../core/tokens.ts";

/** A raw turn as the baselines see it. */
export interface BenchTurn {
  turnId: string;
  speaker: string;
  text: string;
  /** ISO timestamp. */
  timestamp: string;
  sessionId: string;
}

/** A unit a baseline ranks and packs: one turn, or a window of consecutive turns. */
export interface Unit {
  id: string;
  /** Position in the conversation: packed units are rendered in this order. */
  seq: number;
  /** Turns in conversation order. */
  turns: readonly BenchTurn[];
}

export interface PackedContext {
  context: string;
  tokens: number;
  units: Unit[];
  turnIds: string[];
}

/** "[2023-05-08] Caroline: text" */
export const renderTurnLine = (t: BenchTurn): string => `[${t.timestamp.slice(0, 10)}] ${t.speaker}: ${t.text}`;

export const renderUnit = (u: Unit): string => u.turns.map(renderTurnLine).join("\n");

/** Every turn as its own unit. */
export const turnUnits = (turns: readonly BenchTurn[]): Unit[] =>
  turns.map((t, i) => ({ id: t.turnId, seq: i, turns: [t] }));

/** Non-overlapping windows of `size` consecutive turns, never across a session boundary. */
export const windows = (turns: readonly BenchTurn[], size: number): Unit[] => {
  if (size < 1) throw new RangeError("window size must be at least 1");
  const out: Unit[] = [];
  let current: BenchTurn[] = [];
  const close = () => {
    if (current.length === 0) return;
    out.push({ id: `w${out.length}:${current[0]?.turnId}`, seq: out.length, turns: current });
    current = [];
  };
  for (const t of turns) {
    if (current.length === size || (current.length > 0 && current[0]?.sessionId !== t.sessionId)) close();
    current.push(t);
  }
  close();
  return out;
};

const tokenCache = new WeakMap<Unit, number>();

/** Tokens of a unit's lines plus the newline that joins it to the next; memoised per unit object. */
export const unitTokens = (unit: Unit): number => {
  let n = tokenCache.get(unit);
  if (n === undefined) {
    n = countTokens(`${renderUnit(unit)}\n`);
    tokenCache.set(unit, n);
  }
  return n;
};

/**
 * Greedy packing of ranked units into a token budget counted with the real tokenizer. With "skip"
 * a unit that does not fit is passed over so a smaller later one may still go in (as the engine
 * packs); with "stop" packing ends at the first unit that does not fit (a plain truncation). The
 * packed units are rendered in conversation order (by `seq`), one line per turn, and the whole
 * context is re-counted: the result never exceeds the budget.
 */
export const greedyPack = (ranked: readonly Unit[], budget: number, mode: "skip" | "stop" = "skip"): PackedContext => {
  const chosen: Unit[] = [];
  const seen = new Set<string>();
  let used = 0;
  for (const unit of ranked) {
    if (seen.has(unit.id)) continue;
    const tokens = unitTokens(unit);
    if (used + tokens > budget) {
      if (mode === "stop") break;
      continue;
    }
    seen.add(unit.id);
    used += tokens;
    chosen.push(unit);
  }
  // Counts per unit are exact; joining can merge tokens across a newline, so check the whole.
  while (chosen.length > 0) {
    const ordered = [...chosen].sort((a, b) => a.seq - b.seq);
    const context = ordered.map(renderUnit).join("\n");
    const tokens = countTokens(context);
    if (tokens <= budget)
      return { context, tokens, units: ordered, turnIds: ordered.flatMap((u) => u.turns.map((t) => t.turnId)) };
    chosen.pop();
  }
  return { context: "", tokens: 0, units: [], turnIds: [] };
};
