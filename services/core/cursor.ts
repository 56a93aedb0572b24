/**
 * Opaque keyset cursor for record listings: the (said_at, id) of the last row of a page, bound to
 * the tenant and signed with HMAC-SHA256 under a server secret. A cursor the service did not issue,
 * one altered in transit, or one issued to another tenant is a ValidationError naming `cursor`
 * (HTTP 400, gRPC INVALID_ARGUMENT), never an internal error. Every instance of a deployment must
 * share the secret (config `cursorSecret` / MEMORY_CURSOR_SECRET; see cursorSecretOf in config.ts).
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { ValidationError } from "./errors.ts";

export interface RecordCursor {
  saidAt: number;
  id: string;
}

/**
 * The secret of stores built without one (tests, tools reading a local data folder): cursors still
 * carry a MAC, so tampering is caught, but anyone who reads this source can forge one; servers pass
 * the configured secret.
 */
export const UNCONFIGURED_CURSOR_SECRET = "memory-cursor-secret-unconfigured";

/** MAC bytes kept in a cursor: 128 bits. */
const MAC_BYTES = 16;

const invalid = (why: string): ValidationError =>
  new ValidationError("invalid cursor", [{ path: "cursor", message: why }]);

export class CursorCodec {
  constructor(private readonly secret: string = UNCONFIGURED_CURSOR_SECRET) {}

  private mac(tenant: string, payload: string): Buffer {
    return createHmac("sha256", this.secret).update(`${tenant}\n${payload}`, "utf8").digest().subarray(0, MAC_BYTES);
  }

  encode(tenant: string, c: RecordCursor): string {
    const payload = Buffer.from(JSON.stringify([c.saidAt, c.id]), "utf8").toString("base64url");
    return `${payload}.${this.mac(tenant, payload).toString("base64url")}`;
  }

  /** The position of a cursor this codec issued to `tenant`; a ValidationError for anything else. */
  decode(tenant: string, cursor: string): RecordCursor {
    const dot = cursor.lastIndexOf(".");
    if (dot <= 0) throw invalid("was not issued by this service");
    const payload = cursor.slice(0, dot);
    const given = Buffer.from(cursor.slice(dot + 1), "base64url");
    const expected = this.mac(tenant, payload);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw invalid("was not issued by this service for this tenant, or has been altered");
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
    } catch {
      throw invalid("is malformed");
    }
    if (
      !Array.isArray(parsed) ||
      parsed.length !== 2 ||
      typeof parsed[0] !== "number" ||
      !Number.isFinite(parsed[0]) ||
      typeof parsed[1] !== "string"
    ) {
      throw invalid("is malformed");
    }
    return { saidAt: parsed[0], id: parsed[1] };
  }
}
