/**
 * Deterministic record extractor (no LLM): segment + disambiguation context -> self-contained
 * records + the next context. Pure and deterministic: no clock, no randomness, no I/O.
 *
 * Record text: "<Speaker> (<YYYY-MM-DD said>): <statement>" (core/text/record-text.ts writes and
 * parses it) where the statement has first and second person resolved to names, he/she resolved
 * when one clear referent exists, and every date expression replaced by an absolute one ("on
 * 2023-01-19", "in December 2022", "in the week of 2023-02-20"). A question of the other speaker
 * that the turn answers is kept as context: "<Speaker> (<date>), asked by <Asker> "<resolved
 * question>": <statement>".
 */
import { recordId } from "../core/ids.ts";
import { KIN_FEMALE, KIN_MALE, KIN_NEUTRAL, KIN_PLURAL } from "../core/text/lexicon.ts";
import { recordText } from "../core/text/record-text.ts";
import { wordCount } from "../core/text/words.ts";
import type { DisambiguationContext, Entity, MemoryRecord, Segment, SegmentTurn } from "../core/types.ts";
import { classify, contentWords, isPhatic, isQuestion } from "./classify.ts";
import { capContext, emptyContext } from "./context.ts";
import { applyDates, type DateMention, findDates, isoDay, timeOf } from "./dates.ts";
import { aliasOf, type EntityKind, findNames, type Gender, midSentenceCaps, type NameMention } from "./entities.ts";
import { type PronounFrame, possessive, resolvePronouns, restoreSubject } from "./pronouns.ts";
import { extractPhotos, splitSentences, stripInnerVocatives, stripVocatives } from "./sentences.ts";
import { topicsOf } from "./topics.ts";

export { emptyContext };

export interface ExtractorOptions {
  /** Hard cap on the context's size: countTokens(JSON.stringify(context)). Default 300. */
  contextTokenCap: number;
  /** How many of the latest record texts the context keeps. Default 5. */
  recentRecords: number;
}

export const DEFAULT_EXTRACTOR_OPTIONS: ExtractorOptions = { contextTokenCap: 300, recentRecords: 5 };

/** Statements longer than this (in words) start a new record at the next full sentence. */
const CHUNK_WORDS = 40;
/** A sentence with fewer content words is a fragment: it joins its neighbour's record. */
const FRAGMENT_CONTENT_WORDS = 3;
/** Folded questions longer than this (in words) keep only their last sentence. */
const QUESTION_WORDS = 40;

interface Sentence {
  /** Cleaned original sentence (vocatives stripped). */
  raw: string;
  /** Resolved text: absolute dates, pronouns replaced. */
  text: string;
  question: boolean;
  phatic: boolean;
  photo: boolean;
  content: number;
  dates: DateMention[];
  names: NameMention[];
}

interface TurnWork {
  turn: SegmentTurn;
  sentences: Sentence[];
}

interface Candidate {
  name: string;
  gender?: Gender | "pl";
  at: number;
  /** Index of the turn that mentioned it (plural referents look back a few turns, not sentences). */
  turn?: number;
}

const NAME_SHAPE = /^\p{Lu}[\p{L}'-]*(?: \p{Lu}[\p{L}'-]*)*$/u;
const KIN_PHRASE =
  /\b(my|your)\s+((?:(?:little|big|older|younger|baby|twin|best|new|late|eldest|oldest|youngest|step)\s+)?)(\p{L}+)/giu;
/** "our kids", "the kids": a group that a later "they" names (the speaker's own for "our"). */
const GROUP_PHRASE = /\b(our|the)\s+((?:(?:little|older|younger|twin|new|two|three|2|3)\s+)?)(\p{L}+)/giu;
/**
 * A plural noun phrase ("the young people", "all the challenges", "these books") before a "they":
 * the nearer antecedent, so the group named turns earlier is not.
 */
