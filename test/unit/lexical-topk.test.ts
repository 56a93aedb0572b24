import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  companionSets,
  type LexicalHit,
  type LexicalPostings,
  rankBm25,
  rankBm25Posted,
  rankBm25TopK,
  searchLexicalTopK,
  type TermStatistics,
} from "../../services/core/lexical.ts";
import { seededRandom } from "../helpers/seeded.ts";

/**
 * An in-memory store for the top-k ranking, built from a corpus: document frequencies and scope
 * counts as a store keeps them, postings with the `without` exclusion, and counts of the items it
 * handed out (to show that common terms' postings are skipped) and identified (to show that few
 * are). `outside` items are posted too but are out of the scope (another tenant's, superseded):
 * in no statistics, and identify leaves them out. Postings honour `along` (only the items holding
 * every term of one of its sets), or with `singleSetOnly` only when it is one set, as the SQLite
 * store does; `along` counts the reads it narrowed.
 */
const memoryStore = (
  corpus: readonly LexicalHit[],
  loose = false,
  outside: readonly LexicalHit[] = [],
  singleSetOnly = false,
): LexicalPostings & { read: number; identified: number; along: number; grouped: number } => {
  const words = (h: LexicalHit): string[] => (h.lex.length === 0 ? [] : h.lex.split(" "));
  const kept = new Map<string, TermStatistics>();
  for (const h of corpus) {
    const tf = new Map<string, number>();
    for (const w of words(h)) tf.set(w, (tf.get(w) ?? 0) + 1);
    for (const [t, f] of tf) {
      const k = kept.get(t) ?? { df: 0, maxTf: 0, minLengthPerTf: Number.POSITIVE_INFINITY };
      kept.set(t, {
        df: k.df + 1,
        maxTf: Math.max(k.maxTf as number, f),
        minLengthPerTf: Math.min(k.minLengthPerTf as number, words(h).length / f),
      });
    }
  }
  // Looser bounds, as a store keeps them after deletes (or none, after an erasure): still a valid ranking, read more.
  if (loose)
    for (const [t, k] of kept)
      kept.set(
        t,
        t.endsWith("7")
          ? { ...k, maxTf: null, minLengthPerTf: null }
          : { ...k, maxTf: (k.maxTf as number) + 2, minLengthPerTf: (k.minLengthPerTf as number) / 2 },
      );
  const totalLength = corpus.reduce((sum, h) => sum + words(h).length, 0);
  const posted = [...corpus, ...outside];
  const store = {
    read: 0,
    identified: 0,
    async statistics(terms: readonly string[]) {
      return {
        scope: { items: corpus.length, totalLength },
        terms: new Map(terms.filter((t) => kept.has(t)).map((t) => [t, kept.get(t) as TermStatistics])),
      };
    },
    along: 0,
    grouped: 0,
    async postings(terms: readonly string[], without: readonly string[], along?: readonly (readonly string[])[]) {
      if (terms.length > 1) store.grouped++;
      // As the SQLite store: one set narrows the read, several are ignored (a wider read is allowed).
      const sets = along === undefined || (along.length > 1 && singleSetOnly) ? undefined : along;
      if (sets) store.along++;
      const items = posted
        .map((h, key) => ({ key, lex: h.lex }))
        .filter((h) => {
          const w = new Set(h.lex.length === 0 ? [] : h.lex.split(" "));
          return (
            terms.some((t) => w.has(t)) &&
            !without.some((x) => w.has(x)) &&
            (sets === undefined || sets.some((set) => set.every((x) => w.has(x))))
          );
        });
      store.read += items.filter((h) => h.key < corpus.length).length;
      return items;
    },
    async identify(keys: readonly number[]) {
      store.identified += keys.length;
      return new Map(
        keys
          .filter((key) => key < corpus.length)
          .map((key) => {
            const h = corpus[key] as LexicalHit;
            return [key, { id: h.id, time: h.time }];
          }),
      );
    },
  };
  return store;
};

