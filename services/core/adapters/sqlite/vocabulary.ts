/**
 * The lexical vocabulary of the SQLite store (LexicalVocabulary in core/ports.ts), for the
 * misspelling tolerance of core/text/fuzzy-terms.ts.
 *
 * Candidates come from the tenant's own term list, the kept document frequencies of
 * scope-counts.ts (`lexical_terms`, keyed by tenant, kind, scope and term: current records' and
 * raw turns' terms), read as a range of terms starting with a prefix, at most
 * VOCABULARY_SCAN_LIMIT rows a bucket and kind. A candidate counts once a scoped MATCH finds it in
 * the tenant or conversation (a conversation's terms are not kept apart: the tenant's are the
 * candidates), so the caller never sees a term of another scope.
 *
 * Issue 18: the candidates were read from FTS5's term list through `fts5vocab`, which is every
 * tenant's (so a bucket's 5,000 rows could end before this tenant's terms) and counts each term's
 * documents as it lists it: it read the doclists of every term in a bucket, ~16 ms a read and up to
 * 110 ms a query at ~1M records.
 */
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
import { type LexicalKind, readLexicalTermsInRange } from "./scope-counts.ts";

const TABLES = ["records", "turns"] as const;
const KINDS: readonly LexicalKind[] = ["record", "turn"];

export class SqliteVocabulary {
  constructor(private readonly sql: SqlRunner) {}

  /** Of these terms, those a record or raw turn of the scope holds: one scoped lookup per term and table, stopping at the first row. */
  present(tenant: string, terms: readonly string[], conversation?: string): string[] {
    const found: string[] = [];
    for (const term of new Set(terms)) {
      if (!/^[\p{L}\p{N}]+$/u.test(term)) continue;
      const match = scopedMatch([term], tenant, conversation);
      const hit = TABLES.some(
        (table) =>
          this.sql.all<{ one: number }>(
            `SELECT 1 AS one FROM ${table}_fts f JOIN ${table}_terms s ON s.seq = f.rowid
             WHERE ${table}_fts MATCH ? AND s.tenant = ? LIMIT 1`,
            match,
            tenant,
          ).length > 0,
      );
      if (hit) found.push(term);
    }
    return found;
  }

  /** Candidates from the term's prefix buckets of the tenant's kept terms (records' and raw turns'), then the closest present in the scope. */
  async neighbours(tenant: string, term: string, maxDistance: number, conversation?: string): Promise<Neighbour[]> {
    if (maxDistance < 1) return [];
    const length = [...term].length;
    const lengths = {
      min: Math.max(1, length - maxDistance - MAX_ENDING),
      max: Math.min(FUZZY_MAX_LENGTH + maxDistance, length + maxDistance),
    };
    const candidates = new Set<string>();
    for (const prefix of candidatePrefixes(term))
      for (const kind of KINDS)
        for (const found of readLexicalTermsInRange(
          this.sql,
          tenant,
          kind,
          { from: prefix, to: prefixEnd(prefix), limit: VOCABULARY_SCAN_LIMIT },
          lengths,
        ))
          candidates.add(found);
    return nearestPresent(neighboursWithin(term, candidates, maxDistance), async (terms) =>
      this.present(tenant, terms, conversation),
    );
  }
}
