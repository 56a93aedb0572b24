export { CursorCodec, type RecordCursor, UNCONFIGURED_CURSOR_SECRET } from "./cursor.ts";
export { type Migration, migrate, openSqlite, SQLITE_FILE, type SqliteDatabase, schemaVersion } from "./db.ts";
export { SqliteGraphStore, type SqliteGraphStoreOptions } from "./graph-store.ts";
export { SqliteStateStore, type SqliteStateStoreOptions } from "./state-store.ts";
