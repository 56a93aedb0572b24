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
  port.on("message", (req: WorkerRequest) => {
    if (req.kind === "close") {
      void embedder.close().then(() => port.close());
      return;
    }
    const started = performance.now();
    embedder.embed(req.texts).then(
      (vectors) => {
        const ms = performance.now() - started;
        post(
          { kind: "vectors", id: req.id, vectors, ms },
          vectors.map((v) => v.buffer as ArrayBuffer),
        );
      },
      (err: unknown) => post({ kind: "error", id: req.id, message: message(err) }),
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
