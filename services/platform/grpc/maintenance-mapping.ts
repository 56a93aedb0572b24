/**
 * Maintenance shapes (services/core/maintenance.ts, history.ts) <-> memory.v1.Maintenance's
 * messages, field by field. As in wire-mapping.ts, an empty string on the wire stands for an absent
 * optional value, so a report or history that crosses the wire twice comes back deep-equal.
 */
import type { RecordHistory, VersionEntry, VersionRelation } from "../../core/history.ts";
import type { ConsolidationReport, StoreErasureReport } from "../../core/maintenance.ts";
import type { RecordRelation, RecordRelationKind } from "../../core/ports.ts";
import type {
  ConsolidationReport as ConsolidationReportMessage,
  ErasureReport as ErasureReportMessage,
  RecordHistory as RecordHistoryMessage,
  RecordRelation as RecordRelationMessage,
  VersionEntry as VersionEntryMessage,
} from "./generated/memory.ts";
import { recordFromWire, recordToWire } from "./wire-mapping.ts";

const blank = (s: string): string | undefined => (s === "" ? undefined : s);

export const consolidationReportToWire = (r: ConsolidationReport): ConsolidationReportMessage => ({
  tenants: r.tenants,
  examined: r.examined,
  candidates: r.candidates,
  merged: r.merged,
  superseded: r.superseded,
  linked: r.linked,
  unchanged: r.unchanged,
  dropped: r.dropped,
  ms: r.ms,
  decider: r.decider,
  cost: { llm_calls: r.cost.llmCalls, input_tokens: r.cost.inputTokens, output_tokens: r.cost.outputTokens },
});

export const consolidationReportFromWire = (m: ConsolidationReportMessage): ConsolidationReport => ({
  tenants: m.tenants,
  examined: m.examined,
  candidates: m.candidates,
  merged: m.merged,
  superseded: m.superseded,
  linked: m.linked,
  unchanged: m.unchanged,
  dropped: m.dropped,
  ms: m.ms,
  decider: m.decider,
  cost: {
    llmCalls: m.cost?.llm_calls ?? 0,
    inputTokens: m.cost?.input_tokens ?? 0,
    outputTokens: m.cost?.output_tokens ?? 0,
  },
});

const relationToWire = (r: RecordRelation): RecordRelationMessage => ({
  from: r.from,
  to: r.to,
  relation: r.relation,
  at: r.at,
  reason: r.reason ?? "",
});

const relationFromWire = (m: RecordRelationMessage): RecordRelation => {
  const reason = blank(m.reason);
  return {
    from: m.from,
    to: m.to,
    relation: m.relation as RecordRelationKind,
    at: m.at,
    ...(reason !== undefined ? { reason } : {}),
  };
};

const versionToWire = (v: VersionEntry): VersionEntryMessage => ({
  id: v.id,
  text: v.text,
  relation: v.relation,
  valid_from: v.validFrom,
  valid_to: v.validTo ?? "",
  superseded_by: v.supersededBy ?? "",
  current: v.current,
  record: recordToWire(v.record),
});

const versionFromWire = (m: VersionEntryMessage): VersionEntry => {
  const validTo = blank(m.valid_to);
  const supersededBy = blank(m.superseded_by);
  if (!m.record) throw new Error(`history version ${m.id} came without its record`);
  return {
    id: m.id,
    text: m.text,
    relation: m.relation as VersionRelation,
    validFrom: m.valid_from,
    ...(validTo !== undefined ? { validTo } : {}),
    ...(supersededBy !== undefined ? { supersededBy } : {}),
    current: m.current,
    record: recordFromWire(m.record),
  };
};

export const historyToWire = (h: RecordHistory): RecordHistoryMessage => ({
  id: h.id,
  current: h.current ?? "",
  versions: h.versions.map(versionToWire),
  relations: h.relations.map(relationToWire),
});

export const historyFromWire = (m: RecordHistoryMessage): RecordHistory => {
  const current = blank(m.current);
  return {
    id: m.id,
    ...(current !== undefined ? { current } : {}),
    versions: m.versions.map(versionFromWire),
    relations: m.relations.map(relationFromWire),
  };
};

export const erasureReportToWire = (r: StoreErasureReport): ErasureReportMessage => ({
  tenant: r.tenant,
  conversation: r.conversation ?? "",
  records: r.records,
  ...(r.turns !== undefined ? { turns: r.turns } : {}),
  vectors: r.vectors,
  inbox_entries: r.inboxEntries,
  state_keys: r.stateKeys,
  restored: r.restored,
  ms: r.ms,
  erased_record_ids: r.erasedRecordIds ?? [],
});

/** No ids on the wire (none erased, or an older query service) read as absent. */
export const erasureReportFromWire = (m: ErasureReportMessage): StoreErasureReport => {
  const conversation = blank(m.conversation);
  return {
    tenant: m.tenant,
    ...(conversation !== undefined ? { conversation } : {}),
    records: m.records,
    ...(m.turns !== undefined ? { turns: m.turns } : {}),
    vectors: m.vectors,
    inboxEntries: m.inbox_entries,
    stateKeys: m.state_keys,
    restored: m.restored,
    ms: m.ms,
    ...(m.erased_record_ids.length > 0 ? { erasedRecordIds: m.erased_record_ids } : {}),
  };
};
