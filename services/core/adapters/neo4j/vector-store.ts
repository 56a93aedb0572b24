import type { Driver, ManagedTransaction, Session } from "neo4j-driver";
import { mapLimit } from "../../map-limit.ts";
import type {
  VectorFilter,
  VectorHit,
  VectorItem,
  VectorKind,
  VectorPayload,
  VectorQuery,
  VectorStore,
} from "../../ports.ts";
import type { RecordType } from "../../types.ts";
import { compileFilter, entityKey } from "../../vector-filter.ts";
import {
  applySchema,
  byBytes,
  int,
  type Neo4jConnectionOptions,
  num,
  openDriver,
  readRows,
  rows,
  runAutoCommitRetrying,
} from "./driver.ts";

export interface Neo4jVectorStoreOptions extends Neo4jConnectionOptions {
  /** Node label of the vectors (default "Vector"); one label, one vector index. */
  label?: string;
  /** Name of the vector index (default "memory_vector_embedding", or derived from a custom label). */
  indexName?: string;
  /**
   * Largest filtered set searched exactly (default 2000): up to this many matching nodes, cosine is
   * computed for each of them in Cypher; above it, the shared vector index is queried.
   */
  exactThreshold?: number;
  /** Items per upsert statement (default 500). */
  batchSize?: number;
}

const LABEL = /^[A-Za-z_][A-Za-z0-9_]*$/;

interface VectorRow {
  id: string;
  tenant: string;
  conversation: string;
  kind: string;
  type: string | null;
  time: unknown;
  entities: string[] | null;
  score?: unknown;
  embedding?: unknown[];
  second?: unknown[] | null;
}

const payloadOf = (r: VectorRow): VectorPayload => {
  const payload: VectorPayload = { tenant: r.tenant, conversation: r.conversation, kind: r.kind as VectorKind };
  if (r.type !== null && r.type !== undefined) payload.type = r.type as RecordType;
  if (r.time !== null && r.time !== undefined) payload.time = num(r.time);
  if (r.entities !== null && r.entities !== undefined) payload.entities = [...r.entities];
  return payload;
};

/** Neo4j's cosine score is (1 + cos) / 2, in [0, 1]; the port's score is the cosine itself. */
const cosineOf = (neo4jScore: unknown): number => 2 * num(neo4jScore) - 1;

/**
 * searchMany's filter, with the query's own values (`q`, from manyParams): the conditions of
 * where() below, each one skipped where the query has no value for it.
 */
const MANY_WHERE = `v.tenant = $tenant
  AND (q.conversation IS NULL OR v.conversation = q.conversation)
  AND (q.kind IS NULL OR v.kind = q.kind)
  AND (q.types IS NULL OR v.type IN q.types)
  AND (q.timeFrom IS NULL OR v.time >= q.timeFrom)
  AND (q.timeTo IS NULL OR v.time <= q.timeTo)
  AND (q.entityKeys IS NULL OR any(e IN coalesce(v.entityKeys, []) WHERE e IN q.entityKeys))`;

/** searchMany's searches of the vector index in flight at once (as the candidate lookups ran before). */
const INDEX_SEARCHES_AT_ONCE = 4;

const RETURN_PAYLOAD =
  "v.id AS id, v.tenant AS tenant, v.conversation AS conversation, v.kind AS kind, v.type AS type, v.time AS time, v.entities AS entities";

