export { compileFilter, entityKey, type PayloadPredicate } from "./filter.ts";
export { HnswVectorStore, type HnswVectorStoreOptions } from "./vector-store.ts";
