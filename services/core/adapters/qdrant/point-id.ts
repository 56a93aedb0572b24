import { createHash } from "node:crypto";

/**
 * Qdrant point ids must be unsigned integers or UUIDs. A point's id is a deterministic UUID from
 * sha256(tenant NUL id) (RFC 9562 version 8, "custom"), so the same (tenant, id) always lands on the
 * same point and equal ids of two tenants never collide. The original id stays in the payload.
 */
export const pointId = (tenant: string, id: string): string => {
  const b = createHash("sha256").update(`${tenant}\u0000${id}`).digest().subarray(0, 16);
  b[6] = ((b[6] as number) & 0x0f) | 0x80;
  b[8] = ((b[8] as number) & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
};