/**
 * VectorStore over Neo4j's vector index (Neo4j 5.11+; HNSW, cosine).
 *
 * Model: one node per item, `(:Vector {tenant, id, kind, conversation, type, time, entities,
 * entityKeys, embedding})`, unique on (tenant, id), with range indexes on tenant,
 * (tenant, conversation) and (tenant, kind). ONE vector index over all tenants' nodes, created lazily with the
 * dimension of the first upsert (cosine); a vector of another dimension is refused with an error.
 *
 * Search strategy: Neo4j 5 has no filtered vector search (the index knows only the embedding), and
 * the index is shared by every tenant, so a plain top-k query may be filled with other tenants'
 * nodes. So a search first counts the tenant's nodes matching the filter (stopping past the
 * threshold; the count and the exact search below are one statement, one round trip):
 * - small filtered set (at most `exactThreshold`, default 2000): exact cosine in Cypher
 *   (vector.similarity.cosine) over just those nodes, found through the tenant index. It is exact
 *   (no recall loss under selective filters), and at this size cheaper than an over-fetching ANN
 *   query, whose cost grows with the other tenants' data rather than with this tenant's.
 * - larger sets: db.index.vector.queryNodes with k' = max(10 k, 100) candidates, filtered by tenant
 *   and the VectorFilter in the same query; when fewer than k survive, k' grows 4x until k hits are
 *   found or k' covers every indexed node (then the answer is exhaustive). The survivors are
 *   re-scored with the exact cosine of the stored embedding: Neo4j 5.23+ quantises vector indexes by
 *   default, so the index's own scores are off by up to about 0.01 and can swap near neighbours.
 * Either way the tenant is a predicate of the query itself, and hits are checked again here: another
 * tenant's item is never returned.
 */
export class Neo4jVectorStore implements VectorStore {
  readonly driver: Driver;
  readonly label: string;
  /** Id lookups seek the (tenant, id) constraint's index whatever the plan statistics say (graph-schema.ts RECORD_KEY). */
  private readonly keySeek: string;
  /**
   * A scan of one kind of the tenant's nodes seeks the (tenant, kind) index: record and turn
   * vectors share the label, and the update candidates' exact scan (searchShared) needs the
   * records alone, so the tenant index read both kinds and filtered half away (issue 18). A hint,
   * not the planner's choice, so that a plan compiled on a near-empty graph does the same.
   */
  private readonly kindSeek: string;
  readonly indexName: string;
  private readonly owns: boolean;
  private readonly database: string | undefined;
  private readonly exactThreshold: number;
  private readonly batchSize: number;
  private schemaReady: Promise<void> | undefined;
  private dimension: number | undefined;
  private closed = false;

  constructor(options: Neo4jVectorStoreOptions) {
    const label = options.label ?? "Vector";
    if (!LABEL.test(label)) throw new Error(`Neo4jVectorStore: invalid label ${JSON.stringify(label)}`);
    const { driver, owns } = openDriver(options);
    this.driver = driver;
    this.owns = owns;
    this.database = options.database;
    this.label = label;
    this.keySeek = `USING INDEX SEEK v:${label}(tenant, id)`;
    this.kindSeek = `USING INDEX SEEK v:${label}(tenant, kind)`;
    this.indexName =
      options.indexName ?? (label === "Vector" ? "memory_vector_embedding" : `${label.toLowerCase()}_embedding`);
    if (!LABEL.test(this.indexName)) throw new Error(`Neo4jVectorStore: invalid index name ${this.indexName}`);
    this.exactThreshold = Math.max(0, Math.floor(options.exactThreshold ?? 2000));
    this.batchSize = Math.max(1, Math.floor(options.batchSize ?? 500));
  }

  private check(): void {
    if (this.closed) throw new Error("Neo4jVectorStore is closed");
  }

  private session(): Session {
    this.check();
    return this.driver.session(this.database ? { database: this.database } : {});
  }

  /** One read statement, auto-committed (driver.ts readRows: one round trip instead of a transaction's). */
  private async read<T>(cypher: string, params: Record<string, unknown>): Promise<T[]> {
    this.check();
    return readRows<T>(this.driver, this.database, cypher, params);
  }

  private async write<T>(work: (tx: ManagedTransaction) => Promise<T>): Promise<T> {
    const session = this.session();
    try {
      return await session.executeWrite(work);
    } finally {
      await session.close();
    }
  }