/** The exhaustive ranking over every item of the corpus holding a query term (exact statistics). */
const exhaustive = (corpus: readonly LexicalHit[], terms: readonly string[], k: number) => {
  const wanted = new Set(terms);
  const hits = corpus.filter((h) => h.lex.split(" ").some((w) => wanted.has(w)));
  const totalLength = corpus.reduce((sum, h) => sum + (h.lex.length === 0 ? 0 : h.lex.split(" ").length), 0);
  return rankBm25(terms, hits, { items: corpus.length, totalLength }, k);
};

/**
 * A Zipf-like corpus: a few very common terms, many rare ones. Every fifth item is a copy of an
 * earlier one (same terms; same time for half of them) so that equal scores are decided by the
 * tie rules (newer time, then id).
 */
const corpusOf = (seed: number, items: number, vocabulary: number): LexicalHit[] => {
  const rnd = seededRandom(seed);
  const term = (): string => `w${Math.floor(vocabulary ** rnd()) - 1}`;
  const out: LexicalHit[] = [];
  for (let i = 0; i < items; i++) {
    const earlier = out[Math.floor(rnd() * out.length)];
    if (earlier && i % 5 === 0) {
      out.push({ id: `d${i}`, lex: earlier.lex, time: rnd() < 0.5 ? earlier.time : Math.floor(rnd() * 50) });
      continue;
    }
    const length = 1 + Math.floor(rnd() * 30);
    out.push({
      id: `d${i}`,
      lex: Array.from({ length }, term).join(" "),
      time: Math.floor(rnd() * 50),
    });
  }
  return out;
};

describe("top-k BM25 (MaxScore over kept document frequencies)", () => {
  it("returns the exhaustive scorer's top k, scores bit-equal and ties in the same order, on seeded random corpora", async () => {
    let compared = 0;
    let pruned = 0;
    let narrowed = 0;
    let grouped = 0;
    for (let seed = 1; seed <= 24; seed++) {
      const corpus = corpusOf(seed, 300 + seed * 10, 400);
      const store = memoryStore(corpus, seed % 2 === 0, [], seed % 3 === 0);
      const rnd = seededRandom(1000 + seed);
      for (let q = 0; q < 10; q++) {
        const terms = [
          ...new Set(Array.from({ length: 1 + Math.floor(rnd() * 8) }, () => `w${Math.floor(400 ** rnd()) - 1}`)),
        ];
        for (const k of [1, 5, 20]) {
          store.read = 0;
          const got = await rankBm25TopK(terms, k, store);
          const want = exhaustive(corpus, terms, k);
          assert.deepEqual(got, want, `seed ${seed} query ${terms.join(" ")} k ${k}`);
          const candidates = corpus.filter((h) => h.lex.split(" ").some((w) => terms.includes(w))).length;
          assert.ok(store.read <= candidates);
          if (store.read < candidates) pruned++;
          compared++;
        }
      }
      narrowed += store.along;
      grouped += store.grouped;
    }
    assert.equal(compared, 24 * 10 * 3);
    // Reads narrowed to items holding enough of the later terms (companionSets) happen, and change nothing.
    assert.ok(narrowed > 0, "no read was narrowed");
    // Rare terms read together while the top k cannot fill happen too.
    assert.ok(grouped > 0, "no read took several terms");
    // The point of it: many queries stop before reading every item holding a query term.
    assert.ok(pruned > compared / 4, `pruned ${pruned} of ${compared}`);
  });

  it("leaves out posted items outside the scope and identifies only the items that may enter the top k", async () => {
    let compared = 0;
    let fewer = 0;
    for (let seed = 1; seed <= 12; seed++) {
      const corpus = corpusOf(seed, 400, 300);
      // Out-of-scope copies of in-scope items (the same terms score as high) and items of their own.
      const outside = [
        ...corpus.filter((_, i) => i % 7 === 0).map((h, i) => ({ ...h, id: `x${i}` })),
        ...corpusOf(seed + 100, 100, 300).map((h) => ({ ...h, id: `y${h.id}` })),
      ];
      const store = memoryStore(corpus, seed % 2 === 0, outside);
      const rnd = seededRandom(2000 + seed);
      for (let q = 0; q < 10; q++) {
        const terms = [
          ...new Set(Array.from({ length: 1 + Math.floor(rnd() * 6) }, () => `w${Math.floor(300 ** rnd()) - 1}`)),
        ];
        for (const k of [1, 5, 20]) {
          store.read = 0;
          store.identified = 0;
          assert.deepEqual(await rankBm25TopK(terms, k, store), exhaustive(corpus, terms, k), `seed ${seed} ${terms}`);
          if (store.identified < store.read) fewer++;
          compared++;
        }
      }
    }
    assert.ok(fewer > compared / 2, `identified fewer than read in ${fewer} of ${compared}`);
  });

  it("orders equal scores by newer time then id, across the k-th place", async () => {
    const corpus: LexicalHit[] = [
      { id: "b", lex: "moon", time: 5 },
      { id: "a", lex: "moon", time: 5 },
      { id: "c", lex: "moon", time: 9 },
      { id: "d", lex: "sun", time: 1 },
      { id: "e", lex: "sun sun", time: 1 },
    ];
    for (const k of [1, 2, 3, 4, 5]) {
      assert.deepEqual(
        await rankBm25TopK(["moon", "sun"], k, memoryStore(corpus)),
        exhaustive(corpus, ["moon", "sun"], k),
      );
    }
    assert.deepEqual(
      (await rankBm25TopK(["moon"], 3, memoryStore(corpus))).map((h) => h.id),
      ["c", "a", "b"],
    );
  });

  it("asks the store nothing for no terms or k < 1, and skips terms in no item", async () => {
    const store = memoryStore([{ id: "a", lex: "moon", time: 0 }]);
    assert.deepEqual(await searchLexicalTopK("what did she do?", 5, store), []);
    assert.deepEqual(await rankBm25TopK(["moon"], 0, store), []);
    assert.equal(store.read, 0);
    assert.deepEqual(await rankBm25TopK(["mars"], 3, store), []);
    assert.equal(store.read, 0);
  });
});

