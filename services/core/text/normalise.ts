/**
 * Normal forms of statement text: one spelling per word, lower case, no ISO dates or punctuation,
 * and a light stemmer, so that two wordings of the same fact compare equal word by word.
 */

const SPELLING: Record<string, string> = {
  favourite: "favorite",
  favourites: "favorites",
  colour: "color",
  colours: "colors",
  neighbour: "neighbor",
  neighbours: "neighbors",
  centre: "center",
  theatre: "theater",
  travelling: "traveling",
  travelled: "traveled",
  organise: "organize",
  organised: "organized",
  realise: "realize",
  realised: "realized",
  apologise: "apologize",
  practise: "practice",
  grey: "gray",
  mum: "mom",
  fave: "favorite",
};

/** Lower case, spelling variants unified, ISO dates and punctuation removed, words joined by one space. */
export const normaliseStatement = (text: string): string =>
  text
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[’`]/g, "'")
    .replace(/\b\d{4}-\d{2}-\d{2}\b/g, " ")
    .replace(/[^\p{L}\p{N}'\s]+/gu, " ")
    .split(/\s+/)
    .filter(Boolean)
    .map((w) => SPELLING[w] ?? w)
    .join(" ");

/** Light stemming: plural / -ing / -ed / -es and a final e dropped, so "lives", "living", "lived" meet. */
export const stem = (word: string): string => {
  let w = word.replace(/'s$/, "").replace(/'$/, "");
  if (w.length > 5 && w.endsWith("ies")) w = `${w.slice(0, -3)}y`;
  else if (w.length > 5 && w.endsWith("ing")) w = w.slice(0, -3);
  else if (w.length > 4 && w.endsWith("ed")) w = w.slice(0, -2);
  else if (w.length > 4 && /(?:ss|x|ch|sh)es$/.test(w)) w = w.slice(0, -2);
  else if (w.length > 3 && w.endsWith("s") && !/(?:ss|us|is)$/.test(w)) w = w.slice(0, -1);
  if (w.length > 3 && w.endsWith("e")) w = w.slice(0, -1);
  // Doubled final consonant of -ing/-ed forms ("planning" -> "plann" -> "plan").
  if (w.length > 3 && /([b-df-hj-np-tv-z])\1$/.test(w) && !/(?:ll|ss|ff|zz)$/.test(w)) w = w.slice(0, -1);
  return w;
};
