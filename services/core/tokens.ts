import { Tiktoken } from "js-tiktoken/lite";
import o200k from "js-tiktoken/ranks/o200k_base";
import { GenerationalMemo } from "./generational-memo.ts";

/**
 * o200k_base token counting (the GPT-4o family tokenizer) in time linear in the text.
 *
 * js-tiktoken splits the text with o200k's pre-tokenizer regex and runs byte-pair merging on each
 * piece; its merge loop is quadratic in the piece's bytes, so one long unbroken piece (100,000 "x",
 * a paragraph of Chinese without punctuation, a base64 blob) blocks the event loop for minutes.
 * Here the same regex splits the text, and a piece longer than MAX_PIECE_CODE_POINTS is cut into
 * chunks of that many code points (never inside a surrogate pair) that are merged one by one, so
 * the merge work per piece is bounded and the total is linear.
 *
 * Exactness: on text whose pre-tokenizer pieces are all at most MAX_PIECE_CODE_POINTS long (every
 * ordinary word, number group and punctuation run; the tests check the LoCoMo turns) the ids are
 * exactly js-tiktoken's. Only a longer piece can differ: merges across a chunk boundary are not
 * made, so its count can be a few tokens higher than the exact tokenizer's (at most about one per
 * chunk). Special-token strings such as "<|endoftext|>" in user text are encoded as ordinary text
 * (js-tiktoken would throw on them).
 */

/** Longest pre-tokenizer piece merged as a whole; longer ones are merged in chunks of this size. */
export const MAX_PIECE_CODE_POINTS = 64;

let encoder: Tiktoken | undefined;
const enc = (): Tiktoken => {
  encoder ??= new Tiktoken(o200k);
  return encoder;
};

const PRE_TOKENIZER = new RegExp(o200k.pat_str, "gu");

/** Token ids of bounded pieces: words repeat, so most lookups skip the merge loop. */
const pieceIds = new GenerationalMemo<string, readonly number[]>(50_000);
/** Counts of whole texts: packing counts the same candidate texts again on every query. */
const textCounts = new GenerationalMemo<string, number>(20_000);
/** Texts longer than this are not kept in the count cache (their count is linear to redo anyway). */
const MAX_CACHED_TEXT = 8_192;

/** js-tiktoken's byte-sequence -> rank map (keys are the bytes joined by ","), read from its encoder. */
const rankMap = (): Map<string, number> => {
  const ranks = (enc() as unknown as { rankMap?: unknown }).rankMap;
  if (!(ranks instanceof Map)) throw new Error("js-tiktoken has no rankMap: tokens.ts needs updating for this version");
  return ranks as Map<string, number>;
};

const utf8 = new TextEncoder();

const bytesKey = (bytes: Uint8Array, start: number, end: number): string => {
  let key = String(bytes[start]);
  for (let i = start + 1; i < end; i++) key += `,${bytes[i]}`;
  return key;
};

/**
 * Byte-pair merging of one piece, the reference (tiktoken's) algorithm: repeatedly merge the
 * adjacent pair with the lowest rank, leftmost on ties. Unlike js-tiktoken's loop, which rebuilds
 * every pair's key on each round, only the two pairs next to a merge are looked up again; still
 * quadratic in the piece's bytes, which is why pieces are bounded.
 */
const bytePairEncode = (piece: string): number[] => {
  const ranks = rankMap();
  const bytes = utf8.encode(piece);
  const whole = ranks.get(bytesKey(bytes, 0, bytes.length));
  if (whole !== undefined) return [whole];
  // starts[i] is where part i begins; the last entry is the end of the piece.
  const starts = Array.from({ length: bytes.length + 1 }, (_, i) => i);
  const pairRank = (i: number): number =>
    i + 2 < starts.length
      ? (ranks.get(bytesKey(bytes, starts[i] as number, starts[i + 2] as number)) ?? Infinity)
      : Infinity;
  const pairRanks = Array.from({ length: bytes.length }, (_, i) => pairRank(i));
  for (;;) {
    let best = -1;
    let bestRank = Infinity;
    for (let i = 0; i < pairRanks.length - 1; i++) {
      const r = pairRanks[i] as number;
      if (r < bestRank) {
        bestRank = r;
        best = i;
      }
    }
    if (best < 0) break;
    starts.splice(best + 1, 1);
    pairRanks.splice(best + 1, 1);
    pairRanks[best] = pairRank(best);
    if (best > 0) pairRanks[best - 1] = pairRank(best - 1);
  }
  const ids: number[] = [];
  for (let i = 0; i + 1 < starts.length; i++) {
    const id = ranks.get(bytesKey(bytes, starts[i] as number, starts[i + 1] as number));
    if (id !== undefined) ids.push(id);
  }
  return ids;
};

/** Ids of one piece of at most MAX_PIECE_CODE_POINTS code points; no special tokens recognised. */
const idsOfBoundedPiece = (piece: string): readonly number[] => {
  const hit = pieceIds.get(piece);
  if (hit) return hit;
  const ids = bytePairEncode(piece);
  pieceIds.set(piece, ids);
  return ids;
};

/** Chunks of at most `max` code points; a surrogate pair is never cut. */
export const chunkByCodePoints = (piece: string, max: number): string[] => {
  const out: string[] = [];
  let start = 0;
  let points = 0;
  for (let i = 0; i < piece.length; i++) {
    const code = piece.charCodeAt(i);
    // A high surrogate followed by a low one is one code point: step over both.
    if (code >= 0xd800 && code <= 0xdbff && i + 1 < piece.length) {
      const next = piece.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    points++;
    if (points === max) {
      out.push(piece.slice(start, i + 1));
      start = i + 1;
      points = 0;
    }
  }
  if (start < piece.length) out.push(piece.slice(start));
  return out;
};

/**
 * Calls `visit` with the ids of each piece (or chunk of a long piece) in order; stops when it
 * returns false. Linear in the text: the regex scan is linear and each merge is bounded.
 */
const eachPieceIds = (text: string, visit: (ids: readonly number[]) => boolean): void => {
  for (const match of text.matchAll(PRE_TOKENIZER)) {
    const piece = match[0];
    // A piece of at most MAX code points has at most 2*MAX UTF-16 units; only longer ones need counting.
    if (piece.length <= MAX_PIECE_CODE_POINTS) {
      if (!visit(idsOfBoundedPiece(piece))) return;
      continue;
    }
    for (const chunk of chunkByCodePoints(piece, MAX_PIECE_CODE_POINTS)) if (!visit(idsOfBoundedPiece(chunk))) return;
  }
};

/** o200k_base token count; exact for ordinary text (see the module comment for long pieces). */
export const countTokens = (text: string): number => {
  if (text.length === 0) return 0;
  const cacheable = text.length <= MAX_CACHED_TEXT;
  if (cacheable) {
    const hit = textCounts.get(text);
    if (hit !== undefined) return hit;
  }
  let n = 0;
  eachPieceIds(text, (ids) => {
    n += ids.length;
    return true;
  });
  if (cacheable) textCounts.set(text, n);
  return n;
};

/** Longest prefix of text that fits in maxTokens, cut on a token boundary. Stops reading at the cut. */
export const truncateToTokens = (text: string, maxTokens: number): string => {
  const limit = Math.max(0, maxTokens);
  const kept: number[] = [];
  let over = false;
  eachPieceIds(text, (ids) => {
    for (const id of ids) {
      if (kept.length === limit) {
        over = true;
        return false;
      }
      kept.push(id);
    }
    return true;
  });
  return over ? enc().decode(kept) : text;
};
