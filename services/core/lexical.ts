/**
 * The lexical route's one definition of words and of relevance, shared by every graph store so
 * that the embedded (SQLite) and the distributed (Neo4j) stores rank identically.
 *
 * Terms: NFKC, lower case, runs of letters and digits; very common stop words dropped; Porter
 * stems (`stemmer`). A store keeps each record's and raw turn's terms as one space-separated
 * string (`LexicalText.lex`) plus their count, indexes that string with a tokenizer that only
 * splits on spaces (FTS5 unicode61 without diacritic folding; Lucene's whitespace analyzer), and
 * uses the index for one thing only: finding every item that contains any query term. Relevance is
 * then BM25 computed here from the stored terms and the scope's statistics (items, total length),
 * so it does not depend on the store's own scoring (FTS5's bm25 and Lucene's differ in IDF,
 * length normalisation and float width, which is what made the two runtimes' contexts differ).
 *
 * Two ways to rank. `searchLexical` counts document frequencies over the hits: exact while the
 * hits in scope number at most LEXICAL_POOL_LIMIT (they are then all the items containing each
 * term); above it the pool is the index's best LEXICAL_POOL_LIMIT hits and the scores are
 * approximate (store-specific). Its cost grows with every item holding any query term; a store
 * that reads an item's terms apart from its id and time hands over the hits by key and identifies
 * only the few that may enter the top k (`rankBm25Posted`: same scores and order).
 * `searchLexicalTopK` takes the document frequencies and scope counts a store keeps with its writes
 * and ranks by MaxScore: the same scores and top k as the exhaustive ranking over every item in
 * scope, reading the rare terms' items and a common term's only while it could still change the
 * top k (issue 18). Pure: no I/O (the store is asked through callbacks).
 */
import { stemmer } from "stemmer";

const STOP_WORDS = new Set(
  (
    "a about after all also am an and any are as at be been before being but by can could did do does doing for " +
    "from had has have having he her hers him his how i if in into is it its me my of on or our she so than that " +
    "the their them then there these they this those to too us very was we were what when where which who whom " +
    "why will with would you your"
  ).split(" "),
);

/** Most distinct terms a query keeps (long texts would otherwise make very wide OR queries). */
export const MAX_QUERY_TERMS = 32;

/** Most hits a lexical search scores; below it the ranking is exact and store-independent. */
export const LEXICAL_POOL_LIMIT = 20_000;

/** BM25 parameters (Robertson's defaults, as Lucene and FTS5 use). */
export const BM25 = { k1: 1.2, b: 0.75 } as const;

/** Lower-cased word tokens (letters and digits of any script), in order, with duplicates. */
export const wordTokens = (text: string): string[] =>
  text
    .normalize("NFKC")
    .toLowerCase()
    .match(/[\p{L}\p{N}]+/gu) ?? [];

export const isStopWord = (token: string): boolean => STOP_WORDS.has(token);

/** Porter stem of a lower-case token; tokens with non-ASCII letters or digits only are kept whole. */
const stem = (token: string): string => (/^[a-z]+$/.test(token) ? stemmer(token) : token);

/** The searchable terms of a text, in order, with duplicates. */
export const lexicalTerms = (text: string): string[] =>
  wordTokens(text)
    .filter((t) => !isStopWord(t))
    .map(stem);

/** What a store keeps for an item: its terms joined by single spaces, and how many there are. */
export interface LexicalText {
  lex: string;
  length: number;
}

export const lexicalText = (text: string): LexicalText => {
  const terms = lexicalTerms(text);
  return { lex: terms.join(" "), length: terms.length };
};

/** The distinct terms of a query, in first-seen order, at most `max`. */
export const queryTerms = (text: string, max = MAX_QUERY_TERMS): string[] => {
  const seen = new Set<string>();
  for (const term of lexicalTerms(text)) {
    if (seen.size >= max) break;
    seen.add(term);
  }
  return [...seen];
};