  /** Key constraint and range indexes (idempotent); the vector index comes with the first upsert. */
  async ensureSchema(): Promise<void> {
    this.check();
    this.schemaReady ??= applySchema(this.driver, this.database, [
      `CREATE CONSTRAINT ${this.indexName}_key IF NOT EXISTS FOR (n:${this.label}) REQUIRE (n.tenant, n.id) IS UNIQUE`,
      `CREATE INDEX ${this.indexName}_tenant IF NOT EXISTS FOR (n:${this.label}) ON (n.tenant)`,
      `CREATE INDEX ${this.indexName}_conversation IF NOT EXISTS FOR (n:${this.label}) ON (n.tenant, n.conversation)`,
      // Created over the existing nodes too (a store written before it): ensureSchema waits until it is online.
      `CREATE INDEX ${this.indexName}_kind IF NOT EXISTS FOR (n:${this.label}) ON (n.tenant, n.kind)`,
    ]).catch((err: unknown) => {
      this.schemaReady = undefined;
      throw err;
    });
    await this.schemaReady;
  }

  /** The vector index's dimension, or undefined while there is no index yet. */
  private async indexDimension(): Promise<number | undefined> {
    if (this.dimension !== undefined) return this.dimension;
    const [row] = await this.read<{ options: { indexConfig?: Record<string, unknown> } }>(
      "SHOW INDEXES YIELD name, type, options WHERE name = $name AND type = 'VECTOR' RETURN options",
      { name: this.indexName },
    );
    const dim = row?.options.indexConfig?.["vector.dimensions"];
    if (dim !== undefined && dim !== null) this.dimension = num(dim);
    return this.dimension;
  }

  private async ensureVectorIndex(dimension: number): Promise<number> {
    const existing = await this.indexDimension();
    if (existing !== undefined) return existing;
    await applySchema(this.driver, this.database, [
      `CREATE VECTOR INDEX ${this.indexName} IF NOT EXISTS FOR (n:${this.label}) ON (n.embedding)
       OPTIONS { indexConfig: { \`vector.dimensions\`: ${Math.floor(dimension)}, \`vector.similarity_function\`: 'cosine' } }`,
    ]);
    // Another process may have created it first, with its own dimension: read it back.
    const created = await this.indexDimension();
    if (created === undefined) throw new Error(`Neo4jVectorStore: vector index ${this.indexName} was not created`);
    return created;
  }

  private static checkDimension(expected: number, got: number, what: string): void {
    if (got !== expected) {
      throw new Error(`Neo4jVectorStore: ${what} has dimension ${got}, the index has dimension ${expected}`);
    }
  }

  async upsert(tenant: string, items: readonly VectorItem[]): Promise<void> {
    if (items.length === 0) return;
    for (const item of items) {
      if (item.payload.tenant !== tenant) {
        throw new Error(`upsert: item ${item.id} belongs to tenant "${item.payload.tenant}", call is for "${tenant}"`);
      }
    }
    await this.ensureSchema();
    const dim = await this.ensureVectorIndex((items[0] as VectorItem).vector.length);
    for (const item of items) Neo4jVectorStore.checkDimension(dim, item.vector.length, `vector ${item.id}`);
    // The last occurrence of an id wins, as with an upsert per item.
    const byId = new Map(items.map((i) => [i.id, i] as const));
    const all = [...byId.values()].map((i) => ({
      id: i.id,
      conversation: i.payload.conversation,
      kind: i.payload.kind,
      type: i.payload.type ?? null,
      time: i.payload.time ?? null,
      entities: i.payload.entities ? [...i.payload.entities] : null,
      entityKeys: i.payload.entities ? [...new Set(i.payload.entities.map(entityKey))] : null,
      embedding: Array.from(i.vector),
      second: i.second ? Array.from(i.second) : null,
    }));
    await this.write(async (tx) => {
      for (let i = 0; i < all.length; i += this.batchSize) {
        await tx.run(
          `UNWIND $items AS item
           MERGE (v:${this.label} {tenant: $tenant, id: item.id})
           SET v.conversation = item.conversation, v.kind = item.kind, v.type = item.type, v.time = item.time,
             v.entities = item.entities, v.entityKeys = item.entityKeys, v.embedding = item.embedding,
             v.second = item.second`,
          { tenant, items: all.slice(i, i + this.batchSize) },
        );
      }
    });
  }

