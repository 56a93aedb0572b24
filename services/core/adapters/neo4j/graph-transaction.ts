/**
 * The Neo4j side of the transactional port (GraphTransactions): the primitive reads and writes the
 * consolidation and erasure rules (services/consolidator/apply.ts, erasure.ts) run over, inside
 * one managed write transaction. No rule lives here: only how a read or a write is done in Cypher.
 */
import type { ManagedTransaction } from "neo4j-driver";
import type { RecordRelationKind, TransactionReads, TransactionView, TransactionWrites } from "../../ports.ts";
import type { MemoryRecord } from "../../types.ts";
import { int, rows } from "./driver.ts";
import { CANDIDATE_KEY, RECORD_KEY, recordSeek } from "./graph-schema.ts";
import { type StampedData, stampCypher } from "./tenant-stamp-memo.ts";

type Tx = ManagedTransaction;

interface JsonRow {
  id: string;
  json: string;
}

const ms = (iso: string): number => {
  const v = Date.parse(iso);
  if (Number.isNaN(v)) throw new Error(`not a timestamp: ${iso}`);
  return v;
};

const uniq = (values: readonly string[]): string[] => [...new Set(values)];

/** The MERGE of one relation kind (types cannot be parameters in Cypher 5). */
const RELATION_MERGE: Record<RecordRelationKind, string> = {
  SUPERSEDES: "MERGE (a)-[e:SUPERSEDES]->(b)",
  DUPLICATE_OF: "MERGE (a)-[e:DUPLICATE_OF]->(b)",
  REFINES: "MERGE (a)-[e:REFINES]->(b)",
};

/** Rewrites a record's JSON and the properties derived from its validity and merged sources. */
export const writeRecordJson = async (tx: Tx, tenant: string, record: MemoryRecord): Promise<void> => {
  await tx.run(
    `MATCH (r:Record {tenant: $tenant, id: $id}) ${RECORD_KEY}
     SET r.json = $json, r.validTo = $validTo, r.supersededBy = $supersededBy, r.merged = $merged`,
    {
      tenant,
      id: record.id,
      json: JSON.stringify(record),
      validTo: record.valid.to ? int(ms(record.valid.to)) : null,
      supersededBy: record.valid.supersededBy ?? null,
      merged: (record.mergedSources?.length ?? 0) > 0,
    },
  );
};

/** What the rule asked to read, in the transaction. */
export const readView = async (tx: Tx, tenant: string, reads: TransactionReads): Promise<TransactionView> => {
  const records = new Map<string, MemoryRecord>();
  if (reads.records && reads.records.length > 0) {
    for (const row of rows<JsonRow>(
      await tx.run(
        `UNWIND $ids AS id MATCH (r:Record {tenant: $tenant, id: id}) ${RECORD_KEY} RETURN r.id AS id, r.json AS json`,
        {
          tenant,
          ids: uniq(reads.records),
        },
      ),
    )) {
      records.set(row.id, JSON.parse(row.json) as MemoryRecord);
    }
  }
  const conversation = reads.conversation;
  if (conversation === undefined) {
    return { records, conversation: { recordIds: [], turnIds: [], complete: true, dependants: [] } };
  }
  const limit = reads.limit;
  const recordIds = rows<{ id: string }>(
    await tx.run(
      `MATCH (r:Record {tenant: $tenant, conversation: $conversation}) RETURN r.id AS id${limit === undefined ? "" : " LIMIT $limit"}`,
      { tenant, conversation, ...(limit === undefined ? {} : { limit: int(limit) }) },
    ),
  ).map((r) => r.id);
  const room = limit === undefined ? undefined : limit - recordIds.length;
  const turnIds =
    room !== undefined && room <= 0
      ? []
      : rows<{ turnId: string }>(
          await tx.run(
            `MATCH (t:Turn {tenant: $tenant, conversation: $conversation}) RETURN t.turnId AS turnId${room === undefined ? "" : " LIMIT $room"}`,
            { tenant, conversation, ...(room === undefined ? {} : { room: int(room) }) },
          ),
        ).map((r) => r.turnId);
  const complete = limit === undefined || recordIds.length + turnIds.length < limit;
  // A step before the last reads only the records its own records supersede; the last also reads
  // every record carrying merged sources.
  const dependants =
    reads.dependants === false
      ? []
      : rows<JsonRow>(
          await tx.run(
            `MATCH (r:Record {tenant: $tenant}) WHERE r.conversation <> $conversation
         AND (r.supersededBy IN $ids OR ($complete AND r.merged = true))
       RETURN r.id AS id, r.json AS json`,
            { tenant, conversation, ids: recordIds, complete },
          ),
        ).map((r) => JSON.parse(r.json) as MemoryRecord);
  return { records, conversation: { recordIds, turnIds, complete, dependants } };
};