describe("exhaustive BM25 identified late (rankBm25Posted)", () => {
  /** The hits of a query by key (the corpus index), with the item-table read counted. */
  const posted = (corpus: readonly LexicalHit[], terms: readonly string[]) => {
    const wanted = new Set(terms);
    const items = corpus
      .map((h, key) => ({ key, lex: h.lex }))
      .filter((h) => h.lex.split(" ").some((w) => wanted.has(w)));
    const counter = { identified: 0 };
    const identify = async (keys: readonly number[]) => {
      counter.identified += keys.length;
      return new Map(
        keys.map((key) => [key, { id: (corpus[key] as LexicalHit).id, time: (corpus[key] as LexicalHit).time }]),
      );
    };
    return { items, identify, counter };
  };
  const scopeOf = (corpus: readonly LexicalHit[]) => ({
    items: corpus.length,
    totalLength: corpus.reduce((sum, h) => sum + (h.lex.length === 0 ? 0 : h.lex.split(" ").length), 0),
  });

  it("returns rankBm25's top k over the same hits, scores bit-equal and ties in the same order, identifying few", async () => {
    let compared = 0;
    let fewer = 0;
    for (let seed = 1; seed <= 16; seed++) {
      const corpus = corpusOf(seed, 200 + seed * 20, 300);
      const rnd = seededRandom(3000 + seed);
      for (let q = 0; q < 10; q++) {
        const terms = [
          ...new Set(Array.from({ length: 1 + Math.floor(rnd() * 8) }, () => `w${Math.floor(300 ** rnd()) - 1}`)),
        ];
        // A scope larger than the corpus (items of no query term elsewhere), as a store's counts are.
        const scope =
          seed % 2 === 0
            ? scopeOf(corpus)
            : { items: corpus.length + 50, totalLength: scopeOf(corpus).totalLength + 400 };
        for (const k of [1, 5, 20]) {
          const { items, identify, counter } = posted(corpus, terms);
          const hits = items.map((p) => corpus[p.key] as LexicalHit);
          assert.deepEqual(
            await rankBm25Posted(terms, items, scope, k, identify),
            rankBm25(terms, hits, scope, k),
            `seed ${seed} query ${terms.join(" ")} k ${k}`,
          );
          if (counter.identified < items.length) fewer++;
          compared++;
        }
      }
    }
    assert.ok(fewer > compared / 2, `identified fewer than the hits in ${fewer} of ${compared}`);
  });

  it("orders equal scores by newer time then id across the k-th place, counts a key once, skips items identify leaves out", async () => {
    const corpus: LexicalHit[] = [
      { id: "b", lex: "moon", time: 5 },
      { id: "a", lex: "moon", time: 5 },
      { id: "c", lex: "moon", time: 9 },
      { id: "d", lex: "sun", time: 1 },
      { id: "e", lex: "sun sun", time: 1 },
    ];
    const scope = scopeOf(corpus);
    for (const k of [1, 2, 3, 4, 5]) {
      const { items, identify } = posted(corpus, ["moon", "sun"]);
      assert.deepEqual(
        await rankBm25Posted(["moon", "sun"], [...items, ...items], scope, k, identify),
        rankBm25(["moon", "sun"], corpus, scope, k),
      );
    }
    const { items } = posted(corpus, ["moon"]);
    const withoutA = async (keys: readonly number[]) =>
      new Map(
        keys
          .filter((key) => key !== 1)
          .map((key) => [key, { id: (corpus[key] as LexicalHit).id, time: (corpus[key] as LexicalHit).time }]),
      );
    assert.deepEqual(
      (await rankBm25Posted(["moon"], items, scope, 3, withoutA)).map((h) => h.id),
      ["c", "b"],
    );
    assert.deepEqual(await rankBm25Posted(["moon"], items, scope, 0, withoutA), []);
    assert.deepEqual(await rankBm25Posted([], items, scope, 3, withoutA), []);
  });
});

