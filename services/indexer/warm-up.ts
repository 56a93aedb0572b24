/**
 * The indexer's store statements run once at process start, before its consumers join (issue 18).
 * On a Neo4j just started, the first execution of each statement pays for its query planning and
 * the JVM's compilation of the code it runs: measured in the freshness bench a minute after a
 * Neo4j restart, the first raw-turn vector upsert took 3.8 s and the first segment's writeBatch
 * 9.5 s (warm: ~0.1 s and ~0.2-0.5 s), so the first turns produced waited seconds to become
 * queryable and the first records tens of seconds. The warm-up writes one small segment of a
 * scratch tenant through the same code the consumers run (raw turns, then the segment with its
 * records and update candidates), reads it back the way the query routes do, and erases the
 * tenant: the plans are cached by statement text, so the consumers' statements find theirs.
 * Best effort: a failure is logged and the stage starts anyway.
 */
import { randomUUID } from "node:crypto";
import { recordId, segmentId } from "../core/ids.ts";
import type { Embedder, GraphStore, VectorStore } from "../core/ports.ts";
import type { MemoryRecord, Segment, SegmentTurn } from "../core/types.ts";
import type { CandidateSettings } from "./candidates.ts";
import { indexSegment } from "./indexer.ts";
import { indexRawTurns } from "./raw-turns.ts";

export interface WarmUpDeps {
  graph: GraphStore;
  vectors: VectorStore;
  embedder: Embedder;
  /** The second-opinion model, when on: its property is written (and planned) like the rest. */
  secondEmbedder?: Embedder;
  candidates?: CandidateSettings;
}

/** What every scratch tenant's name starts with. */
export const WARM_UP_PREFIX = "__warm-up-";

/**
 * A scratch tenant of its own per warm-up (erased at the end), never a real tenant's name. Its
 * start time is in the name, so that a later start tells a leftover (a process killed before its
 * erase) from another instance's warm-up still running.
 */
export const warmUpTenant = (now = Date.now()): string => `${WARM_UP_PREFIX}${Math.floor(now)}-${randomUUID()}`;

/**
 * Scratch tenants older than this are leftovers. A warm-up takes seconds (11-17 s on a Neo4j just
 * started, under 1 s warm); an hour leaves room for a slow server and for clocks that disagree.
 */
export const WARM_UP_LEFTOVER_AGE_MS = 60 * 60 * 1000;

/**
 * The names among these that are leftovers of earlier warm-ups: scratch tenants started more than
 * `maxAgeMs` before `now`, and those named before the start time was in the name (`__warm-up-<uuid>`).
 */
export const warmUpLeftovers = (names: readonly string[], now: number, maxAgeMs = WARM_UP_LEFTOVER_AGE_MS): string[] =>
  names.filter((name) => {
    if (!name.startsWith(WARM_UP_PREFIX)) return false;
    const started = /^(\d+)-/.exec(name.slice(WARM_UP_PREFIX.length));
    return started === null || now - Number(started[1]) > maxAgeMs;
  });

/**
 * Erases the leftovers of earlier warm-ups (a SIGKILL during one leaves its scratch tenant in the
 * stores, and nothing else would ever erase it) from both stores, whichever holds a part of them.
 * A store that cannot list its tenants (tenantsNamed) is skipped. Returns the tenants erased.
 */
export const eraseWarmUpLeftovers = async (
  deps: Pick<WarmUpDeps, "graph" | "vectors">,
  now = Date.now(),
): Promise<string[]> => {
  const [inGraph, inVectors] = await Promise.all([
    deps.graph.tenantsNamed?.(WARM_UP_PREFIX) ?? [],
    deps.vectors.tenantsNamed?.(WARM_UP_PREFIX) ?? [],
  ]);
  const leftovers = warmUpLeftovers([...new Set([...inGraph, ...inVectors])].sort(), now);
  for (const tenant of leftovers) {
    await deps.graph.deleteTenant(tenant);
    await deps.vectors.deleteTenant(tenant);
  }
  return leftovers;
};

const sample = (tenant: string): { segment: Segment; records: MemoryRecord[] } => {
  const conversation = "warm-up";
  const at = ["2023-05-08T09:00:00.000Z", "2023-05-08T09:01:00.000Z"];
  const turns: SegmentTurn[] = [
    {
      turnId: "w1",
      speaker: "Ada",
      role: "user" as const,
      text: "I moved to Paris in May.",
      compressed: "moved to paris in may",
    },
    {
      turnId: "w2",
      speaker: "Ada",
      role: "user" as const,
      text: "My dog Pepper loves Paris.",
      compressed: "dog pepper loves paris",
    },
  ].map((t, i) => ({ ...t, timestamp: at[i] as string, sessionId: "s1" }));
  const segment: Segment = {
    id: segmentId(tenant, conversation, "w1", "w2"),
    tenant,
    conversation,
    sessionId: "s1",
    turns,
    start: at[0] as string,
    end: at[1] as string,
    tokens: 12,
    closedBy: "gate",
    decisions: [],
  };
  const records = ["Ada moved to Paris in May 2023.", "Ada's dog Pepper loves Paris."].map(
    (text, i): MemoryRecord => ({
      id: recordId(tenant, text),
      type: "fact",
      text,
      entities: [
        { name: "Ada", kind: "person", aliases: [] },
        { name: "Paris", kind: "place", aliases: [] },
      ],
      topics: ["moving"],
      time: { at: "2023-05-01" },
      source: {
        tenant,
        conversation,
        segmentId: segment.id,
        turnIds: [(turns[i] as SegmentTurn).turnId],
        speakers: ["Ada"],
        sessionId: "s1",
        saidAt: at[i] as string,
      },
      valid: { from: at[i] as string },
    }),
  );
  return { segment, records };
};

export interface WarmedUp {
  /** Milliseconds the warm-up took, the leftovers' erasure included. */
  ms: number;
  /** Leftover scratch tenants of earlier warm-ups erased first. */
  leftovers: string[];
}

/**
 * Erases earlier warm-ups' leftovers, then runs the indexer's statements once on a scratch tenant
 * and erases it.
 */
export const warmUpStores = async (deps: WarmUpDeps, tenant = warmUpTenant()): Promise<WarmedUp> => {
  const started = performance.now();
  const leftovers = await eraseWarmUpLeftovers(deps);
  const { segment, records } = sample(tenant);
  try {
    await indexRawTurns(
      deps,
      segment.turns.map((t) => ({ ...t, tenant, conversation: segment.conversation })),
    );
    await deps.graph.getTurns(
      tenant,
      segment.turns.map((t) => ({ conversation: segment.conversation, turnId: t.turnId })),
    );
    await indexSegment({ ...deps, ...(deps.candidates ? { candidates: deps.candidates } : {}) }, segment, records);
  } finally {
    await deps.graph.deleteTenant(tenant);
    await deps.vectors.deleteTenant(tenant);
  }
  return { ms: performance.now() - started, leftovers };
};
