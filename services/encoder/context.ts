/** The disambiguation context: bounded keyed state carried from one segment to the next. */

import { countTokens, truncateToTokens } from "../core/tokens.ts";
import type { DisambiguationContext } from "../core/types.ts";

export const emptyContext = (): DisambiguationContext => ({
  aliases: {},
  referents: {},
  speakers: [],
  recentRecords: [],
});

export const contextTokens = (ctx: DisambiguationContext): number => countTokens(JSON.stringify(ctx));

/** Longest single speaker name kept in the context, in tokens. */
const SPEAKER_TOKEN_CAP = 24;

/**
 * Enforce the token cap (countTokens over JSON.stringify(context)): evict the oldest recent
 * records first, then the oldest aliases, then the oldest referents; as a last resort shorten the
 * speaker names. Object keys keep insertion order, and callers re-insert a refreshed key at the
 * end, so "oldest" is the first key. Returns a new object.
 */
export const capContext = (ctx: DisambiguationContext, cap: number): DisambiguationContext => {
  const out: DisambiguationContext = {
    aliases: { ...ctx.aliases },
    referents: { ...ctx.referents },
    speakers: ctx.speakers.map((s) =>
      countTokens(s) > SPEAKER_TOKEN_CAP ? truncateToTokens(s, SPEAKER_TOKEN_CAP) : s,
    ),
    recentRecords: [...ctx.recentRecords],
  };
  while (contextTokens(out) > cap && out.recentRecords.length > 0) out.recentRecords.shift();
  while (contextTokens(out) > cap) {
    const k = Object.keys(out.aliases)[0];
    if (k === undefined) break;
    delete out.aliases[k];
  }
  while (contextTokens(out) > cap) {
    const k = Object.keys(out.referents)[0];
    if (k === undefined) break;
    delete out.referents[k];
  }
  while (contextTokens(out) > cap && out.speakers.length > 0) {
    if (out.speakers.length > 1) out.speakers.shift();
    else {
      const s = out.speakers[0]!;
      const t = Math.max(0, countTokens(s) - 8);
      out.speakers[0] = t > 0 ? truncateToTokens(s, t) : "";
      if (t === 0) out.speakers = [];
    }
  }
  return out;
};
