import type { Migration } from "../sqlite-db.ts";

/**
 * The SQLite side of the HNSW vector store: the source of truth the per-tenant index files are
 * rebuilt from. `version` counts a tenant's writes; `flushed_version` is the version its index file
 * was written at, so a file older than the table is detected and rebuilt.
 */
export const VECTOR_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "vectors",
    sql: `
CREATE TABLE vectors (
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  label INTEGER NOT NULL,
  kind TEXT NOT NULL,
  conversation TEXT NOT NULL,
  payload TEXT NOT NULL,
  vector BLOB NOT NULL,
  PRIMARY KEY (tenant, id),
  UNIQUE (tenant, label)
);
CREATE TABLE vector_tenants (
  tenant TEXT PRIMARY KEY,
  next_label INTEGER NOT NULL,
  version INTEGER NOT NULL,
  flushed_version INTEGER NOT NULL
);
CREATE TABLE vector_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
`,
  },
  {
    // The second-opinion model's vector of the item's text (VectorItem.second): read by id, never
    // indexed; null where none was written. In the row, so every delete takes it too.
    version: 2,
    name: "vectors-second-opinion",
    sql: "ALTER TABLE vectors ADD COLUMN second BLOB;",
  },
];