/**
 * The index query that finds every item containing any of the terms: each term quoted, joined with
 * OR. Valid FTS5 MATCH and Lucene query syntax alike; terms hold only letters and digits, so user
 * text cannot escape the quotes, and a quoted term is never read as a keyword (AND, NOT, NEAR).
 */
export const anyTermQuery = (terms: readonly string[]): string | undefined => {
  for (const t of terms)
    if (!/^[\p{L}\p{N}]+$/u.test(t)) throw new Error(`anyTermQuery: not a term: ${JSON.stringify(t)}`);
  return terms.length === 0 ? undefined : terms.map((t) => `"${t}"`).join(" OR ");
};

/** An index hit: the item's stored terms and its time (ties go to the newer item). */
export interface LexicalHit {
  id: string;
  lex: string;
  /** Epoch milliseconds. */
  time: number;
}

/** The scope searched (tenant, conversation, current records only): items and their total length. */
export interface LexicalScope {
  items: number;
  totalLength: number;
}

export interface ScoredHit {
  id: string;
  score: number;
}

const SPACE = 32;

/**
 * Counts the query's terms (by position: `tf[at + j]` for `terms[j]`; 0 for a term not `counted`)
 * in an item's stored terms (single-space separated), read in place, and returns its length in
 * terms: the occurrences of each term as a whole word, found with indexOf, and the length as the
 * spaces plus one (what split(" ") gives). A search scores every item it reads: splitting each
 * item's terms into an array, then a Map of counts per item, was most of that work; the counts go
 * into one typed array the caller reuses.
 */
const countTerms = (
  lex: string,
  terms: readonly string[],
  counted: readonly boolean[] | undefined,
  tf: Int32Array,
  at: number,
): number => {
  if (lex.length === 0) {
    tf.fill(0, at, at + terms.length);
    return 0;
  }
  let length = 1;
  for (let p = lex.indexOf(" "); p !== -1; p = lex.indexOf(" ", p + 1)) length++;
  for (let j = 0; j < terms.length; j++) {
    const term = terms[j] as string;
    let n = 0;
    if (term.length > 0 && (counted === undefined || counted[j] === true)) {
      for (let p = lex.indexOf(term); p !== -1; p = lex.indexOf(term, p + 1)) {
        const end = p + term.length;
        if ((p === 0 || lex.charCodeAt(p - 1) === SPACE) && (end === lex.length || lex.charCodeAt(end) === SPACE)) n++;
      }
    }
    tf[at + j] = n;
  }
  return length;
};

/** BM25's IDF: ln(1 + (N - df + 0.5) / (df + 0.5)), never negative. */
const idfOf = (n: number, df: number): number => Math.log(1 + (n - df + 0.5) / (df + 0.5));

/**
 * The BM25 score of one item under fixed statistics, from its counts (countTerms) and the terms'
 * IDFs by position. The exhaustive and the top-k ranking both score with this one function (terms
 * summed in query order), so equal statistics give bit-equal scores whichever ranked.
 */
const bm25Score = (idf: Float64Array, avgLength: number, tf: Int32Array, at: number, length: number): number => {
  let score = 0;
  const norm = BM25.k1 * (1 - BM25.b + (BM25.b * length) / avgLength);
  for (let j = 0; j < idf.length; j++) {
    const f = tf[at + j] as number;
    if (f) score += ((idf[j] as number) * (f * (BM25.k1 + 1))) / (f + norm);
  }
  return score;
};

interface Ranked {
  id: string;
  time: number;
  score: number;
}

/** Higher score first, then the newer item, then the smaller id. */
const byRank = (a: Ranked, b: Ranked): number =>
  b.score - a.score || b.time - a.time || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * The exhaustive BM25 score of each item (by key) that scores above 0: document frequencies counted
 * over the items (exact when they are every item in scope holding a query term), the scope's counts
 * as given. `rankBm25` and `rankBm25Posted` both score with it, so equal items give bit-equal scores.
 */