  /** The WHERE clause (tenant first) and its parameters for a filter; same semantics as compileFilter. */
  private static where(tenant: string, filter?: VectorFilter): { clause: string; params: Record<string, unknown> } {
    const parts = ["v.tenant = $tenant"];
    const params: Record<string, unknown> = { tenant };
    if (filter?.conversation !== undefined) {
      parts.push("v.conversation = $conversation");
      params.conversation = filter.conversation;
    }
    if (filter?.kind !== undefined) {
      parts.push("v.kind = $kind");
      params.kind = filter.kind;
    }
    if (filter?.types && filter.types.length > 0) {
      parts.push("v.type IN $types");
      params.types = [...filter.types];
    }
    if (filter?.timeFrom !== undefined) {
      parts.push("v.time >= $timeFrom");
      params.timeFrom = filter.timeFrom;
    }
    if (filter?.timeTo !== undefined) {
      parts.push("v.time <= $timeTo");
      params.timeTo = filter.timeTo;
    }
    if (filter?.entities && filter.entities.length > 0) {
      parts.push("any(e IN coalesce(v.entityKeys, []) WHERE e IN $entityKeys)");
      params.entityKeys = [...new Set(filter.entities.map(entityKey))];
    }
    return { clause: parts.join(" AND "), params };
  }

  async search(tenant: string, vector: Float32Array, k: number, filter?: VectorFilter): Promise<VectorHit[]> {
    const limit = Math.floor(k);
    this.check();
    const dim = await this.indexDimension();
    if (dim === undefined) return [];
    Neo4jVectorStore.checkDimension(dim, vector.length, "query vector");
    if (!(limit > 0)) return [];
    await this.ensureSchema(); // the hinted indexes exist
    const { clause, params } = Neo4jVectorStore.where(tenant, filter);
    const q = Array.from(vector);
    // One statement counts the matching nodes (up to the threshold + 1) and, when they are few
    // enough, scores them exactly: one round trip and one transaction instead of a count followed by
    // a search (the common case; each read is a session, BEGIN, RUN and COMMIT on a loaded server).
    // A set too large to score, or an empty one, comes back as one row without an id, with the count.
    const exact = await this.read<VectorRow & { n: unknown }>(
      `MATCH (v:${this.label})${this.seekFor(filter?.kind ?? null, filter?.conversation ?? null)} WHERE ${clause}
       WITH v LIMIT $cap
       WITH collect(v) AS vs
       WITH size(vs) AS n, vs
       UNWIND CASE WHEN n > 0 AND n <= $threshold THEN vs ELSE [null] END AS v
       WITH n, v, vector.similarity.cosine(v.embedding, $q) AS score
       ORDER BY score DESC, v.id LIMIT $k
       RETURN n, ${RETURN_PAYLOAD}, score`,
      { ...params, q, k: int(limit), cap: int(this.exactThreshold + 1), threshold: int(this.exactThreshold) },
    );
    const matching = num(exact[0]?.n);
    if (matching === 0) return [];
    const found = matching <= this.exactThreshold ? exact : await this.searchIndex(clause, params, q, limit);
    return Neo4jVectorStore.hits(tenant, filter, found);
  }

