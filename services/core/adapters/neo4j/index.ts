export { type Neo4jConnectionOptions, openDriver } from "./driver.ts";
export { GRAPH_LABELS, GRAPH_RELATIONSHIPS, GRAPH_SCHEMA, RECORD_TEXT_INDEX, TURN_TEXT_INDEX } from "./graph-schema.ts";
export { Neo4jGraphStore, type Neo4jGraphStoreOptions } from "./graph-store.ts";
export { Neo4jVectorStore, type Neo4jVectorStoreOptions } from "./vector-store.ts";
