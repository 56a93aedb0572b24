export { seededRandom } from "../../services/core/seeded-random.ts";

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
