/**
 * The sleep-time consolidator (I/O around the pure rules): reads the pending update candidates,
 * partitions them by tenant and then into independent groups of connected records, decides each
 * record's candidates with a ConsolidationDecider and applies each record's decision in one
 * transaction, marking its candidates done. Idempotent: settled candidates are never read again,
 * so a second run finds nothing to do; crash-safe: a crash leaves whole decisions only, and a
 * rerun resumes with what is still pending.
 */
import { mapLimit } from "../core/map-limit.ts";
import type { GraphTransactions, RecordRelation, RecordStore, VersionStore } from "../core/ports.ts";
import type { MemoryRecord, UpdateCandidate } from "../core/types.ts";
import { applyConsolidation, type ConsolidationApplied, type ConsolidationOp } from "./apply.ts";
import { RuleDecider } from "./rules.ts";
import {
  type CandidateView,
  type ConsolidationDecider,
  type ConsolidationReport,
  emptyReport,
  type PairDecision,
} from "./types.ts";

export interface ConsolidatorDeps {
  /** The graph store's roles it uses: records, candidates and edges, one transaction per decision. */
  graph: Pick<RecordStore, "getRecords"> & VersionStore & GraphTransactions;
  /** Default: the deterministic rules. */
  decider?: ConsolidationDecider;
}

export interface ConsolidateOptions {
  /** One tenant (default: every tenant with pending candidates). */
  tenant?: string;
  /** Groups decided at the same time (default 4). */
  concurrency?: number;
  /** Records read per pass (default 5000); passes repeat until nothing is pending. */
  recordsPerPass?: number;
  /**
   * Test hook, called inside each record's transaction just before it commits, with the ordinal of
   * the decision in this run (0, 1, ... in the order decisions started) and the number of this
   * run's decisions committed so far (decisions run concurrently, so the count, not the ordinal,
   * says what a crash there leaves behind). Throwing rolls that decision back and stops the run, as
   * a crash would.
   */
  beforeCommit?: (ordinal: number, committed: number) => void;
}

const DEFAULT_CONCURRENCY = 4;
const DEFAULT_RECORDS_PER_PASS = 5000;
const MAX_CHAIN = 64;

/**
 * Partitions candidate rows into groups of connected records (pairs, plus existing SUPERSEDES /
 * DUPLICATE_OF edges), so that groups share no record and can be decided in parallel. Rows keep
 * their given order inside a group; groups are ordered by their first row. Pure.
 */
export const partitionCandidates = (
  rows: readonly UpdateCandidate[],
  relations: readonly RecordRelation[] = [],
): UpdateCandidate[][] => {
  const parent = new Map<string, string>();
  const find = (x: string): string => {
    let root = x;
    while (parent.has(root) && parent.get(root) !== root) root = parent.get(root) as string;
    let cur = x;
    while (cur !== root) {
      const up = parent.get(cur) as string;
      parent.set(cur, root);
      cur = up;
    }
    if (!parent.has(root)) parent.set(root, root);
    return root;
  };
  const union = (a: string, b: string): void => {
    const ra = find(a);
    const rb = find(b);
    // The smaller id becomes the root: the partition does not depend on the order of the rows.
    if (ra < rb) parent.set(rb, ra);
    else if (rb < ra) parent.set(ra, rb);
  };
  for (const r of rows) union(r.recordId, r.candidateId);
  const known = new Set(rows.flatMap((r) => [r.recordId, r.candidateId]));
  for (const rel of relations) {
    if (rel.relation !== "REFINES" && known.has(rel.from) && known.has(rel.to)) union(rel.from, rel.to);
  }
  const groups = new Map<string, UpdateCandidate[]>();
  for (const r of rows) {
    const root = find(r.recordId);
    const g = groups.get(root);
    if (g) g.push(r);
    else groups.set(root, [r]);
  }
  return [...groups.values()];
};

/** Rows of a group by record, in first-seen order (the store returns them oldest record first). */
const byRecord = (rows: readonly UpdateCandidate[]): Map<string, UpdateCandidate[]> => {
  const out = new Map<string, UpdateCandidate[]>();
  for (const r of rows) {
    const list = out.get(r.recordId);
    if (list) list.push(r);
    else out.set(r.recordId, [r]);
  }
  return out;
};