describe("companionSets (which later terms an unread item must hold)", () => {
  /** Every subset of the later terms (indices), as bit masks. */
  const subsets = (n: number): number[] => Array.from({ length: 2 ** n }, (_, m) => m);

  it("lists exactly the minimal sets of later terms whose bounds reach the k-th best, on seeded inputs", () => {
    const rnd = seededRandom(77);
    let checked = 0;
    for (let round = 0; round < 400; round++) {
      const n = 1 + Math.floor(rnd() * 7);
      const order = Array.from({ length: n }, (_, j) => `t${j}`);
      // Some equal bounds, so that ties between sets are covered.
      const bound = order.map(() => (rnd() < 0.3 ? 2 : Math.round(rnd() * 60) / 10));
      const i = Math.floor(rnd() * n);
      const total = bound.slice(i).reduce((a, b) => a + b, 0);
      const kth = rnd() * total * 1.1;
      const got = companionSets(order, bound, i, kth);
      const own = bound[i] as number;
      if (!(kth > own * (1 + 1e-9))) {
        assert.equal(got, undefined, "the term's own bound reaches: every item is needed");
        continue;
      }
      assert.ok(got !== undefined);
      const later = order.slice(i + 1);
      const reaches = (mask: number): boolean => {
        let sum = own;
        later.forEach((_, j) => {
          if (mask & (1 << j)) sum += bound[i + 1 + j] as number;
        });
        return !(kth > sum * (1 + 1e-9));
      };
      const maskOf = (set: readonly string[]): number => set.reduce((m, t) => m | (1 << later.indexOf(t)), 0);
      const masks = got.map(maskOf);
      // Each listed set reaches and is minimal (no term of it can be dropped).
      for (const m of masks) {
        assert.ok(reaches(m));
        for (let j = 0; j < later.length; j++) if (m & (1 << j)) assert.ok(!reaches(m & ~(1 << j)), "not minimal");
      }
      // Every set of later terms that reaches holds one of the listed sets (no needed item left out).
      for (const m of subsets(later.length)) {
        if (reaches(m))
          assert.ok(
            masks.some((s) => (m & s) === s),
            `uncovered ${m}`,
          );
      }
      checked++;
    }
    assert.ok(checked > 100, `checked ${checked}`);
  });

  it("settles for any later term when the sets would be too many", () => {
    const order = Array.from({ length: 20 }, (_, j) => `t${j}`);
    const bound = order.map(() => 1);
    // Own bound 1, k-th best 3: any two later terms reach, 171 sets.
    const got = companionSets(order, bound, 1, 3);
    assert.deepEqual(
      got,
      order.slice(2).map((t) => [t]),
    );
  });
});
