export { HnswVectorStore, type HnswVectorStoreOptions } from "./vector-store.ts";