/** The ops that carry out a decision (nothing for unrelated). */
export const opsFor = (d: PairDecision, records: ReadonlyMap<string, MemoryRecord>): ConsolidationOp[] => {
  const newer = records.get(d.newer);
  if (!newer) return [];
  const at = newer.valid.from;
  switch (d.kind) {
    case "duplicate":
      return [{ kind: "merge", canonical: d.older, duplicate: d.newer, validTo: at, reason: d.reason }];
    case "contradiction":
      return [{ kind: "supersede", older: d.older, newer: d.newer, validTo: at, reason: d.reason }];
    case "refinement":
      return [{ kind: "link", from: d.newer, to: d.older, relation: "REFINES", at, reason: d.reason }];
    default:
      return [];
  }
};

const OP_ORDER: Record<ConsolidationOp["kind"], number> = { supersede: 0, link: 1, merge: 2 };

interface RunCounter {
  /** Record decisions started (each gets the next ordinal). */
  started: number;
  /** Record decisions committed (what the beforeCommit hook is told). */
  committed: number;
  /** Set when a decision failed: every group stops before its next decision. */
  failed: boolean;
}

class TenantRun {
  private readonly view = new Map<string, MemoryRecord>();

  constructor(
    private readonly deps: Required<ConsolidatorDeps>,
    private readonly tenant: string,
    private readonly report: ConsolidationReport,
    private readonly counter: RunCounter,
    private readonly options: ConsolidateOptions,
  ) {}

  private async load(ids: readonly string[]): Promise<void> {
    const missing = [...new Set(ids)].filter((id) => !this.view.has(id));
    if (missing.length === 0) return;
    for (const r of await this.deps.graph.getRecords(this.tenant, missing)) this.view.set(r.id, r);
  }

  /** The current version a record has become (following superseded_by), undefined when gone. */
  private async head(id: string): Promise<MemoryRecord | undefined> {
    await this.load([id]);
    let cur = this.view.get(id);
    const seen = new Set<string>();
    while (cur?.valid.supersededBy && !seen.has(cur.id) && seen.size < MAX_CHAIN) {
      seen.add(cur.id);
      const next = cur.valid.supersededBy;
      await this.load([next]);
      const n = this.view.get(next);
      if (!n) break;
      cur = n;
    }
    return cur;
  }

  async run(concurrency: number, recordsPerPass: number): Promise<void> {
    for (;;) {
      const rows = await this.deps.graph.pendingUpdateCandidates(this.tenant, recordsPerPass);
      if (rows.length === 0) return;
      const ids = [...new Set(rows.flatMap((r) => [r.recordId, r.candidateId]))];
      await this.load(ids);
      const relations = await this.deps.graph.relationsOf(this.tenant, ids);
      const groups = partitionCandidates(rows, relations);
      const before = this.counter.started;
      await mapLimit(groups, concurrency, (group) => this.runGroup(group));
      const records = new Set(rows.map((r) => r.recordId)).size;
      if (records < recordsPerPass || this.counter.started === before) return;
    }
  }

  private async runGroup(rows: readonly UpdateCandidate[]): Promise<void> {
    for (const [recordId, candidates] of byRecord(rows)) await this.decideRecord(recordId, candidates);
  }

  /**
   * Candidate rows naming a record that no longer exists (erased, while its candidates were still
   * on the update queue or put back from it by the consolidator service) are deleted, not decided:
   * whole when the record itself is gone, else the rows of the gone candidates. The store deletes
   * every candidate row and edge touching those ids, so nothing of an erased record stays behind;
   * records are written to the store before their candidates are produced, so missing means erased.
   * Returns the rows left to decide.
   */
  private async dropMissing(recordId: string, rows: readonly UpdateCandidate[]): Promise<UpdateCandidate[]> {
    await this.load([recordId, ...rows.map((r) => r.candidateId)]);
    const gone = this.view.has(recordId)
      ? [...new Set(rows.map((r) => r.candidateId).filter((id) => !this.view.has(id)))]
      : [recordId, ...new Set(rows.map((r) => r.candidateId).filter((id) => !this.view.has(id)))];
    if (gone.length === 0) return [...rows];
    await this.deps.graph.transact(this.tenant, {}, () => ({ writes: { deleteRecords: gone }, result: undefined }));
    const dropped = new Set(gone);
    return dropped.has(recordId) ? [] : rows.filter((r) => !dropped.has(r.candidateId));
  }

