/**
 * Composite keys: one string made of several names (tenant, conversation, turn id), used for keyed
 * stage state, Kafka message keys, state changelogs, dead-letter keys, raw-turn row ids and hash
 * inputs. A key must name exactly one tuple of parts, whatever characters the names hold: with a
 * plain join, tenant `acme`'s conversation `eu/c1` and tenant `acme/eu`'s conversation `c1` were
 * the same key.
 *
 * The encoding: every part but the last is escaped (`%` becomes `%25`, and every character of the
 * separator its `%XX` code), the last part is kept verbatim, and the parts are joined by the
 * separator. An escaped part cannot contain the separator, so the first separator in a key ends the
 * first part, and so on: the key splits back into exactly the parts it was made of. Names without
 * `%` or separator characters are unchanged by the escaping, so keys of such names keep the format
 * they had before (state stored under them is still found).
 */

/** Separator of tenant and conversation in partition and state keys: `tenant/conversation`. */
export const CONVERSATION_KEY_SEPARATOR = "/";
/** Separator of conversation and turn id in a raw turn's row id: `conversation::turnId`. */
export const TURN_ROW_SEPARATOR = "::";
/** Separator of the parts hashed into a content-derived id. */
const HASH_SEPARATOR = "\u0000";

const hex = (c: string): string => `%${(c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(2, "0")}`;

const specialsOf = (separator: string): Set<string> => new Set(["%", ...separator]);

/** One part escaped for a key with this separator (separator characters must be ASCII). */
export const escapeKeyPart = (part: string, separator: string): string => {
  const specials = specialsOf(separator);
  let out = "";
  for (const c of part) out += specials.has(c) ? hex(c) : c;
  return out;
};

/**
 * The inverse of escapeKeyPart; undefined when the text is not an escaped part (a separator
 * character or `%` left unescaped, or an escape of a character that is never escaped).
 */
export const unescapeKeyPart = (text: string, separator: string): string | undefined => {
  const specials = specialsOf(separator);
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (c !== "%") {
      if (specials.has(c)) return undefined;
      out += c;
      continue;
    }
    const code = text.slice(i + 1, i + 3);
    if (!/^[0-9A-F]{2}$/.test(code)) return undefined;
    const decoded = String.fromCharCode(Number.parseInt(code, 16));
    if (!specials.has(decoded)) return undefined;
    out += decoded;
    i += 2;
  }
  return out;
};

/** Parts joined unambiguously: every part but the last escaped, the last verbatim. */
export const joinKey = (separator: string, parts: readonly string[]): string =>
  parts.map((p, i) => (i === parts.length - 1 ? p : escapeKeyPart(p, separator))).join(separator);

/** The `count` parts of a key made by joinKey; undefined when the key was not made so. */
export const splitKey = (separator: string, key: string, count: number): string[] | undefined => {
  const parts: string[] = [];
  let rest = key;
  for (let n = 1; n < count; n++) {
    const i = rest.indexOf(separator);
    if (i < 0) return undefined;
    const part = unescapeKeyPart(rest.slice(0, i), separator);
    if (part === undefined) return undefined;
    parts.push(part);
    rest = rest.slice(i + separator.length);
  }
  parts.push(rest);
  return parts;
};

/** The key of a conversation: partition key of every stream event, key of its stage state and dead letters. */
export const conversationKey = (tenant: string, conversation: string): string =>
  joinKey(CONVERSATION_KEY_SEPARATOR, [tenant, conversation]);

/** Tenant and conversation of a conversationKey; undefined when the key is not one (or names no tenant). */
export const parseConversationKey = (key: string): { tenant: string; conversation: string } | undefined => {
  const parts = splitKey(CONVERSATION_KEY_SEPARATOR, key, 2);
  if (!parts || parts[0] === "") return undefined;
  return { tenant: parts[0] as string, conversation: parts[1] as string };
};

/** Raw turns are unique per conversation, so their row id joins both. */
export const turnRowId = (conversation: string, turnId: string): string =>
  joinKey(TURN_ROW_SEPARATOR, [conversation, turnId]);

/** Conversation and turn id of a turnRowId; undefined when the id is not one. */
export const parseTurnRowId = (rowId: string): { conversation: string; turnId: string } | undefined => {
  const parts = splitKey(TURN_ROW_SEPARATOR, rowId, 2);
  return parts ? { conversation: parts[0] as string, turnId: parts[1] as string } : undefined;
};

/** Record ids are SHA-256 hex and never hold `::`; turn row ids always do. */
export const isTurnRowId = (id: string): boolean => id.includes(TURN_ROW_SEPARATOR);

/** The text hashed into a content-derived id (segment ids): the parts joined unambiguously by NUL. */
export const hashInput = (parts: readonly string[]): string => joinKey(HASH_SEPARATOR, parts);
