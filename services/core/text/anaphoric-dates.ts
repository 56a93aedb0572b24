/**
 * Dates told against another moment of the story, not against when they were said: "two days
 * later", "the week before the wedding", "the day after", "the next morning", "the following
 * week". chrono-node resolves each against its reference instant (the turn), so "we arrived on
 * Friday and left the next day" came out as the day after the turn, and "I sold my first piece the
 * year after" as next year: dates nobody said. The moment they count from is another event's, which
 * the sentence may not give; such an expression is no date, and its words stay as said.
 *
 * "The day before yesterday", "the week before last" and "the day after tomorrow" name their
 * anchor and are dates (chrono's and before-last.ts's results hold the whole phrase, so they never
 * end in a bare "before" or "after").
 */

const UNIT = "(?:days?|nights?|mornings?|afternoons?|evenings?|weeks?|weekends?|months?|years?)";

/** "two days later", "a year earlier", "a week afterwards": counted from a moment of the story. */
const COUNTED_FROM_STORY = /\b(?:later|earlier|afterwards?)$/i;
/** "the day after", "the week before", "a month before": the anchor follows, or was said before. */
const BEFORE_OR_AFTER = new RegExp(`\\b${UNIT}\\s+(?:before|after)$`, "i");
/** Words before a date that make it the story's: "the following week", "the previous weekend". */
const STORY_DETERMINER = /\b(?:following|previous|prior|preceding)\s*$/i;
/** A time unit named alone ("night" of "the night before", "weekend" of "the weekend after the trip"). */
const BARE_UNIT = new RegExp(`^(?:the\\s+)?${UNIT}$`, "i");
/** A part of a day named alone ("morning" of "the next morning"). */
const DAY_PART = /^(?:the\s+)?(?:day|night|morning|afternoon|evening)$/i;
/** "the next day" (of the story) against "next week" (of the speaker). */
const THE_NEXT_DAY = /^next\s+(?:day|night|morning|afternoon|evening)$/i;
const THE_NEXT_PERIOD = /^next\s+(?:week|weekend|month|year)$/i;

export interface DateHit {
  /** Where the expression starts in `sentence`. */
  index: number;
  /** The expression as chrono (or one of our parsers) matched it. */
  text: string;
}

/**
 * Whether a date expression counts from a moment of the story rather than from when it was said.
 * `pastNarrative`: the sentence tells of the past, where "the next week" is the week after the
 * events told (in a plan, "the next week" is next week).
 */
export const isAnaphoricDate = (hit: DateHit, sentence: string, pastNarrative: boolean): boolean => {
  const text = hit.text.trim();
  if (COUNTED_FROM_STORY.test(text) || BEFORE_OR_AFTER.test(text)) return true;
  const before = sentence.slice(0, hit.index);
  const after = sentence.slice(hit.index + hit.text.length);
  const withThe = /\bthe\s+$/i.test(before);
  // "the previous weekend" (chrono reads "weekend" alone); not "prior to 2020".
  if (BARE_UNIT.test(text) && STORY_DETERMINER.test(before)) return true;
  // "the weekend before the wedding"; not "a quiet weekend after we went camping" (a clause follows).
  if (BARE_UNIT.test(text) && (withThe || /^the\s/i.test(text)) && /^\s+(?:before|after)\b/i.test(after)) return true;
  if (DAY_PART.test(text) && /\bnext\s*$/i.test(before)) return true;
  if (withThe && THE_NEXT_DAY.test(text)) return true;
  return withThe && pastNarrative && THE_NEXT_PERIOD.test(text);
};