const NEARER_PLURAL =
  /\b(?:the|these|those|all|some|many|other|such|both)\s+(?:\p{L}+\s+)?(people|men|women|\p{L}{2,}[^s\W]s)\b/giu;
/** Does the text name a plural thing other than a group of people the speakers know (kids, friends)? */
const hasNearerPlural = (text: string): boolean => {
  for (const m of text.matchAll(NEARER_PLURAL)) if (!KIN_PLURAL.has(m[1]!.toLowerCase())) return true;
  return false;
};
const THEY_WORD = /\b(?:they|them|their|theirs|themselves|they're|they've|they'll|they'd)\b/i;
/** How many turns back a plural referent stays a candidate for "they". */
const PLURAL_TURNS = 2;
const WE_CLEAR =
  /\b(?:together|both of us|you and i|you and me|me and you|each other|let's|shall we|we should|we could|we both|our chat|our talk|our conversation)\b/i;
/**
 * A question about the addressee and others ("what do you do with them?", "how do you spend time
 * with your kids?"): the answer's "we" is the answerer and those others, not the two speakers,
 * even with "together".
 */
const ASKS_WITH_OTHERS = /\byou\b[^?]*\bwith (?:them|your \p{L}+)\b[^?]*\?/iu;
const YES_NO = /^(?:yes|yeah|yep|yup|sure|of course|absolutely|definitely|no|nope|nah|not really)\b/i;

const unique = <T>(xs: readonly T[]): T[] => [...new Set(xs)];
const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const finish = (s: string): string => {
  const t = s.trim().replace(/\s+([,.!?;:])/g, "$1");
  const c = t.length > 0 ? t.charAt(0).toUpperCase() + t.slice(1) : t;
  return /[.!?]["')]*$/.test(c) ? c : `${c}.`;
};

/** Set a key at the end of an insertion-ordered record (so the oldest key is evicted first). */
const refresh = (obj: Record<string, string>, key: string, value: string): void => {
  delete obj[key];
  obj[key] = value;
};

export function extractRecords(
  segment: Segment,
  context: DisambiguationContext,
  opts?: Partial<ExtractorOptions>,
): { records: MemoryRecord[]; context: DisambiguationContext } {
  const cfg: ExtractorOptions = { ...DEFAULT_EXTRACTOR_OPTIONS, ...opts };
  const ctx: DisambiguationContext = {
    aliases: { ...context.aliases },
    referents: { ...context.referents },
    speakers: [...context.speakers],
    recentRecords: [...context.recentRecords],
  };

  const segSpeakers = unique(segment.turns.map((t) => t.speaker));
  const knownSpeakers = unique([...ctx.speakers, ...segSpeakers]);
  const people = new Set<string>(knownSpeakers);
  for (const v of Object.values(ctx.referents)) if (NAME_SHAPE.test(v)) people.add(v);
  for (const v of Object.values(ctx.aliases)) if (people.has(v) || NAME_SHAPE.test(v)) people.add(v);
  const nameWords = (): Set<string> => {
    const s = new Set<string>();
    for (const n of [...people, ...Object.keys(ctx.aliases)]) for (const w of n.toLowerCase().split(/\s+/)) s.add(w);
    return s;
  };

  const addresseeOf = (speaker: string): string | undefined => {
    const others = segSpeakers.filter((s) => s !== speaker);
    if (others.length === 1) return others[0];
    if (others.length === 0) {
      const fromCtx = ctx.speakers.filter((s) => s !== speaker);
      if (fromCtx.length === 1) return fromCtx[0];
    }
    return undefined;
  };

  const canonical = (name: string): string => {
    if (ctx.aliases[name]) return ctx.aliases[name]!;
    const c = aliasOf(name, [...people]);
    if (c) {
      refresh(ctx.aliases, name, c);
      return c;
    }
    return name;
  };

  // Pass 0: split every turn, so that proper nouns seen mid-sentence anywhere in the segment
  // count as names at the start of a sentence too.
  const split = segment.turns.map((turn) => {
    const { body, captions } = extractPhotos(turn.text);
    return { turn, body: splitSentences(body), captions };
  });
  const midCaps = midSentenceCaps(split.flatMap((t) => t.body));
  // Short forms of the speakers' names used anywhere in the segment ("Mel" for "Melanie").
  for (const t of split)
    for (const sentence of t.body)
      for (const w of sentence.match(/\p{Lu}\p{Ll}+/gu) ?? []) {
        if (people.has(w) || ctx.aliases[w]) continue;
        const c = aliasOf(w, knownSpeakers);
        if (c) refresh(ctx.aliases, w, c);
      }
  /** Does turn i answer the previous turn's question about its speaker and others? */
  const answersWithOthers = (i: number): boolean => {
    const prev = split[i - 1];
    if (!prev || prev.turn.speaker === split[i]!.turn.speaker) return false;
    const last = prev.body.at(-1);
    return last !== undefined && ASKS_WITH_OTHERS.test(last);
  };
  const vocativeNames = (): string[] => [...people, ...Object.keys(ctx.aliases)];

  // Third-person referents: explicit context values, then what this segment mentions.
  const refs: { he?: string; she?: string; they?: string } = {};
  if (ctx.referents.he) refs.he = ctx.referents.he;
  if (ctx.referents.she) refs.she = ctx.referents.she;
  if (ctx.referents.they) refs.they = ctx.referents.they;
  const genderOf = new Map<string, Gender>();
  if (refs.he) genderOf.set(refs.he, "m");
  if (refs.she) genderOf.set(refs.she, "f");
  const recent: Candidate[] = [];
  let g = 0;
  let turnIndex = 0;
  /** The turn's sentence before the one analysed ("" at the turn's start). */
  let previousRaw = "";

  /** Plural referents (groups of people) mentioned from turn `turn` on. */
  const groupsSince = (turn: number): Candidate[] => recent.filter((c) => c.gender === "pl" && (c.turn ?? -1) >= turn);

  const pick = (gender: Gender): string | undefined => {
    const window = recent.filter(
      (c) => c.at >= g - 1 && c.gender !== "pl" && c.gender !== (gender === "f" ? "m" : "f"),
    );
    const explicit = unique(window.filter((c) => c.gender === gender).map((c) => c.name));
    if (explicit.length === 1) return explicit[0];
    const all = unique(window.map((c) => c.name));
    if (all.length === 1) return all[0];
    if (all.length === 0) return gender === "f" ? refs.she : refs.he;
    return undefined;
  };

  const analyse = (turn: SegmentTurn, rawSentence: string): Sentence => {
    const S = turn.speaker;
    const A = addresseeOf(S);
    const addressed = A ? [A, ...Object.keys(ctx.aliases).filter((k) => ctx.aliases[k] === A)] : [];
    const cleaned = stripInnerVocatives(stripVocatives(rawSentence, vocativeNames()), addressed);
    const question = isQuestion(cleaned);
    const raw = question ? cleaned : restoreSubject(cleaned);
    const names = findNames(raw, { people, midCaps }).map((m) => ({ ...m, name: canonical(m.name) }));
    for (const m of names) {
      if (m.kind === "person" || people.has(m.name)) {
        if (!knownSpeakers.includes(m.name)) people.add(m.name);
      }
    }
    const phatic = raw.length === 0 || isPhatic(raw, nameWords());
    const content = contentWords(raw, nameWords()).length;
    // Candidates for he/she/they: named non-speaker people, and kinship phrases ("my sister").
    for (const m of names) {
      if (knownSpeakers.includes(m.name) || !people.has(m.name)) continue;
      const gender = m.gender ?? genderOf.get(m.name);
      if (m.gender) genderOf.set(m.name, m.gender);
      recent.push(gender ? { name: m.name, gender, at: g } : { name: m.name, at: g });
      if (gender === "f") refs.she = m.name;
      if (gender === "m") refs.he = m.name;
    }
    for (const k of raw.matchAll(KIN_PHRASE)) {
      const owner = k[1]!.toLowerCase() === "my" ? S : A;
      if (!owner) continue;
      const word = k[3]!.toLowerCase();
      if (!KIN_FEMALE.has(word) && !KIN_MALE.has(word) && !KIN_PLURAL.has(word) && !KIN_NEUTRAL.has(word)) continue;
      const phrase = `${owner}'s ${k[2]!.toLowerCase()}${word}`;
      const after = raw.slice((k.index ?? 0) + k[0].length);
      const named = names.find((n) => after.trimStart().startsWith(n.name) && /^,?\s+\p{Lu}/u.test(after));
      if (named) {
        refresh(ctx.referents, phrase, named.name);
        continue;
      }
      if (KIN_FEMALE.has(word)) {
        recent.push({ name: phrase, gender: "f", at: g });
        refs.she = phrase;
      } else if (KIN_MALE.has(word)) {
        recent.push({ name: phrase, gender: "m", at: g });
        refs.he = phrase;
      } else if (KIN_PLURAL.has(word)) {
        recent.push({ name: phrase, gender: "pl", at: g, turn: turnIndex });
        refs.they = phrase;
      }
    }
    for (const k of raw.matchAll(GROUP_PHRASE)) {
      const word = k[3]!.toLowerCase();
      if (!KIN_PLURAL.has(word)) continue;
      const lead = k[1]!.toLowerCase() === "our" ? possessive(S) : "the";
      const phrase = `${lead} ${k[2]!.toLowerCase()}${word}`;
      recent.push({ name: phrase, gender: "pl", at: g, turn: turnIndex });
      refs.they = phrase;
    }
    const frame: PronounFrame = { speaker: S };
    if (A) frame.addressee = A;
    const lower = raw.toLowerCase();
    const usesHe = /\b(?:he|him|his|himself|he's|he'll|he'd)\b/.test(lower);
    const usesShe = /\b(?:she|her|hers|herself|she's|she'll|she'd)\b/.test(lower);
    const he = pick("m");
    const she = pick("f");
    // One person of unknown gender is a candidate for both: the pronoun used decides.
    if (he && (he !== she || !usesShe)) frame.he = he;
    if (she && (she !== he || !usesHe)) frame.she = she;
    const theyAt = raw.search(THEY_WORD);
    if (theyAt >= 0) {
      const before = raw.slice(0, theyAt);
      // "my husband and kids; they": a coordination before the pronoun is its antecedent.
      const nearer =
        /\band\s+(?:\p{L}+\s+)?\p{L}+[^\p{L}]*$/iu.test(before) ||
        hasNearerPlural(before) ||
        hasNearerPlural(previousRaw);
      // A group named in an earlier turn is "they" only at the turn's start: later sentences may
      // have brought other things that "they" names ("find an agency or a lawyer. They'll help").
      const reach = previousRaw === "" ? turnIndex - PLURAL_TURNS : turnIndex;
      const groups = groupsSince(reach);
      // Nearest first: a group of this sentence, then of the one before, then of the last turns.
      // "Melanie's kids" then "the kids" are one group, named as it was last named.
      const named = (from: number): string[] => {
        const latestByNoun = new Map<string, string>();
        for (const c of groups) if (c.at >= from) latestByNoun.set(c.name.split(" ").at(-1)!, c.name);
        return unique([...latestByNoun.values()]);
      };
      const plural = nearer ? [] : ([named(g), named(g - 1), named(0)].find((list) => list.length > 0) ?? []);
      if (plural.length === 1) {
        frame.they = plural[0];
        // Named again by this "they": the group stays the referent for the turn's next sentences.
        recent.push({ name: plural[0]!, gender: "pl", at: g, turn: turnIndex });
      }
    }
    if (answersWithOthers(turnIndex)) {
      // The others are the group of the last turns when there is one ("the kids"), else unnamed.
      const groups = unique(groupsSince(turnIndex - PLURAL_TURNS).map((c) => c.name));
      if (groups.length === 1) frame.we = `${S} and ${groups[0]}`;
    } else if (A && WE_CLEAR.test(raw)) frame.we = `${S} and ${A}`;
    if (frame.she && usesShe) {
      refs.she = frame.she;
      if (NAME_SHAPE.test(frame.she)) genderOf.set(frame.she, "f");
    }
    if (frame.he && usesHe) {
      refs.he = frame.he;
      if (NAME_SHAPE.test(frame.he)) genderOf.set(frame.he, "m");
    }
    previousRaw = raw;
    const dates = findDates(raw, turn.timestamp);
    const text = finish(resolvePronouns(applyDates(raw, dates), frame));
    g++;
    return { raw, text, question, phatic, photo: false, content, dates, names };
  };

  const work: TurnWork[] = split.map(({ turn, body, captions }) => {
    const sentences = body.map((s) => analyse(turn, s));
    turnIndex++;
    previousRaw = "";
    for (const c of captions) {
      const text = finish(`${turn.speaker} shared a photo of ${c}`);
      sentences.push({
        raw: text,
        text,
        question: false,
        phatic: false,
        photo: true,
        content: 1,
        dates: [],
        names: [],
      });
    }
    return { turn, sentences };
  });

  // Questions answered by the next turn of another speaker: folded into the answer's record.
  const folded = new Map<number, { asker: SegmentTurn; text: string; dates: DateMention[]; names: NameMention[] }>();
  work.forEach((w, i) => {
    const next = work[i + 1];
    if (!next || next.turn.speaker === w.turn.speaker) return;
    const trailing: Sentence[] = [];
    for (let k = w.sentences.length - 1; k >= 0; k--) {
      const s = w.sentences[k]!;
      if (s.photo) continue;
      if (!s.question && !s.phatic) break;
      if (s.question && !s.phatic) trailing.unshift(s);
    }
    if (trailing.length === 0) return;
    let qs = trailing;
    if (wordCount(qs.map((s) => s.text).join(" ")) > QUESTION_WORDS) qs = qs.slice(-1);
    folded.set(i + 1, {
      asker: w.turn,
      text: qs.map((s) => s.text).join(" "),
      dates: qs.flatMap((s) => s.dates),
      names: qs.flatMap((s) => s.names),
    });
  });

  const records: MemoryRecord[] = [];
  const seen = new Set<string>();
  work.forEach((w, i) => {
    const { turn } = w;
    const informative = w.sentences.filter((s) => !s.phatic && !s.question);
    const chunks: Sentence[][] = [];
    let cur: Sentence[] = [];
    let curWords = 0;
    let curTime = "";
    for (const s of informative) {
      const t = s.dates.length > 0 ? JSON.stringify(timeOf(s.dates)) : "";
      const fragment = s.content < FRAGMENT_CONTENT_WORDS && !s.photo;
      if (cur.length > 0 && !fragment && (curWords >= CHUNK_WORDS || (t && curTime && t !== curTime))) {
        chunks.push(cur);
        cur = [];
        curWords = 0;
        curTime = "";
      }
      cur.push(s);
      curWords += wordCount(s.raw);
      if (t) curTime = t;
    }
    if (cur.length > 0) chunks.push(cur);

    const q = folded.get(i);
    const day = isoDay(Date.parse(turn.timestamp));
    if (chunks.length === 0 && q) {
      // A bare yes/no answer keeps the question, which carries the content.
      const first = w.sentences[0];
      const m = first ? YES_NO.exec(first.raw) : null;
      if (m && first) chunks.push([{ ...first, dates: [] }]);
    }
    chunks.forEach((chunk, ci) => {
      const withQ = ci === 0 ? q : undefined;
      const body = chunk.map((s) => s.text).join(" ");
      const text = recordText(
        turn.speaker,
        day,
        body,
        withQ ? { speaker: withQ.asker.speaker, question: withQ.text } : undefined,
      );
      const id = recordId(segment.tenant, text);
      if (seen.has(id)) return;
      seen.add(id);
      const dates = [...(withQ?.dates ?? []), ...chunk.flatMap((s) => s.dates)];
      const time = timeOf(dates);
      const photoOnly = chunk.every((s) => s.photo);
      const rawText = chunk.map((s) => s.raw).join(" ");
      const speakers = withQ ? unique([withQ.asker.speaker, turn.speaker]) : [turn.speaker];
      const turnIds = withQ ? [withQ.asker.turnId, turn.turnId] : [turn.turnId];
      const entities = entitiesOf(
        text,
        speakers,
        [...(withQ?.names ?? []), ...chunk.flatMap((s) => s.names)],
        people,
        ctx.aliases,
      );
      const exclude = new Set<string>();
      for (const e of entities)
        for (const n of [e.name, ...e.aliases]) for (const x of n.toLowerCase().split(/\s+/)) exclude.add(x);
      const topics = topicsOf(`${withQ ? withQ.text : ""} ${body}`, exclude);
      records.push({
        id,
        type: classify(`${withQ ? "" : ""}${rawText}`, time, turn.timestamp, photoOnly),
        text,
        entities,
        topics,
        time,
        source: {
          tenant: segment.tenant,
          conversation: segment.conversation,
          segmentId: segment.id,
          turnIds,
          speakers,
          sessionId: segment.sessionId,
          saidAt: turn.timestamp,
        },
        valid: { from: turn.timestamp },
      });
    });
  });

  // Context after the segment.
  if (refs.he) refresh(ctx.referents, "he", refs.he);
  if (refs.she) refresh(ctx.referents, "she", refs.she);
  if (refs.they) refresh(ctx.referents, "they", refs.they);
  const order = [...ctx.speakers, ...segment.turns.map((t) => t.speaker)];
  const lastTwo: string[] = [];
  for (let k = order.length - 1; k >= 0 && lastTwo.length < 2; k--) {
    const s = order[k]!;
    if (!lastTwo.includes(s)) lastTwo.unshift(s);
  }
  ctx.speakers = lastTwo;
  ctx.recentRecords = [...ctx.recentRecords, ...records.map((r) => r.text)].slice(-Math.max(0, cfg.recentRecords));
  if (cfg.recentRecords <= 0) ctx.recentRecords = [];
  return { records, context: capContext(ctx, cfg.contextTokenCap) };
}

const KIND_RANK: Record<EntityKind, number> = { person: 4, organisation: 3, place: 2, object: 1, other: 0 };

/** Speakers, names mentioned, and known people the resolved text names; aliases from the context. */
const entitiesOf = (
  text: string,
  speakers: readonly string[],
  mentions: readonly NameMention[],
  people: ReadonlySet<string>,
  aliases: Readonly<Record<string, string>>,
): Entity[] => {
  const byName = new Map<string, EntityKind>();
  const add = (name: string, kind: EntityKind): void => {
    const prev = byName.get(name);
    if (prev === undefined || KIND_RANK[kind] > KIND_RANK[prev]) byName.set(name, kind);
  };
  for (const s of speakers) add(s, "person");
  for (const m of mentions) add(m.name, people.has(m.name) ? "person" : m.kind);
  for (const p of [...people].sort()) {
    if (byName.has(p)) continue;
    if (new RegExp(`(?<![\\p{L}])${escapeRe(p)}(?![\\p{L}])`, "u").test(text)) add(p, "person");
  }
  const aliasList = Object.entries(aliases);
  return [...byName.entries()].map(([name, kind]) => ({
    name,
    kind,
    aliases: aliasList
      .filter(([, c]) => c === name)
      .map(([a]) => a)
      .sort(),
  }));
};