const scoreEach = <K>(
  terms: readonly string[],
  items: ReadonlyMap<K, string>,
  scope: LexicalScope,
): { key: K; score: number }[] => {
  const width = terms.length;
  const keys = [...items.keys()];
  const tf = new Int32Array(keys.length * width);
  const lengths = new Float64Array(keys.length);
  let d = 0;
  for (const lex of items.values()) {
    lengths[d] = countTerms(lex, terms, undefined, tf, d * width);
    d++;
  }
  const df = new Float64Array(width);
  for (let i = 0; i < keys.length; i++)
    for (let j = 0; j < width; j++) if ((tf[i * width + j] as number) > 0) df[j] = (df[j] as number) + 1;
  // The scope's counts come from another query than the hits; neither may undercut the other.
  const n = Math.max(scope.items, keys.length);
  const avgLength = Math.max(scope.totalLength / Math.max(n, 1), 1e-9);
  const idf = Float64Array.from(df, (x) => idfOf(n, x));
  const out: { key: K; score: number }[] = [];
  keys.forEach((key, i) => {
    const score = bm25Score(idf, avgLength, tf, i * width, lengths[i] as number);
    if (score > 0) out.push({ key, score });
  });
  return out;
};

/**
 * BM25 of each hit for the query terms (IDF ln(1 + (N - df + 0.5) / (df + 0.5)), never negative),
 * the best `k`, ties by newer time then id. Terms are summed in query order so that equal inputs
 * give bit-equal scores in every store. Document frequencies are counted over the hits: exact when
 * the hits are every item in scope holding a query term.
 */
export const rankBm25 = (
  terms: readonly string[],
  hits: readonly LexicalHit[],
  scope: LexicalScope,
  k: number,
): ScoredHit[] => {
  const limit = Math.floor(k);
  if (terms.length === 0 || hits.length === 0 || !(limit > 0)) return [];
  const unique = new Map<string, LexicalHit>();
  for (const h of hits) if (!unique.has(h.id)) unique.set(h.id, h);
  const scored = scoreEach(terms, new Map([...unique].map(([id, h]) => [id, h.lex])), scope).map(({ key, score }) => ({
    id: key,
    time: (unique.get(key) as LexicalHit).time,
    score,
  }));
  scored.sort(byRank);
  return scored.slice(0, limit).map(({ id, score }) => ({ id, score }));
};

/** What a store keeps of one term in a scope. */
export interface TermStatistics {
  /** Items in scope holding the term. */
  df: number;
  /**
   * At least the largest count of the term in one item of the scope, and at most the smallest
   * ratio of an item's length to the term's count in it: they bound the term's contribution to a
   * score. Stale values that are only looser (kept after deletes) are allowed; null: not known (the
   * bound is then IDF·(k1 + 1), which no contribution reaches).
   */
  maxTf: number | null;
  minLengthPerTf: number | null;
}

/**
 * What a store keeps for the top-k ranking: the scope's counts and its terms' statistics,
 * maintained with the writes, so that no query has to count them over its hits.
 */
export interface LexicalStatistics {
  scope: LexicalScope;
  /** By term; a term absent from the map occurs in no item of the scope. */
  terms: ReadonlyMap<string, TermStatistics>;
}

/** An item of a term's postings as the top-k ranking first reads it: the store's key and its stored terms. */
export interface PostedItem {
  key: number;
  lex: string;
}

/** An item's id and time (ties go to the newer item), read only for items that may enter the top k. */
export interface ItemIdentity {
  id: string;
  /** Epoch milliseconds. */
  time: number;
}

/** A store's side of the top-k ranking. */
export interface LexicalPostings {
  statistics(terms: readonly string[]): Promise<LexicalStatistics>;
  /**
   * Every item holding any of `terms` and none of `without` (whose items were read already), with
   * its terms: every item of the scope, and it may also hold items the scope excludes (another
   * tenant's, a superseded record), which `identify` then leaves out. With `along` (asked with one
   * term only), only the items that also hold every term of at least one of its sets are needed (a
   * store may return more: they are scored like the rest and cannot enter the top k).
   */
  postings(
    terms: readonly string[],
    without: readonly string[],
    along?: readonly (readonly string[])[],
  ): Promise<readonly PostedItem[]>;
  /**
   * The ids and times of these items, by key; an item out of the scope is left out. Asked only
   * for the few items that score high enough to enter the top k: the items' ids and times are a
   * second read in a store (the full-text index holds the terms, the item's table the rest), and
   * reading them for every posted item was most of a tenant-wide search's cost.
   */
  identify(keys: readonly number[]): Promise<ReadonlyMap<number, ItemIdentity>>;
}

