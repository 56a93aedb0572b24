/** mulberry32: a tiny seeded PRNG so "random" test data is the same on every run. */
export const seededRandom = (seed: number): (() => number) => {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
};

/** A unit vector near `base`: base plus seeded noise of the given size, normalised. */
export const near = (base: Float32Array, noise: number, rnd: () => number): Float32Array => {
  const v = new Float32Array(base.length);
  for (let i = 0; i < v.length; i++) v[i] = (base[i] as number) + (rnd() - 0.5) * 2 * noise;
  const n = Math.hypot(...v);
  for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) / n;
  return v;
};

export const axis = (dim: number, i: number): Float32Array => {
  const v = new Float32Array(dim);
  v[i] = 1;
  return v;
};
