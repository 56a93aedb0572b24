/**
 * A query process's warm-up, before it takes requests. The first query of a process loaded on the
 * request path what every later query reuses: the o200k rank table (tokens.ts, ~0.6 s), the place
 * gazetteer's regions and cities (core/text/places.ts, ~0.2 s), the embedding models' first
 * forward passes (the second opinion's too, when on), the store statements and the JIT of the
 * whole query path. On a 100,000-record store the first query after a start took 1.35 s and the
 * second 0.15 s, against ~0.03 s warm (docs/benchmarks.md): the first user after every restart or
 * new replica paid for it.
 *
 * The warm-up loads the tables, then asks a few questions of a tenant that holds nothing (a fresh
 * name per warm-up, so no tenant's data is read) with the deterministic planner, whatever planner
 * is configured: a warm-up must not spend an LLM call. Queries only read; nothing is written.
 */
import { randomUUID } from "node:crypto";
import { cityIndex, regionsNamed } from "../core/text/places.ts";
import { countTokens } from "../core/tokens.ts";
import { type QueryDeps, type QuerySettings, runQuery } from "./query.ts";

/** Prefix of the empty tenant a warm-up asks (with a fresh id each time). */
export const QUERY_WARM_UP_PREFIX = "__warm-up-query-";

/**
 * Questions that take the planner's paths that load something: a date ("last May" → chrono), a
 * region (the gazetteer), a list question (the name-free form), a duration (both ends).
 */
const QUESTIONS = [
  "What did Ana do in Spain last May?",
  "What kinds of books has Ana read?",
  "How long did Ana work at the bakery before she moved to Toronto?",
];

export interface WarmUpResult {
  ms: number;
  queries: number;
}

/** Loads the query path's tables and runs it on an empty tenant; resolves when done. */
export const warmUpQueries = async (
  deps: Omit<QueryDeps, "planner">,
  settings: QuerySettings,
): Promise<WarmUpResult> => {
  const started = performance.now();
  countTokens("warm-up");
  regionsNamed("Spain");
  cityIndex();
  const tenant = `${QUERY_WARM_UP_PREFIX}${randomUUID()}`;
  // One at a time, as requests come: each one warms what the next reuses.
  for (const question of QUESTIONS)
    await runQuery(
      {
        graph: deps.graph,
        vectors: deps.vectors,
        embedder: deps.embedder,
        // The second model's first forward pass too (the question's second vector is computed even
        // when the empty tenant yields no candidates).
        ...(deps.secondOpinion ? { secondOpinion: deps.secondOpinion } : {}),
      },
      tenant,
      { question },
      settings,
    );
  return { ms: performance.now() - started, queries: QUESTIONS.length };
};
