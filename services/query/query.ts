import { CONFIG_DEFAULTS } from "../core/config.ts";
import { isTurnRowId, turnRowId } from "../core/ids.ts";
import type {
  Embedder,
  GraphStore,
  QueryPlanner,
  ScoredId,
  StoredTurn,
  VectorFilter,
  VectorHit,
  VectorStore,
} from "../core/ports.ts";
import type { QueryResult, RouteName } from "../core/query-types.ts";
import type { QueryRequest } from "../core/requests.ts";
import { getTurnsByRowIds } from "../core/turn-order.ts";
import type { MemoryRecord } from "../core/types.ts";
import { dot } from "../core/vector-math.ts";
import { bothEnds } from "./both-ends.ts";
import { rocchio } from "./feedback.ts";
import { maximalMarginalRelevance } from "./mmr.ts";
import { contentQuestion, withoutNames } from "./name-free.ts";
import { correctedQuestion, findNearMatches, searchWithNearMatches, withNearMatches } from "./near-matches.ts";
import { ownWordsFirst } from "./own-words.ts";
import { type PackInput, packContext } from "./pack.ts";
import { PERSON_LIST_WEIGHT, personOf } from "./person-lists.ts";
import { asksForDuration, collectsMentions, DeterministicPlanner } from "./planner.ts";
import { QueryVectors } from "./query-vectors.ts";
import { askedAsOf } from "./question-time.ts";
import { questionTurnsLast } from "./question-turns.ts";
import { type RankedList, reciprocalRankFusion } from "./rrf.ts";
import { type SecondOpinion, secondOpinionList } from "./second-opinion.ts";

export interface QueryDeps {
  graph: GraphStore;
  vectors: VectorStore;
  embedder: Embedder;
  /** Default: the deterministic planner. */
  planner?: QueryPlanner;
  /** A second embedding model's order of the candidates, fused in (second-opinion.ts); none: off. */
  secondOpinion?: SecondOpinion;
}

const DETERMINISTIC = new DeterministicPlanner();

export interface QuerySettings {
  budget: number;
  rrfK: number;
  mmrLambda: number;
  /** Hits each route contributes to the fusion. */
  routeDepth: number;
  /** Fused candidates that go on to diversity and packing. */
  candidates: number;
  now?: () => Date;
}

/** Awaits a promise for a route, counting the time as waited for the question's vectors (runQuery). */
type Wait = <T>(p: Promise<T>) => Promise<T>;

/** The configuration's defaults (config.query): one place for them. */
export const DEFAULT_QUERY_SETTINGS: QuerySettings = { ...CONFIG_DEFAULTS.query };

/**
 * Graph routes find candidates by exact keys; the question's embedding orders them. The stored
 * vectors are read before the question's is asked for (`question`), which may still be computed.
 */
const rerankBySimilarity = async (
  vectors: QueryVectors,
  hits: readonly ScoredId[],
  question: () => Promise<Float32Array>,
  depth: number,
): Promise<ScoredId[]> => {
  if (hits.length === 0) return [];
  const stored = await vectors.of(hits.map((h) => h.id));
  const qv = await question();
  const sim = new Map([...stored].map(([id, v]) => [id, dot(v, qv)]));
  return hits
    .map((h) => ({ id: h.id, score: h.score + (sim.get(h.id) ?? -1) }))
    .sort((a, b) => b.score - a.score)
    .slice(0, depth);
};

/**
 * Pseudo-relevance feedback: the first round's best fused items that move the question's vector,
 * how far (the mean of their vectors weighs this much against the question's), and what the
 * moved search's list counts in the fusion for a question that does not collect mentions (1 for
 * one that does). Measured on the dev set (docs/benchmarks.md): weight 1 lost recall at 500
 * tokens, 0.5 held or helped; a raw-turn list moved the same way lost recall everywhere; for the
 * other questions a full list lost at 500 and 2,000 tokens, 0.5 at 2,000, 0.2 to 0.4 held or helped.
 */
