/**
 * Names (entities, speakers, subjects) as the text analysis compares them: a normalised key, and
 * a pattern that finds a name as a whole word in a text.
 */

/** Normalised key for names (entities, subjects): NFKC, lower case, no possessive "'s", single spaces. */
export const nameKey = (s: string): string =>
  s.normalize("NFKC").toLowerCase().replace(/[’`]/g, "'").replace(/'s$/, "").replace(/\s+/g, " ").trim();

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The name as a whole word (no letter or digit on either side), matched literally; `flags` must include "u". */
export const namePattern = (name: string, flags: string): RegExp =>
  new RegExp(`(?<![\\p{L}\\p{N}])${escapeRe(name)}(?![\\p{L}\\p{N}])`, flags);
