/**
 * The wait before retry `attempt` of an operation that failed for a transient reason: capped
 * exponential backoff with jitter, so that the instances of a stage that all lost Neo4j at once do
 * not hammer it in step when it returns. The random source is injectable (seeded in tests).
 */

export interface BackoffPolicy {
  /** First wait (attempt 1). */
  baseMs: number;
  /** No wait is longer than this. */
  maxMs: number;
}

import type { Random } from "../../seeded-random.ts";

export { type Random, seededRandom } from "../../seeded-random.ts";

/**
 * Equal jitter: half of the capped exponential step is kept, the other half is random, so the
 * wait never collapses to ~0 (a busy loop against a down service) yet instances spread out.
 */
export const backoffDelay = (attempt: number, policy: BackoffPolicy, random: Random = Math.random): number => {
  const exp = policy.baseMs * 2 ** Math.max(0, Math.min(attempt - 1, 30));
  const step = Math.min(policy.maxMs, exp);
  return Math.round(step / 2 + (step / 2) * random());
};
