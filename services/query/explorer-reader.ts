/**
 * The explorer's read side over the graph store, once for both runtimes (as StoreMemoryReader is
 * for queries): the embedded engine reads through it in process, the distributed gateway over the
 * shared Neo4j store the query service reads. Pages are fetched one row past the limit, so a next
 * cursor is only given when there is more.
 */
import {
  type ConversationPage,
  conversationCursor,
  type ExplorerPage,
  type ExplorerReader,
  segmentCursor,
  type Timeline,
} from "../core/explorer.ts";
import type { SegmentStore } from "../core/ports.ts";
import type { MemoryRecord } from "../core/types.ts";

export class StoreExplorerReader implements ExplorerReader {
  /** `threshold`: the boundary gate's (config segmenter.threshold), shown with its decisions. */
  constructor(
    private readonly store: SegmentStore,
    private readonly threshold: number,
  ) {}

  async listConversations(tenant: string, page: ExplorerPage): Promise<ConversationPage> {
    const after = page.cursor === undefined ? undefined : conversationCursor.decode(page.cursor);
    const rows = await this.store.listConversations(tenant, page.limit + 1, after);
    const conversations = rows.slice(0, page.limit);
    const last = conversations.at(-1);
    return rows.length > page.limit && last
      ? { conversations, nextCursor: conversationCursor.encode(last.conversation) }
      : { conversations };
  }

  async timeline(tenant: string, conversation: string, page: ExplorerPage): Promise<Timeline | undefined> {
    const after = page.cursor === undefined ? undefined : segmentCursor.decode(page.cursor);
    const rows = await this.store.listSegments(tenant, conversation, page.limit + 1, after);
    // An unknown conversation (or none of this tenant's) is a 404 on the first page only: a cursor
    // past the last segment is a valid, empty page.
    if (rows.length === 0 && after === undefined) return undefined;
    const segments = rows.slice(0, page.limit);
    const records = await this.store.recordsOfSegments(
      tenant,
      segments.map((s) => s.id),
    );
    const bySegment = new Map<string, MemoryRecord[]>();
    for (const r of records) {
      const list = bySegment.get(r.source.segmentId);
      if (list) list.push(r);
      else bySegment.set(r.source.segmentId, [r]);
    }
    const last = segments.at(-1);
    return {
      conversation,
      threshold: this.threshold,
      segments: segments.map((segment) => ({ segment, records: bySegment.get(segment.id) ?? [] })),
      ...(rows.length > page.limit && last
        ? { nextCursor: segmentCursor.encode({ start: last.start, id: last.id }) }
        : {}),
    };
  }
}
