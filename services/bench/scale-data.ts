/**
 * Synthetic-but-realistic data for `bench scale` (pure, seeded): copies of the dev conversations
 * with other speaker names, places and dates; segments of a fixed number of turns per session
 * (the surprise segmenter needs embeddings of every turn, which at a million records is the cost
 * this bench is not about); vectors that perturb real embeddings.
 */

import type { LocomoConversation, LocomoQuestion } from "../core/datasets/locomo.ts";
import { sha256 } from "../core/ids.ts";
import type { TurnInput } from "../core/requests.ts";
import { countTokens } from "../core/tokens.ts";
import type { Segment } from "../core/types.ts";

const FIRST_NAMES = [
  "Maya",
  "Jonas",
  "Priya",
  "Tomas",
  "Leila",
  "Ravi",
  "Ingrid",
  "Kofi",
  "Sofia",
  "Mateo",
  "Yuki",
  "Amara",
  "Felix",
  "Noor",
  "Elena",
  "Hugo",
  "Zara",
  "Omar",
  "Clara",
  "Diego",
  "Hana",
  "Luca",
  "Aisha",
  "Erik",
  "Mina",
  "Pablo",
  "Chloe",
  "Idris",
  "Greta",
  "Kenji",
  "Lucia",
  "Anton",
  "Rosa",
  "Samir",
  "Vera",
  "Theo",
];

const PLACES: Record<string, string[]> = {
  Sweden: ["Norway", "Portugal", "Chile", "Japan", "Kenya"],
  Boston: ["Denver", "Lisbon", "Osaka", "Nairobi", "Oslo"],
  "New York": ["Chicago", "Madrid", "Seoul", "Lagos", "Vienna"],
  California: ["Oregon", "Andalusia", "Hokkaido", "Ontario", "Bavaria"],
  Paris: ["Prague", "Rome", "Kyoto", "Cairo", "Dublin"],
  Canada: ["Ireland", "Brazil", "Vietnam", "Morocco", "Finland"],
};

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** How copy `copy` of a conversation is disguised: names, places, a date shift. */
export interface Disguise {
  names: Map<string, string>;
  places: Map<string, string>;
  shiftDays: number;
}

/** Days over which copies' dates spread (about three years); 97 is prime to it, so shifts repeat every SHIFT_PERIOD copies. */
const SHIFT_PERIOD = 1100;

export const disguiseOf = (conv: LocomoConversation, copy: number): Disguise => {
  const names = new Map<string, string>();
  const places = new Map<string, string>();
  if (copy === 0) return { names, places, shiftDays: 0 };
  // The date shift repeats every SHIFT_PERIOD copies and the names every 4 (9 · 4 = 36 names), so
  // copies SHIFT_PERIOD apart were the same text: the same record ids, written again onto the same
  // records of the same tenant (a grow to 1M counted 1,000,749 records written, 922,778 stored).
  // Each further SHIFT_PERIOD copies ("era") moves the names by one more: no two copies alike
  // below SHIFT_PERIOD · 36 (39,600 copies, ~15M records).
  const era = Math.floor(copy / SHIFT_PERIOD);
  conv.speakers.forEach((s, i) => {
    names.set(s, FIRST_NAMES[(copy * 2 + i + copy * 7 + era) % FIRST_NAMES.length] as string);
  });
  for (const [place, others] of Object.entries(PLACES)) places.set(place, others[copy % others.length] as string);
  // Spread copies over about three years, whole days (the weekday of an event may change: fine).
  return { names, places, shiftDays: ((copy * 97) % SHIFT_PERIOD) - SHIFT_PERIOD / 2 };
};

const replacer = (map: Map<string, string>): ((text: string) => string) => {
  if (map.size === 0) return (t) => t;
  const re = new RegExp(`\\b(${[...map.keys()].map(escapeRegExp).join("|")})\\b`, "g");
  return (t) => t.replace(re, (m) => map.get(m) ?? m);
};

export const disguiseText = (d: Disguise, text: string): string => replacer(d.places)(replacer(d.names)(text));

const shift = (iso: string, days: number): string => new Date(Date.parse(iso) + days * 86_400_000).toISOString();

export const disguiseTurns = (conv: LocomoConversation, d: Disguise): TurnInput[] => {
  const names = replacer(d.names);
  const places = replacer(d.places);
  return conv.turns.map((t) => ({
    ...t,
    speaker: d.names.get(t.speaker) ?? t.speaker,
    text: places(names(t.text)),
    timestamp: shift(t.timestamp, d.shiftDays),
  }));
};

export const disguiseQuestion = (d: Disguise, q: LocomoQuestion): string => disguiseText(d, q.question);

/** Fixed-size segments (`turnsPerSegment` turns, never across sessions), closed as a session end would. */
export const fixedSegments = (
  tenant: string,
  conversation: string,
  turns: readonly TurnInput[],
  turnsPerSegment: number,
): Segment[] => {
  const out: Segment[] = [];
  let current: TurnInput[] = [];
  const close = (): void => {
    if (current.length === 0) return;
    const first = current[0] as TurnInput;
    const last = current[current.length - 1] as TurnInput;
    out.push({
      id: sha256(`${tenant}\u0000${conversation}\u0000${first.turnId}`).slice(0, 32),
      tenant,
      conversation,
      sessionId: first.sessionId,
      turns: current.map((t, i) => ({
        turnId: t.turnId ?? `${first.turnId}-${i}`,
        speaker: t.speaker,
        role: t.role,
        text: t.text,
        compressed: t.text,
        timestamp: t.timestamp,
        sessionId: t.sessionId,
      })),
      start: first.timestamp,
      end: last.timestamp,
      tokens: current.reduce((n, t) => n + countTokens(t.text), 0),
      closedBy: "session-end",
      decisions: [],
    });
    current = [];
  };
  for (const t of turns) {
    if (current.length > 0 && (current[0] as TurnInput).sessionId !== t.sessionId) close();
    current.push(t);
    if (current.length >= turnsPerSegment) close();
  }
  close();
  return out;
};

export { seededRandom } from "../core/seeded-random.ts";

/** Standard normal samples from a uniform source (Box-Muller). */
const gaussian = (rnd: () => number): number => {
  const u = Math.max(rnd(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rnd());
};

/**
 * A real embedding moved by isotropic Gaussian noise of total norm about `noise` and normalised
 * again: its cosine to the base is about 1/sqrt(1 + noise^2) (0.89 at 0.5), so a copy lands in the
 * neighbourhood of the text it was made from and copies of one text form a cluster.
 */
export const perturb = (base: Float32Array, noise: number, rnd: () => number): Float32Array => {
  const dim = base.length;
  const scale = noise / Math.sqrt(dim);
  const v = new Float32Array(dim);
  let n = 0;
  for (let i = 0; i < dim; i++) {
    const x = (base[i] as number) + gaussian(rnd) * scale;
    v[i] = x;
    n += x * x;
  }
  const inv = 1 / (Math.sqrt(n) || 1);
  for (let i = 0; i < dim; i++) v[i] = (v[i] as number) * inv;
  return v;
};
