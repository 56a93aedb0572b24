/**
 * Worker-thread entry of the threaded embedder (embedder-thread.ts): loads the ONNX embedder in
 * this thread (tokenizer and session both), then answers embed requests one at a time. Vectors go
 * back as transferred buffers, so nothing is copied on the way out.
 */
import { parentPort, workerData } from "node:worker_threads";
import { loadOnnxEmbedder, type OnnxEmbedderOptions } from "./embedder.ts";
import type { WorkerReply, WorkerRequest } from "./embedder-thread.ts";

interface Init {
  modelDir: string;
  options: OnnxEmbedderOptions;
}

const port = parentPort;
if (!port) throw new Error("embedder-worker.ts runs as a worker thread (see embedder-thread.ts)");
const init = workerData as Init;

const post = (reply: WorkerReply, transfer: ArrayBuffer[] = []): void => port.postMessage(reply, transfer);
const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

try {
  const embedder = await loadOnnxEmbedder(init.modelDir, init.options);
  // The model's time already reported (its stats' ms when the last reply went).
  let reported = 0;
  /**
   * The model's own time for the request that just ended. The embedder runs requests one at a
   * time and adds each one's time when it ends, so what its total grew by since the last reply is
   * this request's passes, not its wait behind the requests posted before it: summed over the
   * replies, the time the model was busy (two calls posted together no longer count the first
   * one's passes twice).
   */
  const modelMs = (): number => {
    const total = embedder.stats().ms;
    const ms = total - reported;
    reported = total;
    return ms;
  };
  port.on("message", (req: WorkerRequest) => {
    if (req.kind === "close") {
      void embedder.close().then(() => port.close());
      return;
    }
    embedder.embed(req.texts).then(
      (vectors) => {
        const ms = modelMs();
        post(
          { kind: "vectors", id: req.id, vectors, ms },
          vectors.map((v) => v.buffer as ArrayBuffer),
        );
      },
      (err: unknown) => {
        modelMs();
        post({ kind: "error", id: req.id, message: message(err) });
      },
    );
  });
  post({
    kind: "ready",
    id: embedder.id,
    dimension: embedder.dimension,
    variant: embedder.variant,
    maxLength: embedder.maxLength,
    batchSize: embedder.batchSize,
  });
} catch (err) {
  post({ kind: "failed", message: message(err) });
}
