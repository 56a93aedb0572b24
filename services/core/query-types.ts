/**
 * The read side's domain shapes: what a query plans and returns, and how records are listed.
 * Both the ports (the planner and the record store speak them) and the service contracts
 * (memory-service.ts) depend on this module, so neither depends on the other.
 */
import type { MemoryRecord, RecordType } from "./types.ts";

/**
 * Where an item's rank came from. "second-opinion" is no route the planner picks: it is the second
 * embedding model's order of what the routes found (services/query/second-opinion.ts), when on.
 */
export type RouteName =
  | "dense"
  | "lexical"
  | "entity"
  | "topic"
  | "time"
  | "event-frame"
  | "raw-dense"
  | "raw-lexical"
  | "second-opinion";

export interface ContextItem {
  kind: "record" | "turn";
  id: string;
  text: string;
  /** ISO date the item is dated by (event time, else when it was said). */
  date: string;
  /**
   * Where a record's event time spans days ("in June 2023", "in 2022", "the week of …"): its last
   * moment, `date` being its first. Absent for one day, and for a raw turn.
   */
  dateTo?: string;
  conversation: string;
  turnIds: string[];
  speakers: string[];
  routes: { route: RouteName; rank: number; score: number }[];
  fusedScore: number;
  tokens: number;
}

export interface QueryCost {
  /** Calls to the embedding model the query made; one call may embed several texts. */
  embeddingCalls: number;
  llmCalls: number;
  inputTokens: number;
  outputTokens: number;
  ms: number;
  routeMs: Partial<Record<RouteName, number>>;
}

export interface QueryPlan {
  questionType: "single-hop" | "multi-hop" | "temporal" | "open";
  entities: string[];
  topics: string[];
  timeWindow?: { from: string; to: string };
  routes: RouteName[];
  rewrites: string[];
}

/** How a query reached its items (asked for with `explain`): every route's hits, then the fused order. */
export interface QueryExplain {
  /** Each route's ranked hits as they went into the fusion (record ids, or turn row ids of raw turns). */
  routes: { route: RouteName; hits: { id: string; score: number }[] }[];
  /** The Reciprocal Rank Fusion of those lists: the candidates that went on to diversity and packing, best first. */
  fused: { id: string; score: number; routes: RouteName[]; text?: string }[];
}

export interface QueryResult {
  context: string;
  contextTokens: number;
  budget: number;
  items: ContextItem[];
  plan: QueryPlan;
  cost: QueryCost;
  /** Only when the request asked for it, and only where the runtime carries it (not over gRPC). */
  explain?: QueryExplain;
}

export interface RecordQuery {
  conversation?: string;
  entity?: string;
  type?: RecordType;
  timeFrom?: number;
  timeTo?: number;
  /** Include superseded versions (default false: current versions only). */
  includeSuperseded?: boolean;
  limit: number;
  /** Opaque cursor from the previous page. */
  cursor?: string;
}

export interface RecordPage {
  records: MemoryRecord[];
  nextCursor?: string;
}
