export { SqliteGraphStore, type SqliteGraphStoreOptions } from "./graph-store.ts";
export { SqliteStateStore, type SqliteStateStoreOptions } from "./state-store.ts";
