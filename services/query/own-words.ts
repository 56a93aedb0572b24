/**
 * A person's own words first. A question that collects mentions of someone who speaks in the
 * conversation ("What activities does Melanie partake in?", "What kind of art does Caroline make?")
 * is answered by what that person said: their turns and the records made from them. The fused
 * ranking also holds, as high, the other speaker's turns and records on the same subject (asking
 * about it, or telling their own story), which match the question's words as well but say nothing
 * about the person asked about. So for such a question the items said by a speaker the question
 * names go first, then the rest, each part in its ranked order; a question naming both speakers
 * (or none) keeps its order.
 *
 * Over the budget sweep on the dev set and on each of its three disguised copies this raised 12–13
 * list and inference questions of conv-26 and lowered one question of conv-30, the same in every
 * copy, whose third evidence turn is the other speaker's account of her own business: conv-30's
 * mean is 0.0005 lower (docs/benchmarks.md).
 */
import { namePattern } from "../core/text/names.ts";

/**
 * The speakers of these items whose name the question says as a whole word. In a question written
 * with capitals a name must match as written, so that a speaker called Will or May is not named by
 * "What will Bob do?"; in one typed in lower case ("what does melanie like") any case matches.
 */
export const speakersNamed = (question: string, items: readonly { speakers: readonly string[] }[]): Set<string> => {
  const speakers = new Set(items.flatMap((i) => i.speakers));
  const flags = /\p{Lu}/u.test(question.slice(1)) ? "u" : "iu";
  return new Set([...speakers].filter((s) => s.trim() !== "" && namePattern(s, flags).test(question)));
};

/** The items said by a speaker the question names, then the others, each part in its order. */
export const ownWordsFirst = <T extends { speakers: readonly string[] }>(
  question: string,
  ranked: readonly T[],
): T[] => {
  const named = speakersNamed(question, ranked);
  if (named.size === 0) return [...ranked];
  const own = (item: T): boolean => item.speakers.some((s) => named.has(s));
  return [...ranked.filter(own), ...ranked.filter((i) => !own(i))];
};
