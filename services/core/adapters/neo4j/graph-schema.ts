/**
 * The Neo4j graph model's schema: node labels and relationship types the graph store writes, and
 * the constraints and indexes it creates before its first query (Neo4jGraphStore.ensureSchema).
 */

/**
 * Full-text (Lucene) index names: one over Record.lex, one over Turn.lex (the shared lexical terms,
 * services/core/lexical.ts), split on whitespace only, so the index holds exactly those terms.
 */
export const RECORD_TEXT_INDEX = "memory_record_lex";
export const TURN_TEXT_INDEX = "memory_turn_lex";
/** The earlier indexes over the raw text (english analyzer); dropped at start-up. */
const RETIRED_INDEXES = ["memory_record_text", "memory_turn_text"];

/** Node labels this store writes; every one of them carries `tenant`. */
export const GRAPH_LABELS = [
  "Tenant",
  "Record",
  "Entity",
  "Topic",
  "Day",
  "Month",
  "EventFrame",
  "Segment",
  "Turn",
  "UpdateCandidate",
  "DeadLetter",
] as const;

/** Relationship types this store writes. */
export const GRAPH_RELATIONSHIPS = [
  "MENTIONED_IN",
  "TAGS",
  "ON_DAY",
  "IN_MONTH",
  "GROUPS",
  "COVERS",
  "HAS_TURN",
  "YIELDED",
  "SUPERSEDES",
  "DUPLICATE_OF",
  "REFINES",
] as const;

/**
 * Schema created by ensureSchema(): a uniqueness constraint on every node key (tenant first; a
 * uniqueness constraint is backed by a range index, so key lookups are index seeks), range indexes
 * for the list / time / pending-candidate reads, and two full-text indexes for the lexical routes.
 * Those index `lex`, the terms of the one shared tokenizer (core/lexical.ts), with the `whitespace`
 * analyzer, so that both stores see the same terms and rank with the same BM25.
 */
