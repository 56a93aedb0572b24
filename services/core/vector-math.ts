export const dot = (a: Float32Array, b: Float32Array): number => {
  let s = 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) s += (a[i] as number) * (b[i] as number);
  return s;
};

export const norm = (a: Float32Array): number => Math.sqrt(dot(a, a));

export const cosine = (a: Float32Array, b: Float32Array): number => {
  const d = norm(a) * norm(b);
  return d === 0 ? 0 : dot(a, b) / d;
};

export const normalise = (a: Float32Array): Float32Array => {
  const n = norm(a);
  if (n === 0) return a;
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = (a[i] as number) / n;
  return out;
};

export const mean = (vectors: readonly Float32Array[]): Float32Array => {
  const first = vectors[0];
  if (!first) throw new Error("mean of no vectors");
  const out = new Float32Array(first.length);
  for (const v of vectors) for (let i = 0; i < out.length; i++) out[i] = (out[i] as number) + (v[i] as number);
  for (let i = 0; i < out.length; i++) out[i] = (out[i] as number) / vectors.length;
  return out;
};