const FEEDBACK_ITEMS = 5;
const FEEDBACK_WEIGHT = 0.5;
const FEEDBACK_LIST_WEIGHT = 0.4;

/**
 * The time route reads this many times its depth of the records in the window, the tightest dated
 * first, and keeps the depth most like the question.
 */
const TIME_READ = 5;

/** A key matching more than this share of the records says nothing about which record is meant. */
export const SELECTIVE_SHARE = 0.3;

/**
 * Whether a time window narrows what the question matches: it leaves out at least SELECTIVE_SHARE
 * of the dense routes' hits that carry a time. A window that holds nearly all of them (the year a
 * conversation was held in, "in 2023") separates nothing, and its list would be one more
 * similarity list over the same items, noise in the fusion; a day, a month or "as of August" in a
 * longer memory leaves most of them out. On the dev set the month and day windows held 0-39% of
 * their questions' hits, the one year window 99% (docs/benchmarks.md).
 */
const narrows = (
  window: { from: number; to: number },
  lists: readonly RankedList[],
  timeOf: ReadonlyMap<string, number>,
): boolean => {
  let timed = 0;
  let inside = 0;
  for (const list of lists)
    for (const hit of list.ids) {
      const t = timeOf.get(hit.id);
      if (t === undefined) continue;
      timed++;
      if (t >= window.from && t <= window.to) inside++;
    }
  return timed === 0 || timed - inside >= timed * SELECTIVE_SHARE;
};

/**
 * Entities and topics that narrow the search: in a two-person conversation both speakers appear
 * in almost every record, so a lookup by them would only add noise to the fusion.
 */
const selectiveKeys = async (
  keys: readonly string[],
  count: (key: string, cap: number) => Promise<number>,
  total: number,
): Promise<string[]> => {
  const limit = Math.max(1, Math.floor(total * SELECTIVE_SHARE));
  // Counted up to limit + 1 only: a common key's every match need not be read to know it is common.
  const counts = await Promise.all(keys.map((key) => count(key, limit + 1)));
  return keys.filter((_, i) => (counts[i] as number) <= limit);
};

const validAt = (r: MemoryRecord, at: number | undefined): boolean => {
  if (at === undefined) return r.valid.to === undefined;
  return Date.parse(r.valid.from) <= at && (r.valid.to === undefined || Date.parse(r.valid.to) > at);
};

type Candidate = Omit<PackInput, "routes" | "fusedScore">;

const recordItem = (r: MemoryRecord): Candidate => ({
  kind: "record",
  id: r.id,
  text: r.text,
  date: r.time.at ?? r.time.from ?? r.source.saidAt,
  ...(r.time.at === undefined && r.time.from !== undefined && r.time.to !== undefined ? { dateTo: r.time.to } : {}),
  conversation: r.source.conversation,
  turnIds: r.source.turnIds,
  speakers: r.source.speakers,
  session: r.source.sessionId,
  saidAt: r.source.saidAt,
});

/** A raw turn's text as said; the packer labels it with its speaker (items[].speakers carries it too). */
const turnItem = (id: string, t: StoredTurn): Candidate => ({
  kind: "turn",
  id,
  text: t.text,
  date: t.timestamp,
  conversation: t.conversation,
  turnIds: [t.turnId],
  speakers: [t.speaker],
  session: t.sessionId,
  saidAt: t.timestamp,
});

/**
 * The vectors of the question as the routes ask it (names corrected) and of its name-free form.
 * With the question embedded early (`early`, while a model planned), the others are embedded as
 * before, one call each; otherwise both in one call: one forward pass where the model takes texts
 * of similar length together (the name-free question is the question less a name or two), which
 * gives the same vectors as one call each (checked bit for bit on the dev questions), and a
 * question whose name was corrected is no longer embedded as written too. `embeddingCalls` counts
 * calls to the embedder (the early one included), as QueryCost documents, not texts.
 */
