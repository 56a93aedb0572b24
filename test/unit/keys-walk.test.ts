// The merged walk of the entity / topic key lists (services/core/adapters/sqlite/keys-walk.ts)
// against ranking every match, on seeded in-memory lists: said_at ties, alias keys sharing a
// name, records that are not current, pages of one row and up; and that it stops early when the
// keys share enough records.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  codePointOrder,
  type KeyLists,
  type KeyRow,
  rankByMergedWalk,
  rankByMergedWalkWithin,
  type ScoredRecord,
} from "../../services/core/adapters/sqlite/keys-walk.ts";
import { seededRandom } from "../../services/core/seeded-random.ts";

interface Store {
  rows: Map<string, KeyRow[]>;
  current: Set<string>;
}

/** `records` records over `keys` keys; key k1 is an alias of k0 (same name); each key on `share` of the records. */
const makeStore = (rand: () => number, records: number, keys: number, share: number): Store => {
  const rows = new Map<string, KeyRow[]>();
  const current = new Set<string>();
  for (let i = 0; i < records; i++) {
    // Ids past U+FFFF in some, so that code point order differs from UTF-16 order.
    const id = `${rand() < 0.1 ? "\u{1F600}" : rand() < 0.5 ? "\uFF21" : ""}r${Math.floor(rand() * 1e6)}-${i}`;
    const saidAt = Math.floor(rand() * 20); // few times: many ties
    if (rand() < 0.85) current.add(id);
    for (let k = 0; k < keys; k++) {
      if (rand() >= share) continue;
      const key = `k${k}`;
      const list = rows.get(key) ?? [];
      list.push({ id, name: k === 1 ? "N0" : `N${k}`, saidAt });
      rows.set(key, list);
    }
  }
  for (const list of rows.values()) list.sort((a, b) => b.saidAt - a.saidAt || codePointOrder(a.id, b.id));
  return { rows, current };
};

/** Every match grouped by record, ranked (names DESC, said_at DESC, id), the current ones cut at k. */
const rankEveryMatch = (store: Store, keys: readonly string[], k: number): ScoredRecord[] => {
  const groups = new Map<string, { names: Set<string>; saidAt: number }>();
  for (const key of keys)
    for (const row of store.rows.get(key) ?? []) {
      const g = groups.get(row.id) ?? { names: new Set<string>(), saidAt: row.saidAt };
      g.names.add(row.name);
      groups.set(row.id, g);
    }
  return [...groups]
    .filter(([id]) => store.current.has(id))
    .sort(([a, x], [b, y]) => y.names.size - x.names.size || y.saidAt - x.saidAt || codePointOrder(a, b))
    .slice(0, k)
    .map(([id, g]) => ({ id, score: g.names.size }));
};

/** The store as KeyLists, counting the rows it hands out. */
const listsOf = (store: Store, read: { rows: number }): KeyLists => ({
  page: (key, after, limit) => {
    const list = store.rows.get(key) ?? [];
    const from =
      after === undefined
        ? 0
        : list.findIndex(
            (r) => r.saidAt < after.saidAt || (r.saidAt === after.saidAt && codePointOrder(r.id, after.id) > 0),
          );
    const page = from === -1 ? [] : list.slice(from, from + limit);
    read.rows += page.length;
    return page;
  },
  current: (ids) => new Set(ids.filter((id) => store.current.has(id))),
});

describe("rankByMergedWalk", () => {
  it("equals ranking every match, for any keys, k and page size", () => {
    const rand = seededRandom(18);
    let compared = 0;
    let severalScores = 0;
    for (let trial = 0; trial < 300; trial++) {
      const store = makeStore(rand, 20 + Math.floor(rand() * 300), 5, 0.1 + rand() * 0.6);
      const keys = ["k0", "k1", "k2", "k3", "k4", "missing"].filter(() => rand() < 0.6);
      const k = [1, 2, 3, 5, 8, 40, 1000][Math.floor(rand() * 7)] as number;
      const page = [1, 2, 3, 7, 64][Math.floor(rand() * 5)] as number;
      const expected = rankEveryMatch(store, keys, k);
      const got = rankByMergedWalk(keys, k, listsOf(store, { rows: 0 }), page);
      assert.deepEqual(got, expected, JSON.stringify({ trial, keys, k, page }));
      compared++;
      if (new Set(expected.map((r) => r.score)).size > 1) severalScores++;
    }
    assert.equal(compared, 300);
    assert.ok(severalScores > 50, `trials ranking several scores: ${severalScores}`);
  });

  it("stops once k current records match every key, without reading the lists to their ends", () => {
    const store = makeStore(seededRandom(7), 5000, 3, 0.8);
    const keys = ["k0", "k2"];
    const read = { rows: 0 };
    const got = rankByMergedWalk(keys, 40, listsOf(store, read));
    assert.deepEqual(got, rankEveryMatch(store, keys, 40));
    assert.ok(got.every((r) => r.score === 2));
    const total = keys.reduce((n, key) => n + (store.rows.get(key)?.length ?? 0), 0);
    assert.ok(read.rows < total / 10, `${read.rows} of ${total} rows read`);
  });

  it("within a row budget: the same answer when the walk ends within it, nothing when it would read more", () => {
    const rand = seededRandom(23);
    let within = 0;
    let over = 0;
    for (let trial = 0; trial < 200; trial++) {
      const store = makeStore(rand, 50 + Math.floor(rand() * 400), 4, 0.1 + rand() * 0.7);
      const keys = ["k0", "k2", "k3"].filter(() => rand() < 0.8);
      const k = [1, 5, 40][Math.floor(rand() * 3)] as number;
      const page = [1, 3, 64][Math.floor(rand() * 3)] as number;
      const unbounded = { rows: 0 };
      const expected = rankByMergedWalk(keys, k, listsOf(store, unbounded), page);
      const budget = Math.floor(rand() * 2 * (unbounded.rows + 1));
      const read = { rows: 0 };
      const got = rankByMergedWalkWithin(keys, k, listsOf(store, read), budget, page);
      // Never more than the budget and the one row that shows it is spent.
      assert.ok(read.rows <= budget + 1, JSON.stringify({ trial, budget, read: read.rows }));
      if (budget >= unbounded.rows) {
        assert.deepEqual(got, expected, JSON.stringify({ trial, keys, k, page, budget }));
        within++;
      } else if (got === undefined) {
        over++;
      } else {
        // Ended within a budget smaller than the unbounded walk's reads (its last page was cut): still exact.
        assert.deepEqual(got, expected, JSON.stringify({ trial, keys, k, page, budget }));
        within++;
      }
    }
    assert.ok(within > 50 && over > 50, `within ${within}, over ${over}`);
  });
});
