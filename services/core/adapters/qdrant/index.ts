export { buildFilter, entityKey as qdrantEntityKey, FIELD as QDRANT_FIELDS } from "./filter.ts";
export { pointId } from "./point-id.ts";
export { QdrantVectorStore, type QdrantVectorStoreOptions } from "./vector-store.ts";
