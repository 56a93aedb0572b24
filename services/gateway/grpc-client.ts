/**
 * The gateway's view of the read side: the query service over gRPC (the platform's typed client of
 * memory.v1.Memory), or anything else that answers queries and record reads for a tenant.
 */
import type { Metadata } from "@grpc/grpc-js";
import { status } from "@grpc/grpc-js";
import { ValidationError } from "../core/errors.ts";
import type { RecordHistory } from "../core/history.ts";
import type { ConsolidationReport, StoreErasureReport } from "../core/maintenance.ts";
import type { RecordPage, RecordQuery } from "../core/ports.ts";
import type { QueryResult } from "../core/query-types.ts";
import type { QueryRequest } from "../core/requests.ts";
import type { MemoryRecord } from "../core/types.ts";
import { encodeTenantMetadata, TENANT_METADATA_KEY } from "../platform/grpc/auth.ts";
import { MemoryGrpcClient } from "../platform/grpc/client.ts";
import { isServiceError, issuesOf } from "../platform/grpc/status-mapping.ts";

/** What the gateway needs from the read side. */
export interface QueryBackend {
  query(tenant: string, req: QueryRequest): Promise<QueryResult>;
  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage>;
  getRecord(tenant: string, id: string): Promise<MemoryRecord | undefined>;
  /** Reachable: the detail says what was checked. */
  health(): Promise<{ ok: boolean; detail: string }>;
  close(): Promise<void>;
}

/**
 * The query service over gRPC: the tenant the gateway authenticated travels in `x-memory-tenant`
 * (plus the internal token when configured). An INVALID_ARGUMENT from the query service becomes a
 * ValidationError again, so the HTTP front door answers 400 with the same issues.
 */
export class GrpcQueryBackend implements QueryBackend {
  readonly client: MemoryGrpcClient;

  constructor(
    readonly address: string,
    options: { internalToken?: string; deadlineMs?: number } = {},
  ) {
    this.client = new MemoryGrpcClient({ address, ...options });
  }

  private md(tenant: string): Metadata {
    return this.client.metadata({ [TENANT_METADATA_KEY]: encodeTenantMetadata(tenant) });
  }

  private async mapErrors<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      if (isServiceError(err) && err.code === status.INVALID_ARGUMENT)
        throw new ValidationError(err.details, issuesOf(err));
      throw err;
    }
  }

  query(tenant: string, req: QueryRequest): Promise<QueryResult> {
    return this.mapErrors(() => this.client.query(req, this.md(tenant)));
  }

  listRecords(tenant: string, query: RecordQuery): Promise<RecordPage> {
    return this.mapErrors(() => this.client.listRecords(query, this.md(tenant)));
  }

  getRecord(tenant: string, id: string): Promise<MemoryRecord | undefined> {
    return this.mapErrors(() => this.client.getRecord(id, this.md(tenant)));
  }

  /** Maintenance (the query service's memory.v1.Maintenance) for the tenant. */
  consolidate(tenant: string): Promise<ConsolidationReport> {
    return this.mapErrors(() => this.client.consolidate(this.md(tenant)));
  }

  history(tenant: string, recordId: string): Promise<RecordHistory | undefined> {
    return this.mapErrors(() => this.client.history(recordId, this.md(tenant)));
  }

  erase(tenant: string, conversation?: string): Promise<StoreErasureReport> {
    return this.mapErrors(() => this.client.erase(conversation, this.md(tenant)));
  }

  async health(): Promise<{ ok: boolean; detail: string }> {
    try {
      await this.client.waitForReady(1000);
      return { ok: true, detail: `reachable at ${this.address}` };
    } catch (err) {
      return {
        ok: false,
        detail: `unreachable at ${this.address}: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
  }

  async close(): Promise<void> {
    this.client.close();
  }
}
