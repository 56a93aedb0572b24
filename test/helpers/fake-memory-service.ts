import type { Health, IngestResult, MemoryService } from "../../services/core/memory-service.ts";
import type { RecordPage, RecordQuery } from "../../services/core/ports.ts";
import type { QueryResult } from "../../services/core/query-types.ts";
import type { QueryRequest, TurnInput } from "../../services/core/requests.ts";
import type { MemoryRecord } from "../../services/core/types.ts";
import type { RemoteReader, TurnWriter } from "../../services/gateway/distributed-memory-service.ts";

export type FakeCall =
  | { method: "ingest"; tenant: string; conversation: string; turns: TurnInput[] }
  | { method: "flush"; tenant: string; conversation?: string }
  | { method: "query"; tenant: string; req: QueryRequest }
  | { method: "listRecords"; tenant: string; query: RecordQuery }
  | { method: "getRecord"; tenant: string; id: string };

export const sampleRecord = (overrides: Partial<MemoryRecord> = {}): MemoryRecord => ({
  id: "rec-1",
  type: "fact",
  text: "Caroline moved to Lisbon in May 2023.",
  entities: [
    { name: "Caroline", kind: "person", aliases: [] },
    { name: "Lisbon", kind: "place", aliases: [] },
  ],
  topics: ["relocation"],
  time: { at: "2023-05-01T00:00:00.000Z" },
  source: {
    tenant: "tenant-a",
    conversation: "conv-1",
    segmentId: "seg-1",
    turnIds: ["t1"],
    speakers: ["Caroline"],
    sessionId: "default",
    saidAt: "2023-05-08T10:00:00.000Z",
  },
  valid: { from: "2023-05-08T10:00:00.000Z" },
  ...overrides,
});

export const sampleQueryResult = (question: string, budget = 1000): QueryResult => ({
  context: `[2023-05-08] Caroline moved to Lisbon in May 2023. (${question})`,
  contextTokens: 14,
  budget,
  items: [
    {
      kind: "record",
      id: "rec-1",
      text: "Caroline moved to Lisbon in May 2023.",
      // An event of a month: its first and last moment.
      date: "2023-05-01T00:00:00.000Z",
      dateTo: "2023-05-31T23:59:59.999Z",
      conversation: "conv-1",
      turnIds: ["t1"],
      speakers: ["Caroline"],
      routes: [
        { route: "dense", rank: 1, score: 0.82 },
        { route: "entity", rank: 1, score: 1 },
      ],
      fusedScore: 0.0328,
      tokens: 10,
    },
    {
      kind: "turn",
      id: "turn-1",
      text: "I moved to Lisbon last month!",
      date: "2023-06-02T09:00:00.000Z",
      conversation: "conv-1",
      turnIds: ["t2"],
      speakers: ["Caroline"],
      routes: [{ route: "raw-dense", rank: 1, score: 0.71 }],
      fusedScore: 0.0161,
      tokens: 9,
    },
  ],
  plan: {
    questionType: "single-hop",
    entities: ["Caroline"],
    topics: [],
    routes: ["dense", "lexical", "entity"],
    rewrites: [],
  },
  cost: { embeddingCalls: 1, llmCalls: 0, inputTokens: 0, outputTokens: 0, ms: 3, routeMs: { dense: 1 } },
});

/**
 * In-memory MemoryService for front-door tests: records every call with the tenant it was made
 * with, keeps ingested turns and a set of records per tenant, and can be told to fail or be unready.
 */
export class FakeMemoryService implements MemoryService {
  readonly calls: FakeCall[] = [];
  /** tenant -> records it owns. */
  readonly records = new Map<string, MemoryRecord[]>();
  ready = true;
  /** When set, every data method throws it. */
  failWith: Error | undefined;
  /** What listRecords returns as nextCursor. */
  nextCursor: string | undefined;
  private seq = 0;

  addRecords(tenant: string, ...records: MemoryRecord[]): void {
    this.records.set(tenant, [...(this.records.get(tenant) ?? []), ...records]);
  }

  callsOf<M extends FakeCall["method"]>(method: M): Extract<FakeCall, { method: M }>[] {
    return this.calls.filter((c): c is Extract<FakeCall, { method: M }> => c.method === method);
  }

  async ingest(tenant: string, conversation: string, turns: readonly TurnInput[]): Promise<IngestResult> {
    this.maybeFail();
    this.calls.push({ method: "ingest", tenant, conversation, turns: [...turns] });
    const turnIds = turns.map((t) => t.turnId ?? `gen-${++this.seq}`);
    return { accepted: turns.length, turnIds };
  }

  async flush(tenant: string, conversation?: string): Promise<void> {
    this.maybeFail();
    this.calls.push(
      conversation === undefined ? { method: "flush", tenant } : { method: "flush", tenant, conversation },
    );
  }

  async query(tenant: string, req: QueryRequest): Promise<QueryResult> {
    this.maybeFail();
    this.calls.push({ method: "query", tenant, req });
    return sampleQueryResult(req.question, req.budget);
  }

  async listRecords(tenant: string, query: RecordQuery): Promise<RecordPage> {
    this.maybeFail();
    this.calls.push({ method: "listRecords", tenant, query });
    const records = (this.records.get(tenant) ?? [])
      .filter((r) => query.conversation === undefined || r.source.conversation === query.conversation)
      .filter((r) => query.type === undefined || r.type === query.type)
      .slice(0, query.limit);
    return this.nextCursor === undefined ? { records } : { records, nextCursor: this.nextCursor };
  }

  async getRecord(tenant: string, id: string): Promise<MemoryRecord | undefined> {
    this.maybeFail();
    this.calls.push({ method: "getRecord", tenant, id });
    return (this.records.get(tenant) ?? []).find((r) => r.id === id);
  }

  async health(): Promise<Health> {
    return { ok: true, ready: this.ready, details: { fake: this.ready ? "ready" : "starting" } };
  }

  private maybeFail(): void {
    if (this.failWith) throw this.failWith;
  }
}

/**
 * A fake as the distributed runtime's write side (the Kafka writer): its ingest and flush, healthy
 * while the fake is ready; `closed` tells whether it was closed.
 */
export const fakeTurnWriter = (fake: FakeMemoryService): TurnWriter & { closed: boolean } => {
  const writer = {
    closed: false,
    ingest: (tenant: string, conversation: string, turns: readonly TurnInput[]) =>
      fake.ingest(tenant, conversation, turns),
    flush: (tenant: string, conversation?: string) => fake.flush(tenant, conversation),
    health: () => ({ ok: fake.ready, detail: fake.ready ? "producer connected (fake)" : "producer disconnected" }),
    close: async () => {
      writer.closed = true;
    },
  };
  return writer;
};

/** A fake as the distributed runtime's read side (the query service's client), healthy while ready. */
export const fakeRemoteReader = (fake: FakeMemoryService): RemoteReader => ({
  query: (tenant, req) => fake.query(tenant, req),
  listRecords: (tenant, query) => fake.listRecords(tenant, query),
  getRecord: (tenant, id) => fake.getRecord(tenant, id),
  health: async () => ({ ok: fake.ready, detail: fake.ready ? "query service serving (fake)" : "unreachable" }),
});
