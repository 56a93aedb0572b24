/**
 * The explorer's read side: what the browser memory explorer (the gateway's /ui) shows that the
 * query contract does not serve: the tenant's conversations, and a conversation's timeline of
 * segments (turns with their compressed text, the boundary gate's decisions) with the records each
 * segment yielded. Read-only and tenant-scoped like every reader; pages are bounded and keyset
 * cursors are opaque to the caller (base64url JSON of the last row's key, validated when read
 * back: a cursor only ever selects rows of the caller's own tenant, so it needs no signature).
 */
import { z } from "zod";
import { ValidationError } from "./errors.ts";
import type { MemoryRecord, Segment } from "./types.ts";

/** A conversation as the stores know it: what was segmented and indexed (open segments are not yet). */
export interface ConversationSummary {
  conversation: string;
  segments: number;
  turns: number;
  /** Start of its first segment, end of its last (ISO). */
  firstAt: string;
  lastAt: string;
}

export interface ConversationPage {
  conversations: ConversationSummary[];
  nextCursor?: string;
}

/** A segment with the records it yielded (every version, superseded ones included). */
export interface TimelineSegment {
  segment: Segment;
  records: MemoryRecord[];
}

export interface Timeline {
  conversation: string;
  /** The boundary gate's threshold (config segmenter.threshold): a decision cuts when p >= it. */
  threshold: number;
  /** In time order (segment start, then id). */
  segments: TimelineSegment[];
  nextCursor?: string;
}

export interface ExplorerPage {
  limit: number;
  cursor?: string;
}

/** The port a front door reads the explorer's data through; every runtime offers it. */
export interface ExplorerReader {
  listConversations(tenant: string, page: ExplorerPage): Promise<ConversationPage>;
  /** undefined when the tenant has no segment of that conversation. */
  timeline(tenant: string, conversation: string, page: ExplorerPage): Promise<Timeline | undefined>;
}

export const isExplorerReader = (x: unknown): x is ExplorerReader =>
  typeof x === "object" &&
  x !== null &&
  typeof (x as Partial<ExplorerReader>).listConversations === "function" &&
  typeof (x as Partial<ExplorerReader>).timeline === "function";

/** Most conversations / segments one page may hold. */
export const MAX_EXPLORER_PAGE = 200;

/** The key a segment page continues after. */
export interface SegmentKey {
  start: string;
  id: string;
}

const invalidCursor = (): ValidationError =>
  new ValidationError("invalid cursor", [{ path: "cursor", message: "not a cursor this service issued" }]);

const encodeCursor = (value: unknown): string => Buffer.from(JSON.stringify(value), "utf8").toString("base64url");

const decodeCursor = <T>(cursor: string, schema: z.ZodType<T>): T => {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw invalidCursor();
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw invalidCursor();
  return parsed.data;
};

const ConversationCursorSchema = z.tuple([z.literal("c"), z.string().min(1)]);
const SegmentCursorSchema = z.tuple([z.literal("s"), z.string().min(1), z.string().min(1)]);

export const conversationCursor = {
  encode: (conversation: string): string => encodeCursor(["c", conversation]),
  decode: (cursor: string): string => decodeCursor(cursor, ConversationCursorSchema)[1],
};

export const segmentCursor = {
  encode: (key: SegmentKey): string => encodeCursor(["s", key.start, key.id]),
  decode: (cursor: string): SegmentKey => {
    const [, start, id] = decodeCursor(cursor, SegmentCursorSchema);
    return { start, id };
  },
};
