import type { InferenceSession } from "onnxruntime-node";

/**
 * The session options every ONNX model of the pipeline shares (embedder, attention, token
 * classifier): one inter-op thread, sequential execution, full graph optimisation, and no
 * spin-waiting of the intra-op threads between operators and passes. The pipeline's own work
 * (compression, extraction, SQLite) runs between model calls on the same cores, and spinning threads
 * take it from them. Measured on the embedder, 2 loaded cores, 192 dev turns in passes of 32: 28%
 * less CPU and 28–36% less wall time than spinning (docs/benchmarks.md, embedding work at ingest).
 */
export const sharedSessionOptions = (
  threads: number,
  executionProviders: InferenceSession.SessionOptions["executionProviders"] = ["cpu"],
): InferenceSession.SessionOptions => ({
  executionProviders,
  intraOpNumThreads: threads,
  interOpNumThreads: 1,
  executionMode: "sequential",
  graphOptimizationLevel: "all",
  extra: { session: { intra_op: { allow_spinning: "0" }, inter_op: { allow_spinning: "0" } } },
});
