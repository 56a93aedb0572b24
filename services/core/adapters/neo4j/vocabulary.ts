/**
 * The lexical vocabulary of the Neo4j store (LexicalVocabulary in core/ports.ts), for the
 * misspelling tolerance of core/text/fuzzy-terms.ts. Lucene has no cheap term list to read here,
 * but it has fuzzy term queries: `term~n` finds the items holding a term within n edits (at most
 * 2), and a prefix query `abcd*` the stems that may match its start (a misspelt ending,
 * neighboursWithin). The items found in scope are read (at most NEIGHBOUR_ITEMS per index, best Lucene score
 * first, which favours the closer terms), and their terms within the distance are the neighbours:
 * found in scope, so present there.
 */
import { anyTermQuery } from "../../lexical.ts";
import { type Neighbour, nearestPresent, neighboursWithin } from "../../text/fuzzy-terms.ts";
import { int } from "./driver.ts";
import { RECORD_TEXT_INDEX, TURN_TEXT_INDEX } from "./graph-schema.ts";

/** Items read per full-text index for one fuzzy term query. */
export const NEIGHBOUR_ITEMS = 200;

type Query = <T>(cypher: string, params: Record<string, unknown>) => Promise<T[]>;

const INDEXES = [RECORD_TEXT_INDEX, TURN_TEXT_INDEX] as const;

const scopeFilter = (conversation: string | undefined): string =>
  `node.tenant = $tenant${conversation === undefined ? "" : " AND node.conversation = $conversation"}`;

/**
 * Of these terms, those an item of the scope holds: one statement for them all (each term stops at
 * its first item in either index). It ran as one query per term and index, the second after the
 * first, which put up to two round trips per term before the query's routes could start.
 */
export const termsPresent = async (
  query: Query,
  tenant: string,
  terms: readonly string[],
  conversation?: string,
): Promise<string[]> => {
  const asked = [...new Set(terms)].filter((t) => /^[\p{L}\p{N}]+$/u.test(t));
  if (asked.length === 0) return [];
  const found = await query<{ term: string }>(
    `UNWIND $asked AS a
     CALL (a) {
       CALL db.index.fulltext.queryNodes($recordIndex, a.match) YIELD node
       WHERE ${scopeFilter(conversation)} RETURN 1 AS one LIMIT 1
       UNION
       CALL db.index.fulltext.queryNodes($turnIndex, a.match) YIELD node
       WHERE ${scopeFilter(conversation)} RETURN 1 AS one LIMIT 1
     }
     RETURN DISTINCT a.term AS term`,
    {
      asked: asked.map((term) => ({ term, match: anyTermQuery([term]) })),
      recordIndex: RECORD_TEXT_INDEX,
      turnIndex: TURN_TEXT_INDEX,
      tenant,
      conversation: conversation ?? null,
    },
  );
  const present = new Set(found.map((r) => r.term));
  return asked.filter((t) => present.has(t));
};

/** The scope's terms within `maxDistance` (1 or 2) edits of a letters-only term, closest first. */
export const termNeighbours = async (
  query: Query,
  tenant: string,
  term: string,
  maxDistance: number,
  conversation?: string,
): Promise<Neighbour[]> => {
  const edits = Math.min(2, Math.floor(maxDistance));
  if (edits < 1 || !/^\p{L}+$/u.test(term)) return [];
  const words = new Set<string>();
  const lists = await Promise.all(
    INDEXES.map((index) =>
      query<{ lex: string | null }>(
        `CALL db.index.fulltext.queryNodes($index, $match) YIELD node, score
         WHERE ${scopeFilter(conversation)} RETURN node.lex AS lex ORDER BY score DESC LIMIT $limit`,
        {
          index,
          // The fuzzy term, or a term starting as it does (a stem matching its start: neighboursWithin).
          match: `${term}~${edits} OR ${term.slice(0, 4)}*`,
          tenant,
          conversation: conversation ?? null,
          limit: int(NEIGHBOUR_ITEMS),
        },
      ),
    ),
  );
  for (const rows of lists)
    for (const r of rows) for (const w of (r.lex ?? "").split(" ")) if (w.length > 0) words.add(w);
  // Every word read is in the scope: the items were filtered to it.
  return nearestPresent(neighboursWithin(term, words, edits), async (terms) => terms);
};