const embedTexts = async (
  embedder: Embedder,
  early: Promise<Float32Array[]> | undefined,
  question: string,
  asked: string,
  content: string | undefined,
): Promise<{ qvec: Float32Array; cvec: Float32Array | undefined; embeddingCalls: number }> => {
  if (!early) {
    const [qvec, cvec] = await embedder.embed(content === undefined ? [asked] : [asked, content]);
    return { qvec: qvec as Float32Array, cvec, embeddingCalls: 1 };
  }
  const [[qvec], contentVectors] = await Promise.all([
    asked === question ? early : embedder.embed([asked]),
    content === undefined ? Promise.resolve(undefined) : embedder.embed([content]),
  ]);
  const cvec = contentVectors?.[0];
  return { qvec: qvec as Float32Array, cvec, embeddingCalls: (cvec ? 2 : 1) + (asked === question ? 0 : 1) };
};

/**
 * The query service: plan once, run the routes in parallel, fuse with RRF, expand through event
 * frames, diversify with MMR and pack a dated, sourced context into the token budget.
 */
export const runQuery = async (
  deps: QueryDeps,
  tenant: string,
  req: QueryRequest,
  settings: QuerySettings = DEFAULT_QUERY_SETTINGS,
): Promise<QueryResult> => {
  const started = performance.now();
  const budget = req.budget ?? settings.budget;
  const conversation = req.conversation;
  // As of a moment, every route reads the versions valid then (superseded ones included), the dense
  // route by the validity filter below, the graph routes in the store; without it, current records.
  const asOf = req.asOf ? Date.parse(req.asOf) : undefined;
  const now = settings.now?.() ?? new Date(asOf ?? Date.now());
  const planner = deps.planner ?? DETERMINISTIC;
  // A planner that waits on a model (an LLM) plans while the question is embedded. One that waits
  // on nothing (the deterministic planner), like the store reads before the routes, leaves nothing
  // to overlap the embedding (the ONNX embedder runs on the event loop): then the texts the routes
  // need are embedded once they are known, in one call (embedTexts below).
  const early = planner.waitsOnModel ? deps.embedder.embed([req.question]) : undefined;
  // Awaited below; until then a failure of the reads must not leave its rejection unhandled.
  early?.catch(() => {});
  // The second model's question vector (when on) is computed while the routes run.
  const secondQuestion = deps.secondOpinion?.embedder.embed([req.question]).then(([v]) => v as Float32Array);
  secondQuestion?.catch(() => {});
  const [knownEntities, knownTopics, totalRecords] = await Promise.all([
    deps.graph.knownEntities(tenant, conversation),
    deps.graph.knownTopics(tenant, conversation),
    deps.graph.countRecords(tenant, conversation),
  ]);
  const planned = await planner.plan({
    // The planner's LLM cost is booked to this tenant (unattributed without it).
    tenant,
    question: req.question,
    knownEntities,
    knownTopics,
    now,
  });
  // Near matches where the exact ones find nothing (near-matches.ts); none when every word is known.
  const near = await findNearMatches(deps.graph, {
    tenant,
    ...(conversation === undefined ? {} : { conversation }),
    question: req.question,
    lexicalText: [req.question, ...planned.plan.rewrites].join(" "),
    planned: planned.plan.entities,
    knownEntities,
  });
  const plan = withNearMatches(planned.plan, near);
  // A question asked as of a moment before the query's own (question-time.ts) also reads the
  // versions valid at that moment: superseded since, they are what it asks about. The current ones
  // stay candidates too, since a later turn can tell of what was so then.
  const askedMoment = askedAsOf(plan.timeWindow);
  const askedAt = askedMoment !== undefined && askedMoment < now.getTime() ? askedMoment : undefined;
  const findByEntities = (keys: readonly string[], k: number) =>
    deps.graph.recordsByEntities(tenant, keys, k, conversation, asOf);
  const countKey =
    (index: "entity" | "topic") =>
    (key: string, cap: number): Promise<number> =>
      deps.graph.countRecordsByKey(tenant, index, key, cap, conversation, asOf);
  const selectiveEntities = await selectiveKeys(plan.entities, countKey("entity"), totalRecords);
  // A question that collects mentions of a person (a list, a count, a trait) is matched once more
  // without the names found in nearly every record (name-free.ts).
  const commonNames = plan.entities.filter((e) => !selectiveEntities.includes(e));
  // A misspelled common name is blanked as written too.
  for (const n of near.names) if (commonNames.includes(n.known)) commonNames.push(n.asked);
  // A question with a misspelt name is embedded with the name corrected.
  const asked = correctedQuestion(req.question, near);
  const content = collectsMentions(req.question) ? contentQuestion(asked, commonNames) : undefined;
  // The question's vectors: the graph routes' store reads below need none of them and run while
  // they are computed, which overlaps where the embedder runs off the event loop (a worker thread,
  // composition/parts.ts openEmbedderThread); on the event loop the order changes nothing. Only the
  // similarity searches and the reranks' dot products wait for them.
  const embedded = embedTexts(deps.embedder, early, req.question, asked, content);
  // Awaited by the routes; a store read failing first must not leave its rejection unhandled.
  embedded.catch(() => {});
  const question = embedded.then((v) => v.qvec);
  const depth = settings.routeDepth;
  const routeMs: Partial<Record<RouteName, number>> = {};
  const stored = new QueryVectors(deps.vectors, tenant);
  /**
   * A route's time excludes what it waited for the question's vectors (`wait`): the routes report
   * their own work, and the embedding is QueryCost's to report once.
   */
  const timed = async (route: RouteName, run: (wait: Wait) => Promise<ScoredId[]>): Promise<RankedList> => {
    let waited = 0;
    const wait: Wait = async (p) => {
      const w = performance.now();
      try {
        return await p;
      } finally {
        waited += performance.now() - w;
      }
    };
    const t = performance.now();
    const ids = await run(wait);
    // A route run once per query text (dense, raw-dense) reports its time summed.
    routeMs[route] = (routeMs[route] ?? 0) + performance.now() - t - waited;
    return { route, ids };
  };
  /** A graph route's hits, found by exact keys without the question's vector, then reranked by it. */
  const reranked = async (wait: Wait, hits: readonly ScoredId[]): Promise<ScoredId[]> =>
    rerankBySimilarity(stored, hits, () => wait(question), depth);
  const scope = conversation ? { conversation } : {};
  const questionText = [req.question, ...plan.rewrites].join(" ");
  const lexicalText = content === undefined ? questionText : withoutNames(questionText, commonNames);
  // When each dense hit happened (its payload's event or turn time), for bothEnds below.
  const hitTime = new Map<string, number>();
  const dated = (hits: readonly VectorHit[]): VectorHit[] => {
    for (const h of hits) if (h.payload.time !== undefined) hitTime.set(h.id, h.payload.time);
    return [...hits];
  };
  /** A dense search in the query's scope, narrowed by `filter` (a kind, entities, a time window). */
  const similar =
    (vector: Promise<Float32Array | undefined>, filter: Omit<VectorFilter, "conversation">) => async (wait: Wait) => {
      const v = await wait(vector);
      return v ? deps.vectors.search(tenant, v, depth, { ...scope, ...filter }) : [];
    };
  const jobs: Promise<RankedList>[] = [
    timed("dense", async (wait) => dated(await similar(question, { kind: "record" })(wait))),
    timed("raw-dense", async (wait) => dated(await similar(question, { kind: "turn" })(wait))),
    timed("lexical", () =>
      searchWithNearMatches(
        (text, k) => deps.graph.searchRecordsLexical(tenant, text, k, conversation, asOf),
        lexicalText,
        near.lexical,
        depth,
      ),
    ),
    timed("raw-lexical", () =>
      searchWithNearMatches(
        (text, k) => deps.graph.searchTurnsLexical(tenant, text, k, conversation),
        lexicalText,
        near.lexical,
        depth,
      ),
    ),
  ];
  // The similarity routes once more with the name-free question: two more lists in the fusion,
  // so what matches the content of the question weighs more than what matches the names.
  if (content !== undefined) {
    const nameFree = embedded.then((v) => v.cvec);
    jobs.push(
      timed("dense", similar(nameFree, { kind: "record" })),
      timed("raw-dense", similar(nameFree, { kind: "turn" })),
    );
    // And once more among the records naming the person it is about, at half weight (person-lists.ts).
    const person = personOf(commonNames);
    if (person !== undefined)
      jobs.push(
        timed("dense", similar(nameFree, { kind: "record", entities: [person] })).then((list) => ({
          ...list,
          weight: PERSON_LIST_WEIGHT,
        })),
      );
  }
  const lookup = (
    wait: Wait,
    keys: readonly string[],
    index: "entity" | "topic",
    find: (keys: readonly string[], k: number) => Promise<ScoredId[]>,
  ) =>
    selectiveKeys(keys, countKey(index), totalRecords).then(async (selective) =>
      selective.length === 0 ? [] : reranked(wait, await find(selective, depth * 5)),
    );
  if (selectiveEntities.length > 0)
    jobs.push(timed("entity", async (wait) => reranked(wait, await findByEntities(selectiveEntities, depth * 5))));
  if (plan.topics.length > 0)
    jobs.push(
      timed("topic", (wait) =>
        lookup(wait, plan.topics, "topic", (keys, k) =>
          deps.graph.recordsByTopics(tenant, keys, k, conversation, asOf),
        ),
      ),
    );
  if (plan.timeWindow) {
    const window = { from: Date.parse(plan.timeWindow.from), to: Date.parse(plan.timeWindow.to) };
    const read = depth * TIME_READ;
    // Asked as of a moment ("where did P live as of February"), the versions valid then.
    const inTime = deps.graph.recordsInTime(tenant, window, read, conversation, askedAt ?? asOf);
    inTime.catch(() => {});
    // The question's own dense lists (jobs' first two), whose hits carry their time.
    const similarHits = Promise.all(jobs.slice(0, 2));
    jobs.push(
      timed("time", async (wait) => {
        // Waiting for the dense lists is not this route's work (as waiting for the question's vector).
        if (!narrows(window, await wait(similarHits), hitTime)) return [];
        const inWindow = await inTime;
        if (inWindow.length < read) return reranked(wait, inWindow);
        // A window holding more records than the read takes (a year of a long memory, "since
        // 2019"): the tightest dated are no better a sample of it than any, so what is most like
        // the question within it, records and raw turns.
        return similar(question, { timeFrom: window.from, timeTo: window.to })(wait);
      }),
    );
  }
  const lists = await Promise.all(jobs);
  const { qvec, cvec, embeddingCalls } = await embedded;
  // A duration asks for the event's first and last mention (both-ends.ts).
  if (asksForDuration(req.question)) {
    // The question's own dense lists (jobs' first two), not the name-free ones.
    const ends = bothEnds(lists.slice(0, 2), hitTime, Math.floor(depth / 2));
    if (ends) lists.push(ends);
  }
  const first = reciprocalRankFusion(lists, settings.rrfK);
  const seeds = first
    .filter((f) => !isTurnRowId(f.id))
    .slice(0, 5)
    .map((f) => f.id);
  const second: Promise<RankedList>[] = [
    timed("event-frame", async () =>
      rerankBySimilarity(
        stored,
        await deps.graph.eventFrameNeighbours(tenant, seeds, depth, asOf),
        () => question,
        depth,
      ),
    ),
  ];
  // The record route once more, moved toward what the first round found best (feedback.ts). A
  // list or trait question's evidence in other sessions reads like what was found, and its list
  // counts fully; for other questions it is a second opinion that counts less, so that the best
  // few items (what fits in a small budget) stay the question's own.
  const best = await stored.of(first.slice(0, FEEDBACK_ITEMS).map((f) => f.id));
  const moved = rocchio(cvec ?? qvec, [...best.values()], FEEDBACK_WEIGHT);
  if (moved) {
    const weight = collectsMentions(req.question) ? 1 : FEEDBACK_LIST_WEIGHT;
    second.push(
      timed("dense", async () => deps.vectors.search(tenant, moved, depth, { ...scope, kind: "record" })).then(
        (list) => ({ ...list, weight }),
      ),
    );
  }
  lists.push(...(await Promise.all(second)));
  const fused = reciprocalRankFusion(lists, settings.rrfK).slice(0, settings.candidates);

  const recordIds = fused.filter((f) => !isTurnRowId(f.id)).map((f) => f.id);
  const turnIds = fused.filter((f) => isTurnRowId(f.id)).map((f) => f.id);
  const [records, turns, vectorOf] = await Promise.all([
    deps.graph.getRecords(tenant, recordIds),
    getTurnsByRowIds(deps.graph, tenant, turnIds),
    stored.of(fused.map((f) => f.id)),
  ]);
  const items = new Map<string, Candidate>();
  for (const r of records)
    if (validAt(r, asOf) || (askedAt !== undefined && validAt(r, askedAt))) items.set(r.id, recordItem(r));
  for (const t of turns) {
    const id = turnRowId(t.conversation, t.turnId);
    if (asOf === undefined || Date.parse(t.timestamp) <= asOf) items.set(id, turnItem(id, t));
  }
  // The second model's order of the candidates joins the routes' lists; the fusion then orders the
  // same candidates again (second-opinion.ts).
  let ordered = fused;
  let opinionCalls = 0;
  if (deps.secondOpinion && secondQuestion) {
    const candidates = fused.flatMap((f) => {
      const c = items.get(f.id);
      return c ? [c] : [];
    });
    const opinionStarted = performance.now();
    const { list, embeddedHere } = await secondOpinionList(
      deps.secondOpinion,
      deps.vectors,
      tenant,
      secondQuestion,
      candidates,
    );
    // Its time includes any wait for the question's second vector (started before the routes).
    routeMs["second-opinion"] = performance.now() - opinionStarted;
    opinionCalls = 1 + (embeddedHere > 0 ? 1 : 0);
    lists.push(list);
    const kept = new Set(candidates.map((c) => c.id));
    ordered = reciprocalRankFusion(lists, settings.rrfK).filter((f) => kept.has(f.id));
  }
  const diverse = maximalMarginalRelevance(
    ordered
      .filter((f) => items.has(f.id))
      .map((f) => {
        const vector = vectorOf.get(f.id);
        return { id: f.id, relevance: f.score, ...(vector ? { vector } : {}) };
      }),
    settings.mmrLambda,
    settings.candidates,
  );
  const byId = new Map(ordered.map((f) => [f.id, f]));
  const ranked = diverse.map((d) => {
    const f = byId.get(d.id);
    return { ...(items.get(d.id) as Candidate), routes: f?.routes ?? [], fusedScore: f?.score ?? 0 };
  });
  // A question collecting mentions wants statements by the person it names: that person's items
  // first (own-words.ts), and turns that only ask last (question-turns.ts).
  const packed = packContext(
    collectsMentions(req.question) ? questionTurnsLast(ownWordsFirst(req.question, ranked)) : ranked,
    budget,
  );
  const explain = req.explain
    ? {
        routes: lists.map((l) => ({ route: l.route, hits: l.ids.map((h) => ({ id: h.id, score: h.score })) })),
        fused: ordered.map((f) => {
          const text = items.get(f.id)?.text;
          return { id: f.id, score: f.score, routes: f.routes.map((r) => r.route), ...(text ? { text } : {}) };
        }),
      }
    : undefined;
  return {
    context: packed.context,
    contextTokens: packed.tokens,
    budget,
    items: packed.items,
    plan,
    cost: {
      embeddingCalls: embeddingCalls + opinionCalls,
      ...planned.cost,
      ms: performance.now() - started,
      routeMs,
    },
    ...(explain ? { explain } : {}),
  };
};
