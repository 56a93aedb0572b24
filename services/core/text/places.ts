/**
 * Place containment (issue 15): a question that names a region (a country, or a state or
 * province) should find the turns that name a place inside it ("in Washington" → "Seattle"). The
 * gazetteer is country-state-city's; it only resolves names, and the expansion goes only into the
 * names the caller passes (the tenant's entity keys), so it is bounded by what the tenant said.
 *
 * Loading is lazy and in two steps: the countries and states (about 0.6 MB of JSON) when a text
 * is first searched for region names, the cities (8 MB) only when a region was named. The cities
 * are read as the package stores them (rows of name, country code, state code, latitude,
 * longitude) and kept as name keys per state: its City API turns all 148,000 rows into objects
 * (three times as long as the parse) and keeps them.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { ICountry, IState } from "country-state-city/lib/cjs/interface.js";
import { LruCache } from "../lru-cache.ts";

const require = createRequire(import.meta.url);

/** Most place names one question is expanded into. */
export const MAX_PLACES = 16;
/** Longest region name looked for, in words. */
const MAX_REGION_WORDS = 5;
/** Words that may stand lower-case inside a region name ("Isle of Man", "Trinidad and Tobago"). */
const CONNECTORS = new Set(["of", "and", "the", "de", "del", "da", "do", "du", "la", "le", "upon", "on"]);
/** Region names that are common words first ("North" is a region of two countries): never a region. */
const NOT_REGIONS = new Set(
  "north south east west central centre center capital northern southern eastern western middle upper lower coast island islands national federal".split(
    " ",
  ),
);
/** Other names of countries people use. */
const COUNTRY_ALIASES: Record<string, string> = {
  us: "US",
  usa: "US",
  "u.s.": "US",
  "u.s.a.": "US",
  america: "US",
  uk: "GB",
  "u.k.": "GB",
  britain: "GB",
  "great britain": "GB",
};

export interface Region {
  kind: "country" | "state";
  /** The gazetteer's name. */
  name: string;
  countryCode: string;
  /** For a state: its code within the country. */
  stateCode?: string;
}

const PLAIN = /^[A-Za-z .-]*$/;

