/**
 * Consolidation, version history and erasure over a graph store and a vector store, composed as the
 * embedded engine composes them (services/embedded/engine.ts) but without the embedded runtime's
 * inbox and keyed state: the query service serves it to the gateway (memory.v1.Maintenance) in the
 * distributed runtime, where the update candidates, records and vectors live in Neo4j (or Qdrant)
 * and the stages' keyed state lives in Kafka (erased by the gateway's control messages).
 *
 * Here in composition, not in a stage: it joins the consolidator's rules (runConsolidation,
 * eraseConversation) with the query service's stores, and stage folders do not import each other.
 */
import { runConsolidation } from "../consolidator/consolidator.ts";
import type { ConsolidationDecider } from "../consolidator/types.ts";
import { eraseConversation, eraseTenant } from "../core/erasure.ts";
import { buildHistory, type RecordHistory } from "../core/history.ts";
import type { ConsolidationReport, StoreErasureReport, StoreSideMaintenance } from "../core/maintenance.ts";
import type { GraphStore, VectorStore } from "../core/ports.ts";
import { walkVersionGraph } from "../core/version-graph.ts";

export interface StoreMaintenanceDeps {
  graph: GraphStore;
  vectors: VectorStore;
  /** Default: the deterministic rules (RuleDecider), as in the embedded runtime. */
  decider?: ConsolidationDecider;
  /** Groups decided at the same time (Config.consolidation.concurrency). */
  concurrency?: number;
}

export class StoreMaintenance implements StoreSideMaintenance {
  /** One consolidation or erasure at a time in this process, as in the embedded engine. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: StoreMaintenanceDeps) {}

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * The tenant's pending update candidates decided and applied now (each record's decision in one
   * store transaction, idempotent: a candidate settled by another replica or by the consolidator
   * service is not read again).
   */
  consolidate(tenant?: string): Promise<ConsolidationReport> {
    return this.exclusive(() =>
      runConsolidation(
        { graph: this.deps.graph, ...(this.deps.decider ? { decider: this.deps.decider } : {}) },
        { ...(tenant !== undefined ? { tenant } : {}), concurrency: this.deps.concurrency ?? 4 },
      ),
    );
  }

  async history(tenant: string, recordId: string): Promise<RecordHistory | undefined> {
    return buildHistory(recordId, await walkVersionGraph(this.deps.graph, tenant, recordId));
  }

  /**
   * Erasure from the graph and vector stores: a conversation (its records with every index row,
   * candidate and edge, segments, raw turns, dead letters and vectors; records it had superseded
   * restored) or the whole tenant. The Kafka side (keyed state, compacted topics, turns in flight)
   * is the gateway's, so inboxEntries and stateKeys are 0 here. The report names the erased
   * records (erasedRecordIds): their update candidates are live on the compacted update queue
   * (key: record id) and only the gateway, told here, can tombstone them; the indexer's erase
   * control finds nothing of them any more.
   */
  erase(tenant: string, conversation?: string): Promise<StoreErasureReport> {
    return this.exclusive(async () => {
      const { graph, vectors } = this.deps;
      const started = performance.now();
      const vectorsBefore = await vectors.count(tenant);
      let records: number;
      let erasedRecordIds: string[];
      let turns: number | undefined;
      let restored = 0;
      if (conversation !== undefined) {
        const erased = await eraseConversation(graph, tenant, conversation);
        erasedRecordIds = erased.records;
        records = erased.records.length;
        turns = erased.turns.length;
        restored = erased.restored;
        await vectors.delete(tenant, [...erased.records, ...erased.turns]);
        // Vectors the graph no longer knows of (written before a crash between the stores' writes).
        await vectors.deleteConversation?.(tenant, conversation);
      } else {
        // Counted as the embedded engine counts them. The ids for the gateway's tombstones are
        // those the deletes themselves removed (each step of eraseTenant names what it deleted):
        // listed apart first, a record the indexer wrote in between was deleted unnamed and its
        // candidate set stayed live on the update queue.
        records = await graph.countRecords(tenant);
        erasedRecordIds = await eraseTenant(graph, tenant);
        await vectors.deleteTenant(tenant);
      }
      await vectors.flush();
      await vectors.purgeDeleted?.(tenant);
      await graph.purgeDeleted?.();
      return {
        tenant,
        ...(conversation !== undefined ? { conversation } : {}),
        records,
        ...(turns !== undefined ? { turns } : {}),
        vectors: vectorsBefore - (await vectors.count(tenant)),
        inboxEntries: 0,
        stateKeys: 0,
        restored,
        ms: performance.now() - started,
        erasedRecordIds,
      };
    });
  }
}