  /**
   * Several searches (the candidate lookups of a segment: two per record), each answered as
   * search() answers it, where each search was a round trip of its own: one statement over a
   * shared scan when the tenant's nodes they can match are few (searchShared), else one statement
   * with the same count and exact scoring per query in a subquery of one UNWIND; a query whose
   * filtered set is too large to score exactly goes to the vector index as in search().
   */
  async searchMany(tenant: string, queries: readonly VectorQuery[]): Promise<VectorHit[][]> {
    this.check();
    if (queries.length === 0) return [];
    const dim = await this.indexDimension();
    if (dim === undefined) return queries.map(() => []);
    for (const query of queries) Neo4jVectorStore.checkDimension(dim, query.vector.length, "query vector");
    await this.ensureSchema(); // the hinted indexes exist
    const asked = queries.map((query, i) => ({ i, limit: Math.floor(query.k), query }));
    const live = asked.filter((a) => a.limit > 0);
    const out: VectorHit[][] = queries.map(() => []);
    if (live.length === 0) return out;
    // Every query takes the largest k; each one's hits are the first of its own k in the same order.
    const kMax = Math.max(...live.map((a) => a.limit));
    const params = live.map((a) => ({
      i: int(a.i),
      vector: Array.from(a.query.vector),
      ...Neo4jVectorStore.manyParams(a.query.filter),
    }));
    const shared = await this.searchShared(tenant, params, kMax);
    if (shared) {
      for (const a of live)
        out[a.i] = Neo4jVectorStore.hits(tenant, a.query.filter, (shared.get(a.i) ?? []).slice(0, a.limit));
      return out;
    }
    const found = await this.read<VectorRow & { i: unknown; n: unknown }>(
      `UNWIND $queries AS q
       CALL (q) {
         MATCH (v:${this.label}) WHERE ${MANY_WHERE}
         WITH v LIMIT $cap
         WITH collect(v) AS vs
         WITH size(vs) AS n, vs
         UNWIND CASE WHEN n > 0 AND n <= $threshold THEN vs ELSE [null] END AS v
         WITH n, v, vector.similarity.cosine(v.embedding, q.vector) AS score
         ORDER BY score DESC, v.id LIMIT $k
         RETURN n, ${RETURN_PAYLOAD}, score
       }
       RETURN q.i AS i, n, id, tenant, conversation, kind, type, time, entities, score`,
      {
        tenant,
        queries: params,
        k: int(kMax),
        cap: int(this.exactThreshold + 1),
        threshold: int(this.exactThreshold),
      },
    );
    const rowsOf = new Map<number, (VectorRow & { n: unknown })[]>();
    for (const row of found) {
      const i = num(row.i);
      const list = rowsOf.get(i) ?? [];
      list.push(row);
      rowsOf.set(i, list);
    }
    const large: typeof live = [];
    for (const a of live) {
      const mine = rowsOf.get(a.i) ?? [];
      const matching = num(mine[0]?.n);
      if (matching === 0) continue;
      if (matching <= this.exactThreshold)
        out[a.i] = Neo4jVectorStore.hits(tenant, a.query.filter, mine.slice(0, a.limit));
      else large.push(a);
    }
    // Sets too large to score go to the vector index, a few at a time (each is one to a few reads).
    await mapLimit(large, INDEX_SEARCHES_AT_ONCE, async (a) => {
      const { clause, params } = Neo4jVectorStore.where(tenant, a.query.filter);
      const found = await this.searchIndex(clause, params, Array.from(a.query.vector), a.limit);
      out[a.i] = Neo4jVectorStore.hits(tenant, a.query.filter, found);
    });
    return out;
  }

