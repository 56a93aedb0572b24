/**
 * Scope tokens of the FTS5 tables: every record's and raw turn's full-text row carries, in an
 * indexed `scope` column, one token naming its tenant and one naming its conversation, so that a
 * lexical search matches `scope : <token> AND lex : (<terms>)` and FTS5 intersects the term lists
 * with that one tenant's or conversation's list. Without them a MATCH found the rows of every
 * tenant holding a term and the tenant was checked row by row afterwards: the cost grew with the
 * whole store, not with the scope searched (issue 18).
 *
 * Tokens are hashes (letters and digits only, which the FTS5 tokenizer keeps whole, and no tenant
 * name in the index); a collision would only widen the candidates: the searches still check the
 * tenant and conversation columns of the rows they return.
 */
import { createHash } from "node:crypto";
import { GenerationalMemo } from "../../generational-memo.ts";

/**
 * Tokens by their hashed text: a tenant-wide lexical search matches its tenant's token once per
 * term it reads (rankBm25TopK), and each sha256 was a new hash object; a few thousand tenants'
 * and conversations' tokens stay in memory.
 */
const tokens = new GenerationalMemo<string, string>(4096);

const token = (prefix: string, ...parts: string[]): string => {
  const text = `${prefix}\u0000${parts.join("\u0000")}`;
  let hashed = tokens.get(text);
  if (hashed === undefined) {
    hashed = `${prefix}${createHash("sha256").update(parts.join("\u0000")).digest("hex").slice(0, 20)}`;
    tokens.set(text, hashed);
  }
  return hashed;
};

/** The scope column's text for a row of this tenant and conversation. */
export const ftsScopeText = (tenant: string, conversation: string): string =>
  `${token("t", tenant)} ${token("c", tenant, conversation)}`;

/**
 * The MATCH expression of a lexical search: the terms (an FTS5 query over the `lex` column, as
 * core/lexical.ts anyTermQuery writes it) within the tenant, or within one of its conversations.
 */
export const scopedMatch = (terms: string, tenant: string, conversation?: string): string =>
  `scope : "${conversation === undefined ? token("t", tenant) : token("c", tenant, conversation)}" AND lex : (${terms})`;

/**
 * The ORDER BY of a scoped search: FTS5's BM25 over the `lex` column only (weights per column in
 * declaration order: lex, tenant, conversation, scope), i.e. the rank the search ordered by before
 * the scope column existed.
 */
export const lexRank = (table: "records_fts" | "turns_fts"): string => `bm25(${table}, 1.0, 0.0, 0.0, 0.0)`;
