/**
 * Dense pseudo-relevance feedback (Rocchio): the question's vector moved toward the mean of the
 * vectors the first round ranked best. A list question's evidence is one mention in each of
 * several sessions, worded like one another more than like the question ("we went camping", "the
 * kids loved the pottery class"); the first round finds some of them, and their mean points at
 * the rest.
 */
export const rocchio = (
  question: Float32Array,
  feedback: readonly Float32Array[],
  beta: number,
): Float32Array | undefined => {
  if (feedback.length === 0) return undefined;
  const dim = question.length;
  const out = new Float32Array(dim);
  for (const v of feedback) for (let i = 0; i < dim; i++) out[i] = (out[i] as number) + (v[i] as number);
  let norm = 0;
  for (let i = 0; i < dim; i++) {
    const x = (question[i] as number) + (beta * (out[i] as number)) / feedback.length;
    out[i] = x;
    norm += x * x;
  }
  if (norm === 0) return undefined;
  const scale = 1 / Math.sqrt(norm);
  for (let i = 0; i < dim; i++) out[i] = (out[i] as number) * scale;
  return out;
};