/** Items identified per store read once the top k is full (until then, as many as it lacks). */
const IDENTIFY_BATCH = 16;

/** Relative slack on the score bounds, far above the rounding of a sum of ≤ 32 terms. */
const BOUND_SLACK = 1e-9;

/** An item read and scored whose id and time are not read yet. */
interface ScoredKey {
  key: number;
  score: number;
}

/**
 * Offers scored items to `top` (the best `limit` so far, in rank order), best first, identified in
 * small batches: once an item scores below the k-th best, so does every item after it, and the k-th
 * best only rises, so none of them could enter the top k and they are never identified. Which of
 * the items enter does not depend on the order they are offered in (the top k of a set under one
 * total order), so the result is that of offering every item. An item `identify` leaves out (out
 * of the scope) is skipped.
 */
const offerBestFirst = async (
  scored: ScoredKey[],
  top: Ranked[],
  limit: number,
  identify: LexicalPostings["identify"],
): Promise<void> => {
  scored.sort((a, b) => b.score - a.score);
  let next = 0;
  while (next < scored.length) {
    const floor = top.length >= limit ? (top[limit - 1] as Ranked).score : undefined;
    if (floor !== undefined && (scored[next] as ScoredKey).score < floor) break;
    const batch = scored.slice(next, next + Math.max(IDENTIFY_BATCH, limit - top.length));
    next += batch.length;
    const known = await identify(batch.map((b) => b.key));
    for (const { key, score } of batch) {
      const who = known.get(key);
      if (!who) continue;
      const item = { id: who.id, time: who.time, score };
      if (top.length >= limit && byRank(item, top[limit - 1] as Ranked) >= 0) continue;
      // Insert in rank order (k is small: a route's depth).
      let at = top.length;
      while (at > 0 && byRank(item, top[at - 1] as Ranked) < 0) at--;
      top.splice(at, 0, item);
      if (top.length > limit) top.pop();
    }
  }
};

/**
 * The same top k as `rankBm25` over these items (same scores, same order, ties included) when
 * `posted` are the hits (every item in scope holding a query term) by key: every item is scored
 * (the document frequencies are counted over them all), and only the few that may enter the top k
 * are identified (`offerBestFirst`). For a store whose full-text rows hold an item's terms and its
 * scope but not its id and time: reading those for every hit was most of an exhaustive search's
 * cost. Duplicate keys count once.
 */
export const rankBm25Posted = async (
  terms: readonly string[],
  posted: readonly PostedItem[],
  scope: LexicalScope,
  k: number,
  identify: LexicalPostings["identify"],
): Promise<ScoredHit[]> => {
  const limit = Math.floor(k);
  if (terms.length === 0 || posted.length === 0 || !(limit > 0)) return [];
  const unique = new Map<number, string>();
  for (const p of posted) if (!unique.has(p.key)) unique.set(p.key, p.lex);
  const top: Ranked[] = [];
  await offerBestFirst(scoreEach(terms, unique, scope), top, limit, identify);
  return top.map(({ id, score }) => ({ id, score }));
};

/** Most sets `companionSets` lists before it settles for "any later term" (a short MATCH). */
const MAX_COMPANION_SETS = 16;

/**
 * Which later terms an unread item holding `order[i]` must also hold to possibly enter the top k,
 * as the minimal sets of them whose bounds, added to the term's own, reach the k-th best score
 * (an item holding none of the earlier terms scores at most the sum of the bounds of the terms it
 * holds, and one below the k-th best cannot enter, not even by a tie): undefined when the term's
 * own bound reaches it (every item is needed). Within a common term's postings, most items hold it
 * alone or with another common term; a store intersects the lists (FTS5 `AND`) instead of reading
 * each such item's terms. Too many sets: any one later term, a looser but valid condition (the
 * term's own bound is below the k-th best).
 */
