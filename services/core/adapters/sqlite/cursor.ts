/** Opaque keyset cursor for record listings: the (said_at, id) of the last row of a page. Pure. */

export interface RecordCursor {
  saidAt: number;
  id: string;
}

export const encodeCursor = (c: RecordCursor): string =>
  Buffer.from(JSON.stringify([c.saidAt, c.id]), "utf8").toString("base64url");

/** Throws a clear error for a cursor this module did not make. */
export const decodeCursor = (cursor: string): RecordCursor => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw new Error("invalid cursor");
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 2 ||
    typeof parsed[0] !== "number" ||
    !Number.isFinite(parsed[0]) ||
    typeof parsed[1] !== "string"
  ) {
    throw new Error("invalid cursor");
  }
  return { saidAt: parsed[0], id: parsed[1] };
};