/** Names compared without case, diacritics or extra spaces ("Liège" = "liege"). */
export const placeKey = (name: string): string =>
  // Most gazetteer names are plain ASCII: lower-casing is all they need (a country's cities are tens of thousands).
  PLAIN.test(name) && !name.includes("  ")
    ? name.toLowerCase().trim()
    : name
        .normalize("NFD")
        .replace(/\p{M}+/gu, "")
        .toLowerCase()
        .replace(/[’`]/g, "'")
        .replace(/'s$/, "")
        .replace(/\s+/g, " ")
        .trim();

let regionIndex: Map<string, Region[]> | undefined;

/** Countries and states by name key, loaded on first use. */
const regions = (): Map<string, Region[]> => {
  if (regionIndex) return regionIndex;
  const countries = (require("country-state-city/lib/cjs/country.js") as { default: { getAllCountries(): ICountry[] } })
    .default;
  const states = (require("country-state-city/lib/cjs/state.js") as { default: { getAllStates(): IState[] } }).default;
  const index = new Map<string, Region[]>();
  const add = (key: string, region: Region) => {
    if (NOT_REGIONS.has(key)) return;
    const list = index.get(key) ?? [];
    list.push(region);
    index.set(key, list);
  };
  const byCode = new Map<string, ICountry>();
  for (const c of countries.getAllCountries()) {
    byCode.set(c.isoCode, c);
    add(placeKey(c.name), { kind: "country", name: c.name, countryCode: c.isoCode });
  }
  for (const [alias, code] of Object.entries(COUNTRY_ALIASES)) {
    const c = byCode.get(code);
    if (c) add(alias, { kind: "country", name: c.name, countryCode: c.isoCode });
  }
  for (const s of states.getAllStates())
    add(placeKey(s.name), { kind: "state", name: s.name, countryCode: s.countryCode, stateCode: s.isoCode });
  regionIndex = index;
  return index;
};

/** A word as written: a region name must be a proper noun, so every word but a connector starts upper-case. */
const isCapitalised = (word: string): boolean => /^\p{Lu}/u.test(word);

/**
 * The regions a text names: runs of up to five words, each capitalised (or a connector inside the
 * run), that are a country's or a state's name or a common alias ("USA", "UK"). A name shared by a
 * country and a state (Georgia) gives both. Longer runs are matched first and their words not
 * again ("New South Wales", not "Wales" too).
 */
export const regionsNamed = (text: string): Region[] => {
  const words = text.match(/[\p{L}\p{N}][\p{L}\p{N}.'’-]*/gu) ?? [];
  // A possessive and a full stop after a word go; an abbreviation keeps its dots ("U.S.").
  const clean = words
    .map((w) => w.replace(/['’]s$/u, ""))
    .map((w) => (/^(\p{L}\.)+$/u.test(w) ? w : w.replace(/\.+$/u, "")));
  const index = regions();
  const found = new Map<string, Region>();
  const used = new Set<number>();
  for (let n = Math.min(MAX_REGION_WORDS, clean.length); n >= 1; n--)
    for (let i = 0; i + n <= clean.length; i++) {
      const run = clean.slice(i, i + n);
      if (run.some((_, j) => used.has(i + j))) continue;
      const first = run[0] as string;
      const last = run[n - 1] as string;
      if (!isCapitalised(first) || !isCapitalised(last)) continue;
      if (!run.every((w) => isCapitalised(w) || CONNECTORS.has(w))) continue;
      // Two-letter aliases only as written in capitals ("US", never the pronoun "Us").
      if (n === 1 && first.replace(/\./g, "").length <= 2 && first !== first.toUpperCase()) continue;
      const hits = index.get(placeKey(run.join(" ")));
      if (!hits) continue;
      for (const r of hits) found.set(`${r.kind}:${r.countryCode}:${r.stateCode ?? ""}`, r);
      for (let j = 0; j < n; j++) used.add(i + j);
    }
  return [...found.values()];
};

/** A row of the package's city file: name, country code, state code, latitude, longitude. */
type CityRow = readonly [string, string, string, ...unknown[]];

/**
 * Name keys of the cities of each state ("US:WA"), built once from the city file. The file is read
 * and parsed here, not required: the parsed rows (about 50 MB of arrays with coordinates) are
 * dropped once the index (the names only) is built.
 */
let citiesByState: Map<string, Set<string>> | undefined;
/** Name keys of the cities of a country (the union of its states'), by country, as asked. */
const citiesByCountry = new LruCache<string, ReadonlySet<string>>(16);

const cityIndex = (): Map<string, Set<string>> => {
  if (citiesByState) return citiesByState;
  const rows = JSON.parse(readFileSync(require.resolve("country-state-city/lib/assets/city.json"), "utf8")) as unknown;
  const valid =
    Array.isArray(rows) &&
    rows.length > 0 &&
    Array.isArray(rows[0]) &&
    (rows[0] as unknown[]).slice(0, 3).every((v) => typeof v === "string");
  if (!valid) throw new Error("country-state-city: city.json is not rows of [name, countryCode, stateCode, …]");
  const index = new Map<string, Set<string>>();
  for (const [name, countryCode, stateCode] of rows as CityRow[]) {
    const id = `${countryCode}:${stateCode}`;
    let keys = index.get(id);
    if (!keys) {
      keys = new Set();
      index.set(id, keys);
    }
    keys.add(placeKey(name));
  }
  citiesByState = index;
  return index;
};

/** Name keys of the cities inside a region: a state's from the index, a country's as the union of its states'. */
const citiesIn = (region: Region): ReadonlySet<string> => {
  const index = cityIndex();
  if (region.stateCode !== undefined) return index.get(`${region.countryCode}:${region.stateCode}`) ?? new Set();
  const cached = citiesByCountry.get(region.countryCode);
  if (cached) return cached;
  const keys = new Set<string>();
  const prefix = `${region.countryCode}:`;
  for (const [id, names] of index) if (id.startsWith(prefix)) for (const k of names) keys.add(k);
  citiesByCountry.set(region.countryCode, keys);
  return keys;
};

/**
 * Of the names, those of a place inside one of the regions: a city of a named state, a city or a
 * state of a named country. A name that is itself one of the regions is not "inside" it. At most
 * `limit`, in the order given.
 */
export const placesWithin = (regionList: readonly Region[], names: readonly string[], limit = MAX_PLACES): string[] => {
  if (regionList.length === 0 || names.length === 0) return [];
  const regionKeys = new Set(regionList.map((r) => placeKey(r.name)));
  const states = regions();
  const out: string[] = [];
  for (const name of names) {
    if (out.length >= limit) break;
    const key = placeKey(name);
    if (key.length === 0 || regionKeys.has(key)) continue;
    const inside = regionList.some(
      (region) =>
        citiesIn(region).has(key) ||
        (region.kind === "country" &&
          (states.get(key) ?? []).some((s) => s.kind === "state" && s.countryCode === region.countryCode)),
    );
    if (inside) out.push(name);
  }
  return out;
};