  /**
   * The queries of searchMany over one scan, when the nodes they can match (the tenant's, of the
   * kind and conversation every query names, if they all name the same) are few enough to score
   * exactly: each node's embedding is read once for all queries, where a statement per query read
   * it again for each (reading the 384-d property is about half of an exact search's cost). The
   * other properties the filter, the order and the answer use are read once per node too, into the
   * items (maps), not once per query and node (issue 18 sixth pass: 25% less server time). Every
   * query's filtered set is then within the threshold too, so search() would score it exactly: the
   * same top k by (score desc, id). Undefined when the scan holds more nodes than the threshold
   * (then each query is counted on its own).
   */
  private async searchShared(
    tenant: string,
    queries: readonly Record<string, unknown>[],
    k: number,
  ): Promise<Map<number, VectorRow[]> | undefined> {
    const common = (field: string): unknown => {
      const first = queries[0]?.[field] ?? null;
      return queries.every((q) => (q[field] ?? null) === first) ? first : null;
    };
    const kind = common("kind");
    const conversation = common("conversation");
    const base = [
      "v.tenant = $tenant",
      ...(kind === null ? [] : ["v.kind = $kind"]),
      ...(conversation === null ? [] : ["v.conversation = $conversation"]),
    ].join(" AND ");
    const [row] = await this.read<{
      total: unknown;
      answers: { i: unknown; hits: (VectorRow & { score: unknown })[] }[];
    }>(
      `MATCH (v:${this.label})${this.seekFor(kind, conversation)} WHERE ${base}
       WITH v LIMIT $cap
       WITH collect(v) AS vs
       CALL (vs) {
         UNWIND CASE WHEN size(vs) <= $threshold THEN vs ELSE [] END AS v
         RETURN collect(v {.id, .tenant, .conversation, .kind, .type, .time, .entities, .entityKeys, .embedding}) AS items
       }
       CALL (items) {
         UNWIND $queries AS q
         CALL (q, items) {
           UNWIND items AS v
           WITH q, v
           WHERE ${MANY_WHERE}
           WITH v, vector.similarity.cosine(v.embedding, q.vector) AS score
           ORDER BY score DESC, v.id LIMIT $k
           RETURN collect(v {.id, .tenant, .conversation, .kind, .type, .time, .entities, score: score}) AS hits
         }
         RETURN collect({i: q.i, hits: hits}) AS answers
       }
       RETURN size(vs) AS total, answers`,
      {
        tenant,
        kind,
        conversation,
        queries: [...queries],
        k: int(k),
        cap: int(this.exactThreshold + 1),
        threshold: int(this.exactThreshold),
      },
    );
    if (!row || num(row.total) > this.exactThreshold) return undefined;
    return new Map(row.answers.map((a) => [num(a.i), a.hits]));
  }

  /**
   * The index hint of a scan by kind (kindSeek) when the kind is its only condition beside the
   * tenant; with a conversation too, the planner picks between (tenant, conversation) and (tenant,
   * kind) by their sizes.
   */
  private seekFor(kind: unknown, conversation: unknown): string {
    return kind !== null && conversation === null ? ` ${this.kindSeek}` : "";
  }

  /** The filter of one query of searchMany as parameters of MANY_WHERE (null: no condition). */
  private static manyParams(filter?: VectorFilter): Record<string, unknown> {
    return {
      conversation: filter?.conversation ?? null,
      kind: filter?.kind ?? null,
      types: filter?.types && filter.types.length > 0 ? [...filter.types] : null,
      timeFrom: filter?.timeFrom ?? null,
      timeTo: filter?.timeTo ?? null,
      entityKeys: filter?.entities && filter.entities.length > 0 ? [...new Set(filter.entities.map(entityKey))] : null,
    };
  }

  /**
   * A large filtered set: db.index.vector.queryNodes with k' candidates, filtered in the query,
   * k' growing 4x until k hits survive or k' covers every node; survivors re-scored exactly.
   */
  private async searchIndex(
    clause: string,
    params: Record<string, unknown>,
    q: number[],
    limit: number,
  ): Promise<VectorRow[]> {
    const [all] = await this.read<{ n: unknown }>(`MATCH (v:${this.label}) RETURN count(v) AS n`, {});
    const total = num(all?.n);
    let kp = Math.min(Math.max(limit * 10, 100), total);
    for (;;) {
      const found = await this.read<VectorRow>(
        `CALL db.index.vector.queryNodes($index, $kp, $q) YIELD node AS v
         WITH v WHERE ${clause}
         WITH v, vector.similarity.cosine(v.embedding, $q) AS score
         ORDER BY score DESC, v.id LIMIT $k
         RETURN ${RETURN_PAYLOAD}, score`,
        { ...params, index: this.indexName, kp: int(kp), q, k: int(limit) },
      );
      if (found.length >= limit || kp >= total) return found;
      kp = Math.min(kp * 4, total);
    }
  }