export const companionSets = (
  order: readonly string[],
  bound: readonly number[],
  i: number,
  kth: number,
): string[][] | undefined => {
  const reaches = (sum: number): boolean => !(kth > sum * (1 + BOUND_SLACK));
  const own = bound[i] as number;
  if (reaches(own)) return undefined;
  // Larger bounds first: a set is recorded when its last (smallest) term makes it reach, so no
  // term of it can be dropped.
  const later = order
    .slice(i + 1)
    .map((t, j) => ({ t, b: bound[i + 1 + j] as number }))
    .sort((a, b) => b.b - a.b);
  const rest: number[] = new Array(later.length + 1).fill(0);
  for (let j = later.length - 1; j >= 0; j--) rest[j] = (rest[j + 1] as number) + (later[j] as { b: number }).b;
  const sets: string[][] = [];
  let overflow = false;
  const walk = (from: number, sum: number, chosen: string[]): void => {
    for (let j = from; j < later.length && !overflow; j++) {
      if (!reaches(sum + (rest[j] as number))) return;
      const { t, b } = later[j] as { t: string; b: number };
      if (reaches(sum + b)) {
        if (sets.length >= MAX_COMPANION_SETS) overflow = true;
        else sets.push([...chosen, t]);
      } else walk(j + 1, sum + b, [...chosen, t]);
    }
  };
  walk(0, own, []);
  return overflow ? order.slice(i + 1).map((t) => [t]) : sets;
};

/**
 * The same top k as `rankBm25` over every item in scope holding a query term (same scores, same
 * order, ties included), reading fewer items: MaxScore over the terms' postings. Terms are taken
 * rarest first, each one's postings without the items of the terms before it; every item read is
 * scored exactly from its stored terms. An item not read yet holds none of the terms read so far,
 * so its score is at most the sum of the remaining terms' bounds (each term's contribution at its
 * largest count in an item and smallest length per count: TermStatistics); once the k-th best score
 * read is above that sum, no unread item can enter the top k (not even by a tie) and the common
 * terms' postings are never read. Before that, once the k-th best is above a term's own bound, only
 * its items that also hold enough of the later terms are read (`companionSets`): an item left
 * unread then scores below the k-th best, which only rises. Of the items read, only those scoring
 * at least the k-th best so far are identified (`LexicalPostings.identify`).
 */
