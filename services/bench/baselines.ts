import Database from "better-sqlite3";
import { dot } from "../core/vector-math.ts";
import type { Unit } from "./pack.ts";

/**
 * Word tokens of a question OR-ed into an FTS5 MATCH expression. Only letters and digits survive,
 * so every FTS syntax character (quotes, parentheses, *, :, ^, -) is stripped, and each token is
 * quoted so AND / OR / NOT / NEAR are read as words. Undefined when no word is left.
 */
export const bm25Query = (text: string): string | undefined => {
  const tokens = [
    ...new Set(
      text
        .normalize("NFKC")
        .toLowerCase()
        .match(/[\p{L}\p{N}]+/gu) ?? [],
    ),
  ];
  return tokens.length === 0 ? undefined : tokens.map((t) => `"${t}"`).join(" OR ");
};

/**
 * The plain BM25 baseline: units in an in-memory SQLite FTS5 table with FTS5's own `porter
 * unicode61` tokenizer (no stop words dropped) and ranking, FTS5's bm25(), best first. It is not
 * the engine's lexical route, which scores its own terms (core/lexical.ts) the same way in every
 * store. Units that share no word with the question are not returned.
 */
export class Bm25Index {
  private readonly db: Database.Database;
  private readonly byRow = new Map<number, Unit>();

  constructor(units: readonly Unit[], textOf: (u: Unit) => string) {
    this.db = new Database(":memory:");
    this.db.exec("CREATE VIRTUAL TABLE units USING fts5(text, tokenize = 'porter unicode61')");
    const insert = this.db.prepare("INSERT INTO units(rowid, text) VALUES (?, ?)");
    this.db.transaction(() => {
      units.forEach((u, i) => {
        insert.run(i + 1, textOf(u));
        this.byRow.set(i + 1, u);
      });
    })();
  }

  rank(question: string, k = 1000): Unit[] {
    const match = bm25Query(question);
    if (!match) return [];
    const rows = this.db
      .prepare("SELECT rowid AS row FROM units WHERE units MATCH ? ORDER BY bm25(units), rowid LIMIT ?")
      .all(match, k) as { row: number }[];
    return rows.map((r) => this.byRow.get(r.row)).filter((u): u is Unit => u !== undefined);
  }

  close(): void {
    this.db.close();
  }
}

/** Units by cosine to the question (vectors are L2-normalised, so the dot product), best first. */
export const denseRank = (units: readonly Unit[], vectors: readonly Float32Array[], question: Float32Array): Unit[] =>
  units
    .map((u, i) => ({ u, score: dot(vectors[i] as Float32Array, question) }))
    .sort((a, b) => b.score - a.score || a.u.seq - b.u.seq)
    .map((x) => x.u);

/** Full context truncated to a budget: most recent first (to pack with mode "stop"). */
export const recentFirst = (units: readonly Unit[]): Unit[] => [...units].sort((a, b) => b.seq - a.seq);
