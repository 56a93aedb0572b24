/**
 * The lexical vocabulary of the SQLite store (LexicalVocabulary in core/ports.ts), for the
 * misspelling tolerance of core/text/fuzzy-terms.ts.
 *
 * Candidates come from FTS5's own term list: an `fts5vocab` table over each full-text table
 * (created in the connection's temp schema, so no migration and nothing on disk), read as a
 * range of terms starting with a prefix, at most VOCABULARY_SCAN_LIMIT rows a bucket. That list is
 * the whole store's (every tenant's terms, and the scope tokens of fts-scope.ts), so it only
 * proposes: a candidate counts once a scoped MATCH finds it in the tenant or conversation, and the
 * caller never sees a term of another scope.
 */
import { anyTermQuery } from "../../lexical.ts";
import {
  candidatePrefixes,
  FUZZY_MAX_LENGTH,
  MAX_ENDING,
  type Neighbour,
  nearestPresent,
  neighboursWithin,
  prefixEnd,
  VOCABULARY_SCAN_LIMIT,
} from "../../text/fuzzy-terms.ts";
import { scopedMatch } from "./fts-scope.ts";
import type { SqlRunner } from "./graph-transaction.ts";

const TABLES = ["records_fts", "turns_fts"] as const;

export class SqliteVocabulary {
  private ready = false;

  /** `exec` runs DDL on the store's handle (the temp vocabulary tables). */
  constructor(
    private readonly sql: SqlRunner,
    private readonly exec: (ddl: string) => void,
  ) {}

  /** The fts5vocab tables (one row per term and column) exist from the first read on, per connection. */
  private ensure(): void {
    if (this.ready) return;
    for (const table of TABLES)
      this.exec(`CREATE VIRTUAL TABLE IF NOT EXISTS temp.${table}_vocab USING fts5vocab(main, ${table}, col)`);
    this.ready = true;
  }

  /** Of these terms, those a record or raw turn of the scope holds: one scoped lookup per term and table, stopping at the first row. */
  present(tenant: string, terms: readonly string[], conversation?: string): string[] {
    const found: string[] = [];
    for (const term of new Set(terms)) {
      if (!/^[\p{L}\p{N}]+$/u.test(term)) continue;
      const match = scopedMatch(anyTermQuery([term]) as string, tenant, conversation);
      const hit = TABLES.some(
        (table) =>
          this.sql.all<{ one: number }>(`SELECT 1 AS one FROM ${table} WHERE ${table} MATCH ? LIMIT 1`, match).length >
          0,
      );
      if (hit) found.push(term);
    }
    return found;
  }

  /** Candidates from the term's prefix buckets of both tables, then the closest present in the scope. */
  async neighbours(tenant: string, term: string, maxDistance: number, conversation?: string): Promise<Neighbour[]> {
    if (maxDistance < 1) return [];
    this.ensure();
    const length = [...term].length;
    const candidates = new Set<string>();
    for (const prefix of candidatePrefixes(term))
      for (const table of TABLES)
        for (const row of this.sql.all<{ term: string }>(
          `SELECT term FROM (SELECT term, col FROM temp.${table}_vocab WHERE term >= ? AND term < ? LIMIT ?)
           WHERE col = 'lex' AND length(term) BETWEEN ? AND ?`,
          prefix,
          prefixEnd(prefix),
          VOCABULARY_SCAN_LIMIT,
          Math.max(1, length - maxDistance - MAX_ENDING),
          Math.min(FUZZY_MAX_LENGTH + maxDistance, length + maxDistance),
        ))
          candidates.add(row.term);
    return nearestPresent(neighboursWithin(term, candidates, maxDistance), async (terms) =>
      this.present(tenant, terms, conversation),
    );
  }
}