  /** Rows as hits: the tenant and the filter checked again here, so another tenant's item never passes. */
  private static hits(tenant: string, filter: VectorFilter | undefined, found: readonly VectorRow[]): VectorHit[] {
    const keep = compileFilter(filter);
    return found
      .filter((r) => r.tenant === tenant)
      .map((r) => ({ id: r.id, score: cosineOf(r.score), payload: payloadOf(r) }))
      .filter((h) => !keep || keep(h.payload));
  }

  /** Items in the order asked, skipping unknown ids. */
  async get(tenant: string, ids: readonly string[]): Promise<VectorItem[]> {
    if (ids.length === 0) return [];
    this.check();
    const found = await this.read<VectorRow>(
      `UNWIND $ids AS id MATCH (v:${this.label} {tenant: $tenant, id: id}) ${this.keySeek}
       RETURN ${RETURN_PAYLOAD}, v.embedding AS embedding, v.second AS second`,
      { tenant, ids: [...new Set(ids)] },
    );
    const byId = new Map(found.filter((r) => r.tenant === tenant).map((r) => [r.id, r]));
    const out: VectorItem[] = [];
    const seen = new Set<string>();
    for (const id of ids) {
      const r = byId.get(id);
      if (!r || seen.has(id)) continue;
      seen.add(id);
      const item: VectorItem = { id, vector: Float32Array.from((r.embedding ?? []).map(num)), payload: payloadOf(r) };
      if (r.second) item.second = Float32Array.from(r.second.map(num));
      out.push(item);
    }
    return out;
  }

