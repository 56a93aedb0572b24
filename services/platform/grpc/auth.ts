/**
 * Who a gRPC call comes from, read from its metadata (never from a message): the public gateway
 * takes API keys (`authorization: Bearer <key>`, else `x-api-key`); the internal query service
 * takes the tenant the gateway already authenticated (`x-memory-tenant`), guarded by the internal
 * token when one is configured. Keys and tokens are compared by SHA-256 digest, in constant time
 * for the token, so response timing does not leak them.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { Metadata } from "@grpc/grpc-js";

/** The tenant of a call from its metadata, or undefined (UNAUTHENTICATED). */
export type Authenticator = (metadata: Metadata) => string | undefined;

/**
 * Failed authentications per client address (the gateway's AuthFailureLimiter): an address with
 * too many failures is refused before its key is looked at, as on HTTP (429 there).
 */
export interface AuthFailureGuard {
  /** Seconds the address must wait before trying again, or 0 when it may try now. */
  retryAfterSeconds(address: string): number;
  fail(address: string): void;
}

const first = (md: Metadata, key: string): string | undefined => {
  const v = md.get(key)[0];
  const s = typeof v === "string" ? v.trim() : v?.toString("utf8").trim();
  return s ? s : undefined;
};

const bearerOf = (md: Metadata): string | undefined => {
  const auth = first(md, "authorization");
  return auth ? /^Bearer\s+(.+)$/i.exec(auth)?.[1]?.trim() : undefined;
};

const sha256 = (s: string): string => createHash("sha256").update(s, "utf8").digest("hex");

/** Public front door: the tenant of the API key (`authorization: Bearer <key>`, else `x-api-key`). */
export const apiKeyAuthenticator = (apiKeys: Record<string, string>): Authenticator => {
  const byHash = new Map(Object.entries(apiKeys).map(([k, t]) => [sha256(k), t]));
  return (md) => {
    const key = bearerOf(md) ?? first(md, "x-api-key");
    return key ? byHash.get(sha256(key)) : undefined;
  };
};

/**
 * Metadata key with which the gateway names the (already authenticated) tenant to the query
 * service. gRPC metadata values are printable ASCII, tenant names are Unicode: the value is the
 * name percent-encoded (encodeURIComponent), decoded by internalAuthenticator.
 */
export const TENANT_METADATA_KEY = "x-memory-tenant";

export const encodeTenantMetadata = (tenant: string): string => encodeURIComponent(tenant);

/** The tenant of a metadata value; a value that is not percent-encoding is taken as it is (older gateways). */
export const decodeTenantMetadata = (value: string): string => {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
};

/**
 * Internal services behind the gateway: the tenant the gateway resolved, in `x-memory-tenant`;
 * when a token is configured the caller must present it as `authorization: Bearer <token>`.
 */
export const internalAuthenticator = (token?: string): Authenticator => {
  const expected = token ? Buffer.from(sha256(token)) : undefined;
  return (md) => {
    if (expected) {
      const got = bearerOf(md);
      if (!got || !timingSafeEqual(Buffer.from(sha256(got)), expected)) return undefined;
    }
    const value = first(md, TENANT_METADATA_KEY);
    return value === undefined ? undefined : decodeTenantMetadata(value);
  };
};

/** The client address of a gRPC peer ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:..."), without the port. */
export const peerAddressOf = (peer: string): string => {
  const rest = peer.replace(/^(ipv4|ipv6|unix):/, "");
  const v6 = /^\[([^\]]+)\]/.exec(rest);
  if (v6?.[1]) return v6[1];
  const colon = rest.lastIndexOf(":");
  return colon > 0 && /^\d+$/.test(rest.slice(colon + 1)) ? rest.slice(0, colon) : rest;
};