  private async decideRecord(recordId: string, all: readonly UpdateCandidate[]): Promise<void> {
    if (this.counter.failed) throw new Error("consolidation stopped after a failed decision");
    const rows = await this.dropMissing(recordId, all);
    if (rows.length === 0) return;
    const subject = await this.head(recordId);
    const decisionOf = new Map<string, PairDecision>();
    const views: CandidateView[] = [];
    const rowHead = new Map<string, string | undefined>();
    for (const row of rows) {
      const h = subject ? await this.head(row.candidateId) : undefined;
      const id = h && h.id !== subject?.id ? h.id : undefined;
      rowHead.set(row.candidateId, id);
      if (h && id && !views.some((v) => v.record.id === id)) views.push({ record: h, candidate: row });
    }
    if (subject && views.length > 0) {
      const batch = await this.deps.decider.decide(subject, views);
      this.report.cost.llmCalls += batch.cost.llmCalls;
      this.report.cost.inputTokens += batch.cost.inputTokens;
      this.report.cost.outputTokens += batch.cost.outputTokens;
      for (const d of batch.decisions) decisionOf.set(d.candidateId, d);
    }
    const ops = [...decisionOf.values()]
      .flatMap((d) => opsFor(d, this.view))
      .sort((a, b) => OP_ORDER[a.kind] - OP_ORDER[b.kind]);
    const settled = rows.map((row) => {
      const h = rowHead.get(row.candidateId);
      return {
        recordId: row.recordId,
        candidateId: row.candidateId,
        decision: (h ? decisionOf.get(h)?.kind : undefined) ?? ("unrelated" as const),
      };
    });
    if (this.counter.failed) throw new Error("consolidation stopped after a failed decision");
    const hook = this.options.beforeCommit;
    const ordinal = this.counter.started++;
    let applied: ConsolidationApplied;
    try {
      applied = await applyConsolidation(
        this.deps.graph,
        { tenant: this.tenant, ops, settled },
        hook ? { beforeCommit: () => hook(ordinal, this.counter.committed) } : {},
      );
    } catch (err) {
      this.counter.failed = true;
      throw err;
    }
    this.counter.committed++;
    // Keep the view in step with what was written, so the next decisions see it.
    const touched = ops.flatMap((op) =>
      op.kind === "link" ? [] : op.kind === "merge" ? [op.canonical, op.duplicate] : [op.older, op.newer],
    );
    for (const id of touched) this.view.delete(id);
    await this.load(touched);
    this.report.examined++;
    this.report.candidates += rows.length;
    this.report.merged += applied.merged;
    this.report.superseded += applied.superseded;
    this.report.linked += applied.linked;
    this.report.dropped += settled.filter((s) => s.decision === "unrelated").length;
    if (applied.merged + applied.superseded + applied.linked === 0) this.report.unchanged++;
  }
}

/** One consolidation run over the pending candidates (of one tenant, or of all). */
export const runConsolidation = async (
  deps: ConsolidatorDeps,
  options: ConsolidateOptions = {},
): Promise<ConsolidationReport> => {
  const started = performance.now();
  const full: Required<ConsolidatorDeps> = { graph: deps.graph, decider: deps.decider ?? new RuleDecider() };
  const report = emptyReport(full.decider.id);
  const tenants = options.tenant !== undefined ? [options.tenant] : await deps.graph.tenantsWithPendingCandidates();
  report.tenants = tenants;
  const concurrency = Math.max(1, Math.floor(options.concurrency ?? DEFAULT_CONCURRENCY));
  const perPass = Math.max(1, Math.floor(options.recordsPerPass ?? DEFAULT_RECORDS_PER_PASS));
  const counter: RunCounter = { started: 0, committed: 0, failed: false };
  try {
    await mapLimit(tenants, concurrency, (tenant) =>
      new TenantRun(full, tenant, report, counter, options).run(concurrency, perPass),
    );
  } finally {
    report.ms = performance.now() - started;
  }
  return report;
};
