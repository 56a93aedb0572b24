/**
 * The query service's MemoryService: the read side only (Query, ListRecords, GetRecord) over a
 * graph store and a vector store (Neo4j, or the embedded SQLite/HNSW stores). Ingest and Flush
 * belong to the gateway; here they are UNIMPLEMENTED.
 */

import type { Health, IngestResult, MemoryService } from "../core/memory-service.ts";
import type { Embedder, GraphStore, QueryPlanner, RecordPage, RecordQuery, VectorStore } from "../core/ports.ts";
import type { QueryResult } from "../core/query-types.ts";
import type { QueryRequest } from "../core/requests.ts";
import type { MemoryRecord } from "../core/types.ts";
import { UnsupportedOperation } from "../platform/grpc/status-mapping.ts";
import { StoreMemoryReader } from "./memory-reader.ts";
import type { QuerySettings } from "./query.ts";
import type { SecondOpinion } from "./second-opinion.ts";

export interface StoreQueryServiceDeps {
  graph: GraphStore;
  vectors: VectorStore;
  embedder: Embedder;
  planner?: QueryPlanner;
  /** The second embedding model's order of the candidates (config secondOpinion; second-opinion.ts). */
  secondOpinion?: SecondOpinion;
  settings: QuerySettings;
  /** What the stores are, for health details (e.g. "neo4j bolt://..."). */
  storeLabel: string;
}

export class StoreQueryService implements MemoryService {
  /** The read side, the same implementation the embedded engine reads through. */
  private readonly reader: StoreMemoryReader;

  constructor(private readonly deps: StoreQueryServiceDeps) {
    this.reader = new StoreMemoryReader(deps);
  }

  async ingest(): Promise<IngestResult> {
    throw new UnsupportedOperation("the query service does not ingest: send turns to the gateway");
  }

  async flush(): Promise<void> {
    throw new UnsupportedOperation("the query service does not flush: send the flush to the gateway");
  }

  query(tenant: string, req: QueryRequest): Promise<QueryResult> {
    return this.reader.query(tenant, req);
  }

  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage> {
    return this.reader.listRecords(tenant, query);
  }

  getRecord(tenant: string, id: string): Promise<MemoryRecord | undefined> {
    return this.reader.getRecord(tenant, id);
  }

  /** Ready when the graph store answers a (tenant-scoped, cheap) count. */
  async health(): Promise<Health> {
    try {
      await this.deps.graph.countSegments("__health__");
      return { ok: true, ready: true, details: { store: this.deps.storeLabel, embedder: this.deps.embedder.id } };
    } catch (err) {
      return {
        ok: false,
        ready: false,
        details: { store: this.deps.storeLabel, error: err instanceof Error ? err.message : String(err) },
      };
    }
  }
}