  /** The second-opinion vectors (a node property beside the embedding, not indexed) of these ids. */
  async getSecondVectors(tenant: string, ids: readonly string[]): Promise<ReadonlyMap<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    if (ids.length === 0) return out;
    this.check();
    const found = await this.read<{ tenant: unknown; id: unknown; second: unknown[] | null }>(
      `UNWIND $ids AS id MATCH (v:${this.label} {tenant: $tenant, id: id}) ${this.keySeek}
       WHERE v.second IS NOT NULL
       RETURN v.tenant AS tenant, v.id AS id, v.second AS second`,
      { tenant, ids: [...new Set(ids)] },
    );
    for (const r of found) {
      if (r.tenant !== tenant || typeof r.id !== "string" || !r.second) continue;
      out.set(r.id, Float32Array.from(r.second.map(num)));
    }
    return out;
  }

  /** A page of the ids without a second-opinion vector, walked along the (tenant, id) key. */
  async idsWithoutSecond(tenant: string, after: string | undefined, limit: number): Promise<string[]> {
    this.check();
    const found = await this.read<{ tenant: unknown; id: unknown }>(
      `MATCH (v:${this.label}) USING INDEX v:${this.label}(tenant, id)
       WHERE v.tenant = $tenant AND v.id > $after AND v.second IS NULL
       RETURN v.tenant AS tenant, v.id AS id ORDER BY v.id LIMIT $limit`,
      { tenant, after: after ?? "", limit: int(limit) },
    );
    return found.flatMap((r) => (r.tenant === tenant && typeof r.id === "string" ? [r.id] : []));
  }

  /** Sets the property on the nodes that exist: a node deleted meanwhile is not created again. */
  async setSecondVectors(tenant: string, vectors: ReadonlyMap<string, Float32Array>): Promise<number> {
    this.check();
    const all = [...vectors].map(([id, v]) => ({ id, second: Array.from(v) }));
    if (all.length === 0) return 0;
    return this.write(async (tx) => {
      let n = 0;
      for (let i = 0; i < all.length; i += this.batchSize) {
        const [row] = rows<{ n: unknown }>(
          await tx.run(
            `UNWIND $items AS item MATCH (v:${this.label} {tenant: $tenant, id: item.id}) ${this.keySeek}
             SET v.second = item.second RETURN count(v) AS n`,
            { tenant, items: all.slice(i, i + this.batchSize) },
          ),
        );
        n += num(row?.n);
      }
      return n;
    });
  }

  async delete(tenant: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    this.check();
    await this.write(async (tx) => {
      await tx.run(
        `UNWIND $ids AS id MATCH (v:${this.label} {tenant: $tenant, id: id}) ${this.keySeek} DETACH DELETE v`,
        {
          tenant,
          ids: [...new Set(ids)],
        },
      );
    });
  }

  async deleteConversation(tenant: string, conversation: string): Promise<number> {
    this.check();
    return this.write(async (tx) => {
      const [row] = rows<{ n: unknown }>(
        await tx.run(
          `MATCH (v:${this.label} {tenant: $tenant, conversation: $conversation})
           WITH collect(v) AS vs
           FOREACH (v IN vs | DETACH DELETE v)
           RETURN size(vs) AS n`,
          { tenant, conversation },
        ),
      );
      return num(row?.n);
    });
  }

  /**
   * Erasure of raw turns alone: every item of kind "turn" of the conversation (or the tenant), in
   * batches of auto-committed transactions as deleteTenant. The count is read before the delete.
   */
  async deleteRawTurns(tenant: string, conversation?: string): Promise<number> {
    this.check();
    const where = conversation === undefined ? "" : " AND v.conversation = $conversation";
    const params = { tenant, ...(conversation !== undefined ? { conversation } : {}) };
    const match = `MATCH (v:${this.label} {tenant: $tenant}) WHERE v.kind = 'turn'${where}`;
    const [row] = await this.read<{ n: unknown }>(`${match} RETURN count(v) AS n`, params);
    const n = num(row?.n);
    if (n === 0) return 0;
    const session = this.session();
    try {
      await runAutoCommitRetrying(
        session,
        `${match} CALL (v) { DETACH DELETE v } IN TRANSACTIONS OF 5000 ROWS`,
        params,
      );
    } finally {
      await session.close();
    }
    return n;
  }

  /** Deletes in batches of auto-committed transactions (a large tenant needs no huge transaction). */
  async deleteTenant(tenant: string): Promise<void> {
    const session = this.session();
    try {
      await runAutoCommitRetrying(
        session,
        `MATCH (v:${this.label} {tenant: $tenant}) CALL (v) { DETACH DELETE v } IN TRANSACTIONS OF 5000 ROWS`,
        { tenant },
      );
    } finally {
      await session.close();
    }
  }

  /** Through the tenant index (a prefix seek). */
  async tenantsNamed(prefix: string): Promise<string[]> {
    const found = await this.read<{ tenant: string }>(
      `MATCH (v:${this.label}) WHERE v.tenant STARTS WITH $prefix RETURN DISTINCT v.tenant AS tenant`,
      { prefix },
    );
    return found.map((r) => r.tenant).sort(byBytes);
  }

  async count(tenant: string): Promise<number> {
    this.check();
    const [row] = await this.read<{ n: unknown }>(`MATCH (v:${this.label} {tenant: $tenant}) RETURN count(v) AS n`, {
      tenant,
    });
    return num(row?.n);
  }

  /** Writes are durable at commit: nothing to flush. */
  async flush(): Promise<void> {
    this.check();
  }

  /**
   * Drops every node of this store's label with its vector index and schema (tests and tools; with
   * the default label this erases all tenants' vectors).
   */
  async drop(): Promise<void> {
    const session = this.session();
    try {
      await session.run(`MATCH (v:${this.label}) CALL (v) { DETACH DELETE v } IN TRANSACTIONS OF 5000 ROWS`);
      for (const name of [
        this.indexName,
        `${this.indexName}_tenant`,
        `${this.indexName}_conversation`,
        `${this.indexName}_kind`,
      ]) {
        await session.run(`DROP INDEX ${name} IF EXISTS`);
      }
      await session.run(`DROP CONSTRAINT ${this.indexName}_key IF EXISTS`);
    } finally {
      await session.close();
    }
    this.dimension = undefined;
    this.schemaReady = undefined;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.owns) await this.driver.close();
  }
}
