import { QdrantClient, type Schemas } from "@qdrant/js-client-rest";
import type { VectorFilter, VectorHit, VectorItem, VectorKind, VectorPayload, VectorStore } from "../../ports.ts";
import type { RecordType } from "../../types.ts";
import { buildFilter, entityKey, FIELD, tenantCondition } from "./filter.ts";
import { pointId } from "./point-id.ts";

export interface QdrantVectorStoreOptions {
  /** e.g. http://localhost:6333 */
  url: string;
  apiKey?: string;
  /** Collection name (default "memory_vectors"). */
  collection?: string;
  /** Points per upsert request (default 256). */
  batchSize?: number;
  /** An existing client (tests, custom transport); url/apiKey are then ignored. */
  client?: QdrantClient;
}

type QdrantPayload = Record<string, unknown>;

const toQdrantPayload = (id: string, p: VectorPayload): QdrantPayload => {
  const out: QdrantPayload = {
    [FIELD.tenant]: p.tenant,
    [FIELD.id]: id,
    [FIELD.conversation]: p.conversation,
    [FIELD.kind]: p.kind,
  };
  if (p.type !== undefined) out[FIELD.type] = p.type;
  if (p.time !== undefined) out[FIELD.time] = Math.round(p.time);
  if (p.entities !== undefined) {
    out[FIELD.entities] = [...p.entities];
    out[FIELD.entityKeys] = [...new Set(p.entities.map(entityKey))];
  }
  return out;
};

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

const fromQdrantPayload = (
  raw: QdrantPayload | null | undefined,
): { id: string; payload: VectorPayload } | undefined => {
  if (!raw) return undefined;
  const id = str(raw[FIELD.id]);
  const tenant = str(raw[FIELD.tenant]);
  const conversation = str(raw[FIELD.conversation]);
  const kind = str(raw[FIELD.kind]);
  if (id === undefined || tenant === undefined || conversation === undefined || kind === undefined) return undefined;
  const payload: VectorPayload = { tenant, conversation, kind: kind as VectorKind };
  const type = str(raw[FIELD.type]);
  if (type !== undefined) payload.type = type as RecordType;
  const time = raw[FIELD.time];
  if (typeof time === "number") payload.time = time;
  const entities = raw[FIELD.entities];
  if (Array.isArray(entities)) payload.entities = entities.filter((e): e is string => typeof e === "string");
  return { id, payload };
};

const vectorOf = (v: Schemas["Record"]["vector"]): Float32Array | undefined =>
  Array.isArray(v) && v.every((x) => typeof x === "number") ? Float32Array.from(v as number[]) : undefined;

const isConflict = (err: unknown): boolean => {
  const status = (err as { status?: unknown } | null)?.status;
  return status === 409 || /already exists/i.test(String((err as Error | null)?.message ?? err));
};

/**
 * VectorStore over Qdrant (@qdrant/js-client-rest).
 *
 * Tenancy: ONE collection for all tenants, with `tenant` as a keyword payload index marked
 * `is_tenant: true`, and every request filtered by tenant (plus deterministic per-tenant point ids).
 * This follows Qdrant's multitenancy guidance: a collection per tenant costs a fixed amount of memory
 * and segments/optimizer threads each, so thousands of small tenants (the usual shape for agent
 * memory) do not scale that way, while a tenant-keyed payload index makes Qdrant co-locate each
 * tenant's points and build per-tenant HNSW graphs (`payload_m`, with the global graph off: `m: 0`),
 * so a filtered search touches only that tenant's data. Isolation is enforced in this adapter: no
 * call is sent without the tenant condition, and hits are checked against it again.
 *
 * The collection is created lazily on the first upsert with the dimension of its vectors (cosine
 * distance; score = cosine similarity). A collection of another dimension throws a clear error.
 */
export class QdrantVectorStore implements VectorStore {
  readonly client: QdrantClient;
  readonly collection: string;
  private readonly batchSize: number;
  private dim: number | undefined;
  private exists: boolean | undefined;

  constructor(options: QdrantVectorStoreOptions) {
    this.client =
      options.client ??
      new QdrantClient({
        url: options.url,
        ...(options.apiKey ? { apiKey: options.apiKey } : {}),
        checkCompatibility: false,
      });
    this.collection = options.collection ?? "memory_vectors";
    this.batchSize = options.batchSize ?? 256;
  }

  /** Whether the collection exists; reads its dimension when it does. */
  private async ready(): Promise<boolean> {
    if (this.exists) return true;
    const { exists } = await this.client.collectionExists(this.collection);
    if (!exists) return false;
    const info = await this.client.getCollection(this.collection);
    const vectors = info.config.params.vectors as { size?: unknown } | undefined;
    if (typeof vectors?.size !== "number") {
      throw new Error(`QdrantVectorStore: collection ${this.collection} has no single unnamed vector`);
    }
    this.dim = vectors.size;
    this.exists = true;
    return true;
  }

