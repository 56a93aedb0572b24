/**
 * The read side over the ports, once for both runtimes: the embedded engine reads through it in
 * process, the distributed query service serves it over gRPC (the gateway's reader is its client).
 * A query plans, fans out over the routes and packs a context (query.ts); listing and fetching
 * records go to the record store, every call scoped by the tenant.
 */
import type { MemoryReader } from "../core/memory-service.ts";
import type { QueryResult, RecordPage, RecordQuery } from "../core/query-types.ts";
import type { QueryRequest } from "../core/requests.ts";
import type { MemoryRecord } from "../core/types.ts";
import { type QueryDeps, type QuerySettings, runQuery } from "./query.ts";

export interface StoreReaderDeps extends QueryDeps {
  settings: QuerySettings;
}

export class StoreMemoryReader implements MemoryReader {
  constructor(private readonly deps: StoreReaderDeps) {}

  query(tenant: string, req: QueryRequest): Promise<QueryResult> {
    return runQuery(this.deps, tenant, req, this.deps.settings);
  }

  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage> {
    return this.deps.graph.listRecords(tenant, query);
  }

  async getRecord(tenant: string, id: string): Promise<MemoryRecord | undefined> {
    const [r] = await this.deps.graph.getRecords(tenant, [id]);
    return r;
  }
}
