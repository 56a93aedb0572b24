/**
 * The consolidation rules, written once for every graph store: how a decision's ops change the
 * records (supersede, merge with merged sources, link) and when an op is skipped. A store only
 * runs them in one of its transactions (GraphTransactions.transact), so the rules hold the same
 * on SQLite and on Neo4j.
 */
import type {
  ApplyHooks,
  GraphTransactions,
  RecordRelation,
  SettledCandidate,
  TransactionWrites,
} from "../core/ports.ts";
import type { MemoryRecord, Source } from "../core/types.ts";

/**
 * One consolidation write. Each op checks its precondition inside the transaction (both records
 * exist; the one to be superseded is still current) and is skipped as a whole when it fails.
 */
export type ConsolidationOp =
  /** older.valid = {to: validTo, supersededBy: newer}; edge newer -SUPERSEDES-> older. */
  | { kind: "supersede"; older: string; newer: string; validTo: string; reason?: string }
  /**
   * duplicate.valid = {to: validTo, supersededBy: canonical}; canonical.mergedSources gains the
   * duplicate's source (and its merged sources); edge duplicate -DUPLICATE_OF-> canonical.
   */
  | { kind: "merge"; canonical: string; duplicate: string; validTo: string; reason?: string }
  /** edge from -REFINES-> to; nothing else changes. */
  | { kind: "link"; from: string; to: string; relation: "REFINES"; at: string; reason?: string };

/** One record's consolidation decision: applied atomically, with its candidates marked done. */
export interface ConsolidationChange {
  tenant: string;
  ops: ConsolidationOp[];
  /** Candidate rows settled by this change (kept, marked done with the decision). */
  settled: SettledCandidate[];
}

export interface ConsolidationApplied {
  superseded: number;
  merged: number;
  linked: number;
  /** Ops whose precondition no longer held (e.g. the record was superseded meanwhile). */
  skipped: number;
}

const ms = (iso: string): number => {
  const v = Date.parse(iso);
  if (Number.isNaN(v)) throw new Error(`not a timestamp: ${iso}`);
  return v;
};

/** A validity end never before the record's own start. */
const endOf = (record: MemoryRecord, validTo: string): string =>
  ms(validTo) < ms(record.valid.from) ? record.valid.from : new Date(ms(validTo)).toISOString();

const sourceKey = (s: Source): string => `${s.conversation}\u0000${s.segmentId}\u0000${s.turnIds.join(",")}`;

/** The canonical's merged sources after absorbing the duplicate's source and merged sources (each source once). */
const mergedSources = (canonical: MemoryRecord, duplicate: MemoryRecord): Source[] => {
  const merged = [...(canonical.mergedSources ?? [])];
  const seen = new Set([sourceKey(canonical.source), ...merged.map(sourceKey)]);
  for (const src of [duplicate.source, ...(duplicate.mergedSources ?? [])]) {
    const key = sourceKey(src);
    if (seen.has(key)) continue;
    seen.add(key);
    merged.push(src);
  }
  return merged;
};

const idsOf = (op: ConsolidationOp): string[] =>
  op.kind === "link" ? [op.from, op.to] : op.kind === "supersede" ? [op.older, op.newer] : [op.duplicate, op.canonical];

/**
 * The writes of a change over the records as read in its transaction: ops apply in order, each
 * seeing the records as the ops before it left them. Pure.
 */
export const consolidationWrites = (
  change: ConsolidationChange,
  records: Map<string, MemoryRecord>,
  decidedAt: string,
): { writes: TransactionWrites; result: ConsolidationApplied } => {
  const out: ConsolidationApplied = { superseded: 0, merged: 0, linked: 0, skipped: 0 };
  const changed = new Map<string, MemoryRecord>();
  const relations: RecordRelation[] = [];
  const put = (record: MemoryRecord): void => {
    records.set(record.id, record);
    changed.set(record.id, record);
  };
  for (const op of change.ops) {
    const reason = op.reason ? { reason: op.reason } : {};
    if (op.kind === "link") {
      if (op.from === op.to || !records.has(op.from) || !records.has(op.to)) {
        out.skipped++;
        continue;
      }
      relations.push({ from: op.from, to: op.to, relation: op.relation, at: op.at, ...reason });
      out.linked++;
      continue;
    }
    const [loserId, winnerId] = op.kind === "supersede" ? [op.older, op.newer] : [op.duplicate, op.canonical];
    const loser = records.get(loserId);
    const winner = records.get(winnerId);
    if (
      loserId === winnerId ||
      !loser ||
      !winner ||
      loser.valid.supersededBy !== undefined ||
      winner.valid.supersededBy !== undefined
    ) {
      out.skipped++;
      continue;
    }
    const to = endOf(loser, op.validTo);
    put({ ...loser, valid: { ...loser.valid, to, supersededBy: winnerId } });
    if (op.kind === "merge") {
      put({ ...winner, mergedSources: mergedSources(winner, loser) });
      relations.push({ from: op.duplicate, to: op.canonical, relation: "DUPLICATE_OF", at: to, ...reason });
      out.merged++;
    } else {
      relations.push({ from: op.newer, to: op.older, relation: "SUPERSEDES", at: to, ...reason });
      out.superseded++;
    }
  }
  return {
    writes: { records: [...changed.values()], relations, settled: { rows: change.settled, decidedAt } },
    result: out,
  };
};

/** Applies one consolidation decision in one transaction of the store (all or nothing). */
export const applyConsolidation = (
  store: GraphTransactions,
  change: ConsolidationChange,
  hooks: ApplyHooks = {},
): Promise<ConsolidationApplied> => {
  const decidedAt = new Date().toISOString();
  return store.transact(
    change.tenant,
    { records: [...new Set(change.ops.flatMap(idsOf))] },
    (view) => consolidationWrites(change, view.records, decidedAt),
    hooks,
  );
};
