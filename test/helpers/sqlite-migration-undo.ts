import { ftsScopeText } from "../../services/core/adapters/sqlite/fts-scope.ts";
import type { SqliteDatabase } from "../../services/core/adapters/sqlite-db.ts";

/**
 * SQL that rolls a SQLite graph store back past one migration, so a test can build an older store
 * and check that migrating it reads the same (test/unit/sqlite-graph-store.test.ts,
 * test/unit/keys-top-k.test.ts). Each also needs its `migrations` row deleted.
 */
/** Rolls back migration 7 (conversation on the entity and topic rows, their indexes): for the older-store tests. */
export const UNDO_MIGRATION_7 = `
  DROP INDEX record_entities_conv;
  DROP INDEX record_entities_names;
  DROP INDEX record_topics_conv;
  DROP INDEX record_topics_names;
  ALTER TABLE record_entities DROP COLUMN conversation;
  ALTER TABLE record_topics DROP COLUMN conversation;
`;

/** Rolls back migration 10 (said_at on the entity and topic rows, in the key indexes): for the older-store tests. */
export const UNDO_MIGRATION_10 = `
  DROP INDEX record_entities_entity;
  DROP INDEX record_topics_topic;
  ALTER TABLE record_entities DROP COLUMN said_at;
  ALTER TABLE record_topics DROP COLUMN said_at;
  CREATE INDEX record_entities_entity ON record_entities (tenant, entity);
  CREATE INDEX record_topics_topic ON record_topics (tenant, topic);
`;

/** Rolls back migration 9 (the kept counts' tables): for the older-store tests. */
export const UNDO_MIGRATION_9 = `
  DROP TABLE lexical_terms;
  DROP TABLE lexical_scopes;
  DROP TABLE key_counts;
`;

/** Rolls back migration 11 (the stored-terms tables beside the FTS5 rows): for the older-store tests. */
export const UNDO_MIGRATION_11 = `
  DROP TABLE records_terms;
  DROP TABLE turns_terms;
`;

/** Rolls back migration 12 (the covering index of a record's validity by id): for the older-store tests. */
export const UNDO_MIGRATION_12 = `
  DROP INDEX records_validity;
`;

/**
 * Rolls back migration 13 (the full-text terms under their tenant's prefix, FTS5 tables without
 * content): FTS5 tables of the version-12 form (content kept) again, filled from the stored terms
 * as they are. Runs before UNDO_MIGRATION_11, which drops the stored terms.
 */
export const undoMigration13 = (db: SqliteDatabase): void => {
  for (const kind of ["records", "turns"] as const) {
    db.exec(`DROP TABLE ${kind}_fts;
      CREATE VIRTUAL TABLE ${kind}_fts USING fts5(
        lex, tenant UNINDEXED, conversation UNINDEXED, scope, tokenize = 'unicode61 remove_diacritics 0'
      );
      INSERT INTO ${kind}_fts (${kind}_fts, rank) VALUES ('secure-delete', 1);`);
    const insert = db.prepare(
      `INSERT INTO ${kind}_fts (rowid, lex, tenant, conversation, scope) VALUES (?, ?, ?, ?, ?)`,
    );
    const rows = db
      .prepare<[], { seq: number; tenant: string; conversation: string; lex: string }>(
        `SELECT seq, tenant, conversation, lex FROM ${kind}_terms ORDER BY seq`,
      )
      .all();
    for (const r of rows) insert.run(r.seq, r.lex, r.tenant, r.conversation, ftsScopeText(r.tenant, r.conversation));
  }
};
