import { Tensor } from "onnxruntime-node";

/**
 * A batch of token-id sequences as the int64 `input_ids` / `attention_mask` tensors a BERT-style
 * graph takes, padded to the longest sequence (pad id in the ids, 0 in the mask).
 */
export const int64Batch = (
  batch: readonly (readonly number[])[],
  padId = 0,
): { inputIds: Tensor; attentionMask: Tensor; zeros: () => Tensor; seq: number } => {
  const b = batch.length;
  const seq = Math.max(...batch.map((ids) => ids.length));
  const inputIds = new BigInt64Array(b * seq).fill(BigInt(padId));
  const mask = new BigInt64Array(b * seq);
  batch.forEach((ids, r) => {
    for (let j = 0; j < ids.length; j++) {
      inputIds[r * seq + j] = BigInt(ids[j] as number);
      mask[r * seq + j] = 1n;
    }
  });
  return {
    inputIds: new Tensor("int64", inputIds, [b, seq]),
    attentionMask: new Tensor("int64", mask, [b, seq]),
    zeros: () => new Tensor("int64", new BigInt64Array(b * seq), [b, seq]),
    seq,
  };
};
