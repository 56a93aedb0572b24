/**
 * A second embedding model's opinion on the order of a query's candidates (issue 15; docs/design.md,
 * "Second opinion"). The routes find the candidates and the first fusion keeps the best of them;
 * the second model (bge-small-en-v1.5) orders those by its own cosine to the question, and that
 * order joins the fusion as one more list. Two models trained apart err on different items, so an
 * item both rank high is likelier evidence than one either ranks high alone: on the dev set
 * evidence recall at 500 / 1,000 / 2,000 tokens went .782 / .877 / .941 -> .810 / .890 / .944,
 * while reordering by the first model's own vectors moved nothing. As a route of its own (its
 * nearest items added to the candidates) the same model lowered recall: it helps by ordering, not
 * by finding, so its vectors are stored beside the first model's and read by id, never searched.
 */
import type { Embedder, VectorStore } from "../core/ports.ts";
import { turnEmbeddingText } from "../core/turn-text.ts";
import { dot } from "../core/vector-math.ts";
import type { RankedList } from "./rrf.ts";

export interface SecondOpinion {
  embedder: Embedder;
  /** The list's weight in the fusion (config secondOpinion.weight). */
  weight: number;
}

/** A candidate as the second model reads it: the text its stored vector was computed from. */
export interface OpinionCandidate {
  id: string;
  kind: "record" | "turn";
  text: string;
  speakers: readonly string[];
}

/** The text the indexer embedded for the item: a record's text, a turn as "speaker: text". */
const embeddedText = (c: OpinionCandidate): string =>
  c.kind === "turn" ? turnEmbeddingText(c.speakers[0] ?? "", c.text) : c.text;

/**
 * The candidates ordered by the second model's cosine to the question (ties: the order given), as
 * a fusion list, and how many candidates had to be embedded here. Vectors come from the store; a
 * candidate without one (written before the setting was on, or a store that keeps none) is
 * embedded here, so every candidate gets an opinion.
 */
export const secondOpinionList = async (
  opinion: SecondOpinion,
  vectors: Pick<VectorStore, "getSecondVectors">,
  tenant: string,
  question: Promise<Float32Array>,
  candidates: readonly OpinionCandidate[],
): Promise<{ list: RankedList; embeddedHere: number }> => {
  const stored = vectors.getSecondVectors
    ? await vectors.getSecondVectors(
        tenant,
        candidates.map((c) => c.id),
      )
    : new Map<string, Float32Array>();
  const missing = candidates.filter((c) => !stored.has(c.id));
  const fresh = missing.length > 0 ? await opinion.embedder.embed(missing.map(embeddedText)) : [];
  const vectorOf = new Map(stored);
  for (const [i, c] of missing.entries()) vectorOf.set(c.id, fresh[i] as Float32Array);
  const q = await question;
  const scored = candidates.map((c, i) => {
    const v = vectorOf.get(c.id);
    // A vector of another dimension (a store written with another second model) says nothing.
    const score = v && v.length === q.length ? dot(v, q) : -1;
    return { id: c.id, score, i };
  });
  scored.sort((a, b) => b.score - a.score || a.i - b.i);
  return {
    list: { route: "second-opinion", ids: scored.map((s) => ({ id: s.id, score: s.score })), weight: opinion.weight },
    embeddedHere: missing.length,
  };
};
