/** Qdrant payload filters for VectorStore calls (pure). Same semantics as the HNSW adapter's compileFilter. */
import type { Schemas } from "@qdrant/js-client-rest";
import type { VectorFilter } from "../../ports.ts";

/** Case-insensitive key for entity names (Qdrant keyword matches are exact). */
export const entityKey = (s: string): string => s.normalize("NFKC").toLowerCase().replace(/\s+/g, " ").trim();

/** Payload keys written by the Qdrant adapter. */
export const FIELD = {
  tenant: "tenant",
  id: "memory_id",
  conversation: "conversation",
  kind: "kind",
  type: "type",
  time: "time",
  entities: "entities",
  entityKeys: "entity_keys",
} as const;

export const tenantCondition = (tenant: string): Schemas["FieldCondition"] => ({
  key: FIELD.tenant,
  match: { value: tenant },
});

/** Every search is scoped by the tenant condition first; the other fields narrow it. */
export const buildFilter = (tenant: string, filter?: VectorFilter): Schemas["Filter"] => {
  const must: Schemas["Condition"][] = [tenantCondition(tenant)];
  if (filter?.conversation !== undefined) must.push({ key: FIELD.conversation, match: { value: filter.conversation } });
  if (filter?.kind !== undefined) must.push({ key: FIELD.kind, match: { value: filter.kind } });
  if (filter?.types && filter.types.length > 0) must.push({ key: FIELD.type, match: { any: [...filter.types] } });
  if (filter?.timeFrom !== undefined || filter?.timeTo !== undefined) {
    const range: Schemas["Range"] = {};
    if (filter.timeFrom !== undefined) range.gte = filter.timeFrom;
    if (filter.timeTo !== undefined) range.lte = filter.timeTo;
    must.push({ key: FIELD.time, range });
  }
  if (filter?.entities && filter.entities.length > 0) {
    must.push({ key: FIELD.entityKeys, match: { any: [...new Set(filter.entities.map(entityKey))] } });
  }
  return { must };
};