export const GRAPH_SCHEMA: readonly string[] = [
  "CREATE CONSTRAINT memory_tenant_key IF NOT EXISTS FOR (n:Tenant) REQUIRE n.tenant IS UNIQUE",
  "CREATE CONSTRAINT memory_record_key IF NOT EXISTS FOR (n:Record) REQUIRE (n.tenant, n.id) IS UNIQUE",
  "CREATE CONSTRAINT memory_entity_key IF NOT EXISTS FOR (n:Entity) REQUIRE (n.tenant, n.key) IS UNIQUE",
  "CREATE CONSTRAINT memory_topic_key IF NOT EXISTS FOR (n:Topic) REQUIRE (n.tenant, n.key) IS UNIQUE",
  "CREATE CONSTRAINT memory_day_key IF NOT EXISTS FOR (n:Day) REQUIRE (n.tenant, n.day) IS UNIQUE",
  "CREATE CONSTRAINT memory_month_key IF NOT EXISTS FOR (n:Month) REQUIRE (n.tenant, n.month) IS UNIQUE",
  "CREATE CONSTRAINT memory_event_frame_key IF NOT EXISTS FOR (n:EventFrame) REQUIRE (n.tenant, n.id) IS UNIQUE",
  "CREATE CONSTRAINT memory_segment_key IF NOT EXISTS FOR (n:Segment) REQUIRE (n.tenant, n.id) IS UNIQUE",
  "CREATE CONSTRAINT memory_turn_key IF NOT EXISTS FOR (n:Turn) REQUIRE (n.tenant, n.conversation, n.turnId) IS UNIQUE",
  `CREATE CONSTRAINT memory_candidate_key IF NOT EXISTS FOR (n:UpdateCandidate)
     REQUIRE (n.tenant, n.recordId, n.candidateId) IS UNIQUE`,
  "CREATE CONSTRAINT memory_dead_letter_key IF NOT EXISTS FOR (n:DeadLetter) REQUIRE (n.tenant, n.id) IS UNIQUE",
  "CREATE INDEX memory_record_tenant IF NOT EXISTS FOR (n:Record) ON (n.tenant)",
  "CREATE INDEX memory_record_said IF NOT EXISTS FOR (n:Record) ON (n.tenant, n.saidAt)",
  "CREATE INDEX memory_record_conversation IF NOT EXISTS FOR (n:Record) ON (n.tenant, n.conversation)",
  "CREATE INDEX memory_record_time IF NOT EXISTS FOR (n:Record) ON (n.tenant, n.timeFrom)",
  "CREATE INDEX memory_record_superseded_by IF NOT EXISTS FOR (n:Record) ON (n.tenant, n.supersededBy)",
  "CREATE INDEX memory_segment_conversation IF NOT EXISTS FOR (n:Segment) ON (n.tenant, n.conversation)",
  "CREATE INDEX memory_turn_conversation IF NOT EXISTS FOR (n:Turn) ON (n.tenant, n.conversation)",
  "CREATE INDEX memory_event_frame_conversation IF NOT EXISTS FOR (n:EventFrame) ON (n.tenant, n.conversation)",
  "CREATE INDEX memory_candidate_status IF NOT EXISTS FOR (n:UpdateCandidate) ON (n.tenant, n.status)",
  "CREATE INDEX memory_candidate_status_only IF NOT EXISTS FOR (n:UpdateCandidate) ON (n.status)",
  "CREATE INDEX memory_dead_letter_seq IF NOT EXISTS FOR (n:DeadLetter) ON (n.seq)",
  "CREATE INDEX memory_dead_letter_key_idx IF NOT EXISTS FOR (n:DeadLetter) ON (n.tenant, n.key)",
  ...["Entity", "Topic", "Day", "Month", "EventFrame", "Segment", "Turn", "UpdateCandidate", "DeadLetter"].map(
    (label) => `CREATE INDEX memory_${label.toLowerCase()}_tenant IF NOT EXISTS FOR (n:${label}) ON (n.tenant)`,
  ),
  ...RETIRED_INDEXES.map((name) => `DROP INDEX ${name} IF EXISTS`),
  `CREATE FULLTEXT INDEX ${RECORD_TEXT_INDEX} IF NOT EXISTS FOR (n:Record) ON EACH [n.lex]
     OPTIONS { indexConfig: { \`fulltext.analyzer\`: 'whitespace' } }`,
  `CREATE FULLTEXT INDEX ${TURN_TEXT_INDEX} IF NOT EXISTS FOR (n:Turn) ON EACH [n.lex]
     OPTIONS { indexConfig: { \`fulltext.analyzer\`: 'whitespace' } }`,
];

/**
 * Planner hints: look a row's node up by its unique key (the constraint's index), whatever the
 * statistics say. A plan is compiled once and cached; one compiled while the graph is near empty
 * (a new server, a store whose tenants were erased, the indexer's warm-up) estimates the tenant
 * index at no rows and seeks `(tenant)` then filters on the key: every UNWIND row then reads all
 * of the tenant's nodes of that label. Measured on writeBatch (docs/benchmarks.md, issue 18 sixth
 * pass): the day/month statement's db hits 4.7x, its server time 3.7x, growing with the tenant.
 */
export const RECORD_KEY = "USING INDEX SEEK r:Record(tenant, id)";
/**
 * The same hint for a Record by another variable name, the UpdateCandidate key, and the Entity /
 * Topic keys a lookup by name starts from. Without the last two, a plan compiled on a near-empty
 * graph (seen: the candidates' topic lookup after the freshness bench erased its tenants) started
 * from `Record(tenant)` and expanded every record of the tenant to its topics, per lookup.
 */
export const recordSeek = (variable: string): string => `USING INDEX SEEK ${variable}:Record(tenant, id)`;
export const CANDIDATE_KEY = "USING INDEX SEEK u:UpdateCandidate(tenant, recordId, candidateId)";
export const entitySeek = (variable: string): string => `USING INDEX SEEK ${variable}:Entity(tenant, key)`;
export const topicSeek = (variable: string): string => `USING INDEX SEEK ${variable}:Topic(tenant, key)`;
export const SEGMENT_KEY = "USING INDEX SEEK s:Segment(tenant, id)";
export const TURN_KEY = "USING INDEX SEEK t:Turn(tenant, conversation, turnId)";
