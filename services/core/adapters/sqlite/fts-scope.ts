/**
 * Scopes of the FTS5 tables. Every record's and raw turn's full-text row indexes its terms under
 * its tenant's prefix (`ftsTermsText`), so a term's list holds one tenant's rows, and carries, in
 * an indexed `scope` column, one token naming its tenant and one naming its conversation: a
 * tenant-wide search matches `lex : (<tenant's terms>)`, a conversation's `scope : <token> AND
 * lex : (<tenant's terms>)`. Without them a MATCH found the rows of every tenant holding a term and
 * the tenant was checked row by row afterwards: the cost grew with the whole store, not with the
 * scope searched (issue 18).
 *
 * Tokens are hashes (letters and digits only, which the FTS5 tokenizer keeps whole, and no tenant
 * name in the index); a collision would only widen the candidates: the searches still check the
 * tenant and conversation of each item they return (its stored-terms or record row).
 */
import { createHash } from "node:crypto";
import { GenerationalMemo } from "../../generational-memo.ts";
import { anyTermQuery } from "../../lexical.ts";

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
 * The prefix of a tenant's indexed terms (migration 13): every term of a row's `lex` column is
 * written as `<prefix><term>`, so that FTS5 keeps one term list per tenant. Before, a common term's
 * list held every tenant's rows and a tenant-wide search read all of them to keep its own (the
 * intersection with the tenant's scope token): the tail of tenant-wide queries at 100K records
 * (issue 18). Fixed length (`p` and 12 hex digits), so a prefixed term never reads as another
 * prefix's; a collision of two tenants' prefixes only widens the candidates, which every search
 * checks against the tenant of the item's stored-terms or record row.
 */
const termPrefix = (tenant: string): string => token("p", tenant).slice(0, 13);

/** The indexed `lex` text of a tenant's row: its stored terms (space-separated), each prefixed. */
export const ftsTermsText = (tenant: string, lex: string): string => {
  const prefix = termPrefix(tenant);
  return lex
    .split(" ")
    .filter((t) => t.length > 0)
    .map((t) => prefix + t)
    .join(" ");
};

/**
 * An FTS5 query over the `lex` column matching any of the tenant's terms (quoted; a term holds
 * letters and digits only, as core/lexical.ts anyTermQuery requires), or, with `all`, every one of
 * them.
 */
export const tenantTermsQuery = (tenant: string, terms: readonly string[], all = false): string => {
  const prefix = termPrefix(tenant);
  const prefixed = terms.map((t) => prefix + t);
  return (all ? prefixed.map((t) => anyTermQuery([t])).join(" AND ") : anyTermQuery(prefixed)) ?? "";
};

/**
 * The MATCH of every full-text row of the tenant, or of one of its conversations (their scope
 * tokens): how rows are found by tenant or conversation in a table that keeps no content.
 */
export const scopeMatch = (tenant: string, conversation?: string): string =>
  `scope : "${conversation === undefined ? token("t", tenant) : token("c", tenant, conversation)}"`;

/**
 * The MATCH expression of a lexical search: any of the terms in the tenant (its terms' lists are its
 * own), or in one of its conversations (the conversation's scope token too).
 */
export const scopedMatch = (terms: readonly string[], tenant: string, conversation?: string): string =>
  conversation === undefined
    ? `lex : (${tenantTermsQuery(tenant, terms)})`
    : `${scopeMatch(tenant, conversation)} AND lex : (${tenantTermsQuery(tenant, terms)})`;

/**
 * The ORDER BY of a scoped search: FTS5's BM25 over the `lex` column only (weights per column in
 * declaration order: lex, scope; migration 13), i.e. the rank the search ordered by before the
 * scope column existed.
 */
export const lexRank = (table: "records_fts" | "turns_fts"): string => `bm25(${table}, 1.0, 0.0)`;
