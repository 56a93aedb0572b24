/** A uniform source in [0, 1). */
export type Random = () => number;

/**
 * mulberry32: a small deterministic uniform source, for reproducible runs (seeded backoff jitter,
 * the scale bench's generated data) and tests.
 */
export const seededRandom = (seed: number): Random => {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
};