/**
 * The rule's writes, in the order TransactionWrites lists them. Returns the tenant's data whose
 * stamp it set (tenant-stamp-memo.ts), for the store to set again after the commit.
 */
export const applyWrites = async (tx: Tx, tenant: string, writes: TransactionWrites): Promise<StampedData[]> => {
  for (const record of writes.records ?? []) await writeRecordJson(tx, tenant, record);
  for (const r of writes.relations ?? []) {
    await tx.run(
      `MATCH (a:Record {tenant: $tenant, id: $from}), (b:Record {tenant: $tenant, id: $to})
       ${recordSeek("a")} ${recordSeek("b")}
       ${RELATION_MERGE[r.relation]}
       ON CREATE SET e.at = $at, e.reason = $reason`,
      { tenant, from: r.from, to: r.to, at: r.at, reason: r.reason ?? null },
    );
  }
  if (writes.settled && writes.settled.rows.length > 0) {
    await tx.run(
      `UNWIND $settled AS c
       MATCH (u:UpdateCandidate {tenant: $tenant, recordId: c.recordId, candidateId: c.candidateId}) ${CANDIDATE_KEY}
       SET u.status = 'done', u.decision = c.decision, u.decidedAt = $decidedAt`,
      { tenant, settled: writes.settled.rows, decidedAt: writes.settled.decidedAt },
    );
  }
  if (writes.deleteRecords && writes.deleteRecords.length > 0) {
    const ids = uniq(writes.deleteRecords);
    // Index nodes only these records used go with them (erasure leaves no names behind).
    await tx.run(
      `MATCH (r:Record {tenant: $tenant}) ${RECORD_KEY} WHERE r.id IN $ids
       OPTIONAL MATCH (r)<-[:MENTIONED_IN|TAGS]-(k)
       OPTIONAL MATCH (r)-[:ON_DAY|IN_MONTH]->(d)
       WITH collect(DISTINCT k) + collect(DISTINCT d) AS linked, collect(DISTINCT r) AS records
       FOREACH (x IN records | DETACH DELETE x)
       WITH linked
       UNWIND linked AS n
       WITH n WHERE n.tenant = $tenant AND NOT (n)-[:MENTIONED_IN|TAGS]->() AND NOT (n)<-[:ON_DAY|IN_MONTH]-(:Record)
       DETACH DELETE n`,
      { tenant, ids },
    );
    await tx.run(
      `MATCH (u:UpdateCandidate {tenant: $tenant}) WHERE u.recordId IN $ids OR u.candidateId IN $ids
       DETACH DELETE u`,
      { tenant, ids },
    );
  }
  if (writes.deleteTurns && writes.deleteTurns.turnIds.length > 0) {
    await tx.run(
      `MATCH (t:Turn {tenant: $tenant, conversation: $conversation}) WHERE t.turnId IN $turnIds DETACH DELETE t`,
      { tenant, conversation: writes.deleteTurns.conversation, turnIds: uniq(writes.deleteTurns.turnIds) },
    );
  }
  if (writes.deleteConversation !== undefined) {
    for (const label of ["EventFrame", "Segment", "Turn"]) {
      await tx.run(`MATCH (n:${label} {tenant: $tenant, conversation: $conversation}) DETACH DELETE n`, {
        tenant,
        conversation: writes.deleteConversation,
      });
    }
  }
  if (writes.deleteDeadLetters && writes.deleteDeadLetters.length > 0) {
    await tx.run(
      "MATCH (d:DeadLetter {tenant: $tenant}) USING INDEX SEEK d:DeadLetter(tenant, key) WHERE d.key IN $keys DETACH DELETE d",
      {
        tenant,
        keys: [...writes.deleteDeadLetters],
      },
    );
  }
  // Records rewritten or deleted, turns deleted: what the graph store's read memos keep changed
  // (tenant-stamp-memo.ts).
  const changed: StampedData[] = [];
  if ((writes.records?.length ?? 0) > 0 || (writes.deleteRecords?.length ?? 0) > 0) changed.push("records");
  if (writes.deleteConversation !== undefined || (writes.deleteTurns?.turnIds.length ?? 0) > 0) changed.push("turns");
  if (changed.length > 0) await tx.run(stampCypher(changed), { tenant });
  return changed;
};