  private async ensureCollection(dim: number): Promise<void> {
    if (!(await this.ready())) {
      try {
        await this.client.createCollection(this.collection, {
          vectors: { size: dim, distance: "Cosine" },
          // Per-tenant graphs only: every search carries a tenant filter.
          hnsw_config: { payload_m: 16, m: 0 },
        });
      } catch (err) {
        if (!isConflict(err)) throw err;
      }
      const indexes: [string, Schemas["PayloadFieldSchema"]][] = [
        [FIELD.tenant, { type: "keyword", is_tenant: true }],
        [FIELD.conversation, "keyword"],
        [FIELD.kind, "keyword"],
        [FIELD.type, "keyword"],
        [FIELD.time, "integer"],
        [FIELD.entityKeys, "keyword"],
      ];
      for (const [field_name, field_schema] of indexes) {
        await this.client.createPayloadIndex(this.collection, { field_name, field_schema, wait: true });
      }
      this.exists = undefined;
      await this.ready();
    }
    if (this.dim !== dim) {
      throw new Error(
        `QdrantVectorStore: vector dimension ${dim} does not match collection ${this.collection} (dimension ${this.dim})`,
      );
    }
  }

  async upsert(tenant: string, items: readonly VectorItem[]): Promise<void> {
    if (items.length === 0) return;
    const dim = (items[0] as VectorItem).vector.length;
    for (const item of items) {
      if (item.payload.tenant !== tenant) {
        throw new Error(
          `QdrantVectorStore: item ${item.id} has payload tenant "${item.payload.tenant}", upsert is for "${tenant}"`,
        );
      }
      if (item.vector.length !== dim) {
        throw new Error(
          `QdrantVectorStore: vectors of one upsert differ in dimension (${dim} and ${item.vector.length})`,
        );
      }
    }
    await this.ensureCollection(dim);
    // Last write of an id within the call wins, as in a sequence of single upserts.
    const byId = new Map(items.map((i) => [i.id, i]));
    const points = [...byId.values()].map((item) => ({
      id: pointId(tenant, item.id),
      vector: Array.from(item.vector),
      payload: toQdrantPayload(item.id, { ...item.payload, tenant }),
    }));
    for (let i = 0; i < points.length; i += this.batchSize) {
      await this.client.upsert(this.collection, { wait: true, points: points.slice(i, i + this.batchSize) });
    }
  }

  async search(tenant: string, vector: Float32Array, k: number, filter?: VectorFilter): Promise<VectorHit[]> {
    const limit = Math.floor(k);
    if (!(limit > 0) || !(await this.ready())) return [];
    if (vector.length !== this.dim) {
      throw new Error(
        `QdrantVectorStore: query vector has dimension ${vector.length}, the collection holds ${this.dim}`,
      );
    }
    const res = await this.client.query(this.collection, {
      query: Array.from(vector),
      limit,
      filter: buildFilter(tenant, filter),
      with_payload: true,
    });
    const hits: VectorHit[] = [];
    for (const p of res.points) {
      const parsed = fromQdrantPayload(p.payload);
      if (parsed && parsed.payload.tenant === tenant)
        hits.push({ id: parsed.id, score: p.score, payload: parsed.payload });
    }
    return hits;
  }

  /** Items in the order asked (first occurrence); unknown ids are skipped. */
  async get(tenant: string, ids: readonly string[]): Promise<VectorItem[]> {
    if (ids.length === 0 || !(await this.ready())) return [];
    const wanted = [...new Set(ids)];
    const points = await this.client.retrieve(this.collection, {
      ids: wanted.map((id) => pointId(tenant, id)),
      with_payload: true,
      with_vector: true,
    });
    const byId = new Map<string, VectorItem>();
    for (const p of points) {
      const parsed = fromQdrantPayload(p.payload);
      const vector = vectorOf(p.vector);
      if (parsed && vector && parsed.payload.tenant === tenant) {
        byId.set(parsed.id, { id: parsed.id, vector, payload: parsed.payload });
      }
    }
    return wanted.flatMap((id) => byId.get(id) ?? []);
  }

  async delete(tenant: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0 || !(await this.ready())) return;
    await this.client.delete(this.collection, {
      wait: true,
      points: [...new Set(ids)].map((id) => pointId(tenant, id)),
    });
  }

  async deleteTenant(tenant: string): Promise<void> {
    if (!(await this.ready())) return;
    await this.client.delete(this.collection, { wait: true, filter: { must: [tenantCondition(tenant)] } });
  }

  /**
   * Erasure of raw turns alone: every point of kind "turn" of the conversation (or the tenant), by
   * payload filter. Counted first: Qdrant's delete does not say how many points it removed.
   */
  async deleteRawTurns(tenant: string, conversation?: string): Promise<number> {
    if (!(await this.ready())) return 0;
    const filter = buildFilter(tenant, { kind: "turn", ...(conversation !== undefined ? { conversation } : {}) });
    const { count } = await this.client.count(this.collection, { filter, exact: true });
    if (count > 0) await this.client.delete(this.collection, { wait: true, filter });
    return count;
  }

  async count(tenant: string): Promise<number> {
    if (!(await this.ready())) return 0;
    const res = await this.client.count(this.collection, { filter: { must: [tenantCondition(tenant)] }, exact: true });
    return res.count;
  }

  /** Writes are sent with wait=true, so there is nothing to flush. */
  async flush(): Promise<void> {}

  async close(): Promise<void> {}
}