export const rankBm25TopK = async (
  terms: readonly string[],
  k: number,
  store: LexicalPostings,
): Promise<ScoredHit[]> => {
  const limit = Math.floor(k);
  if (terms.length === 0 || !(limit > 0)) return [];
  const { scope, terms: kept } = await store.statistics(terms);
  const n = scope.items;
  const avgLength = Math.max(scope.totalLength / Math.max(n, 1), 1e-9);
  const df = (t: string): number => kept.get(t)?.df ?? 0;
  const idf = new Map(terms.map((t) => [t, idfOf(n, df(t))]));
  const idfByPosition = Float64Array.from(terms, (t) => idf.get(t) as number);
  // One item's counts at a time, by term position (countTerms).
  const tf = new Int32Array(terms.length);
  // Rarest first (query order among equals); a term in no item has no postings to read.
  const order = terms
    .map((t, i) => ({ t, i, df: df(t) }))
    .filter((x) => x.df > 0)
    .sort((a, b) => a.df - b.df || a.i - b.i)
    .map((x) => x.t);
  // A term's contribution idf·f·(k1 + 1) / (f + k1·(1 - b) + k1·b·length / avgLength) equals
  // idf·(k1 + 1) / (1 + k1·(1 - b) / f + (k1·b / avgLength)·(length / f)): at most its value at the
  // largest f and the smallest length / f.
  const bound = order.map((t) => {
    const { maxTf, minLengthPerTf } = kept.get(t) as TermStatistics;
    const rest =
      maxTf === null || minLengthPerTf === null
        ? 0
        : (BM25.k1 * (1 - BM25.b)) / maxTf + ((BM25.k1 * BM25.b) / avgLength) * minLengthPerTf;
    return ((idf.get(t) as number) * (BM25.k1 + 1)) / (1 + rest);
  });
  const remaining: number[] = new Array(order.length + 1).fill(0);
  for (let i = order.length - 1; i >= 0; i--) remaining[i] = (remaining[i + 1] as number) + (bound[i] as number);
  const top: Ranked[] = [];
  const seen = new Set<number>();
  for (let i = 0; i < order.length; ) {
    const kth = top.length >= limit ? (top[limit - 1] as Ranked).score : undefined;
    if (kth !== undefined && kth > (remaining[i] as number) * (1 + BOUND_SLACK)) break;
    const along = kth === undefined ? undefined : companionSets(order, bound, i, kth);
    // While the top k is not full every item read enters it, so after reading these terms it holds
    // at most its items so far plus their document frequencies; below k it is still not full and
    // the next term would be read whole: read with them, the same items in one store read.
    let end = i + 1;
    if (kth === undefined)
      for (let held = top.length + df(order[i] as string); held < limit && end < order.length; end++)
        held += df(order[end] as string);
    const scored: ScoredKey[] = [];
    // An item read now holds none of the terms read before (`without`), and an item of the scope
    // none of the terms in no item: only the terms from here on are counted (the same scores: a
    // term not counted and a term counted 0 times add nothing). An item outside the scope may hold
    // them; `identify` leaves it out whatever its score.
    const later = new Set(order.slice(i));
    const counted = terms.map((t) => later.has(t));
    for (const posted of await store.postings(order.slice(i, end), order.slice(0, i), along)) {
      if (seen.has(posted.key)) continue;
      seen.add(posted.key);
      const length = countTerms(posted.lex, terms, counted, tf, 0);
      const score = bm25Score(idfByPosition, avgLength, tf, 0, length);
      if (score > 0) scored.push({ key: posted.key, score });
    }
    await offerBestFirst(scored, top, limit, store.identify.bind(store));
    i = end;
  }
  return top.map(({ id, score }) => ({ id, score }));
};

/**
 * The top-k lexical search of a store that keeps document frequencies (`LexicalPostings`): the
 * query's terms, then `rankBm25TopK`. No terms or k < 1: no hits, and the store is not asked.
 */
export const searchLexicalTopK = async (text: string, k: number, store: LexicalPostings): Promise<ScoredHit[]> => {
  const terms = queryTerms(text);
  const limit = Math.floor(k);
  if (terms.length === 0 || !(limit > 0)) return [];
  return rankBm25TopK(terms, limit, store);
};

/**
 * What a store finds for an index query: the hits in scope (at most LEXICAL_POOL_LIMIT) and the
 * scope's counts; or, from a store that can read an item's terms apart from its id and time, every
 * hit in scope by key (at most LEXICAL_POOL_LIMIT) with the read of ids and times
 * (`rankBm25Posted`). The same ranking either way.
 */
export type LexicalFind =
  | { hits: readonly LexicalHit[]; scope: LexicalScope }
  | { posted: readonly PostedItem[]; scope: LexicalScope; identify: LexicalPostings["identify"] };

/**
 * The lexical search every graph store runs, so all of them rank alike: the query's terms, the
 * store's hits for `anyTermQuery(terms)` (the store is given the terms too, to write its own query)
 * and its scope counts, then `rankBm25` (or `rankBm25Posted`). No terms (empty
 * text, stop words only) or k < 1: no hits, and the store is not asked.
 */
export const searchLexical = async (
  text: string,
  k: number,
  find: (match: string, terms: readonly string[]) => Promise<LexicalFind>,
): Promise<ScoredHit[]> => {
  const terms = queryTerms(text);
  const match = anyTermQuery(terms);
  const limit = Math.floor(k);
  if (!match || !(limit > 0)) return [];
  const found = await find(match, terms);
  return "posted" in found
    ? rankBm25Posted(terms, found.posted, found.scope, limit, found.identify)
    : rankBm25(terms, found.hits, found.scope, limit);
};
