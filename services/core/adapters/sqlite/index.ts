export { decodeCursor, encodeCursor, type RecordCursor } from "./cursor.ts";
export { type Migration, migrate, openSqlite, SQLITE_FILE, type SqliteDatabase, schemaVersion } from "./db.ts";
export { SqliteGraphStore, type SqliteGraphStoreOptions } from "./graph-store.ts";
export { SqliteStateStore, type SqliteStateStoreOptions } from "./state-store.ts";
