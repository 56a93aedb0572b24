/**
 * The ONNX sentence embedder on a worker thread. onnxruntime-node runs a session on the calling
 * thread (a setImmediate, then a synchronous run), and tokenisation is synchronous too, so on the
 * main thread every forward pass holds the event loop: acks, queries and probes wait behind it.
 * Here the tokenizer and the session live in one worker thread (embedder-worker.ts); the main
 * thread only posts texts and receives vectors (transferred, not copied). Requests are answered in
 * order, one at a time, as OnnxEmbedder serialises its own calls.
 */
import { Worker } from "node:worker_threads";
import type { Embedder, EmbedderStats } from "../../ports.ts";
import type { OnnxEmbedderOptions, OnnxVariant } from "./embedder.ts";

/** What the main thread asks the worker. */
export type WorkerRequest = { kind: "embed"; id: number; texts: readonly string[] } | { kind: "close" };

/** What the worker answers. */
export type WorkerReply =
  | { kind: "ready"; id: string; dimension: number; variant: OnnxVariant; maxLength: number; batchSize: number }
  | { kind: "failed"; message: string }
  | { kind: "vectors"; id: number; vectors: Float32Array[]; ms: number }
  | { kind: "error"; id: number; message: string };

interface Pending {
  resolve: (vectors: Float32Array[]) => void;
  reject: (err: Error) => void;
  texts: number;
}

/**
 * The worker module beside this one: embedder-worker.js once compiled. Run from source (tsx), a
 * worker does not get the parent's --import hooks on Node 20, so a small bootstrap registers tsx
 * in the worker first and then imports embedder-worker.ts.
 */
const workerUrl = (): URL => {
  if (!import.meta.url.endsWith(".ts")) return new URL("./embedder-worker.js", import.meta.url);
  const target = new URL("./embedder-worker.ts", import.meta.url).href;
  const tsx = import.meta.resolve("tsx/esm/api");
  const boot = `import { register } from ${JSON.stringify(tsx)}; register(); await import(${JSON.stringify(target)});`;
  return new URL(`data:text/javascript,${encodeURIComponent(boot)}`);
};

export class ThreadedOnnxEmbedder implements Embedder {
  private readonly pending = new Map<number, Pending>();
  private readonly counters: EmbedderStats = { calls: 0, texts: 0, ms: 0 };
  private nextId = 1;
  private failure: Error | undefined;
  private closed = false;

  /** Use {@link loadThreadedOnnxEmbedder}. */
  constructor(
    private readonly worker: Worker,
    readonly id: string,
    readonly dimension: number,
    readonly variant: OnnxVariant,
    readonly maxLength: number,
    readonly batchSize: number,
    /**
     * Called once, with the first failure of the worker thread (it threw or exited), before any
     * pending call is rejected: the owner decides what a dead model means for its process.
     */
    private readonly onFailure?: (err: Error) => void,
  ) {
    // Idle, the thread does not keep the process alive (as a model on the main thread did not):
    // a program that ends without closing the embedder still exits. It is held while calls wait.
    worker.unref();
    worker.on("message", (reply: WorkerReply) => this.settle(reply));
    worker.on("error", (err) => this.fail(err));
    worker.on("exit", (code) => {
      if (!this.closed) this.fail(new Error(`embedder worker thread exited (code ${code})`));
    });
  }

  stats(): EmbedderStats {
    return { ...this.counters };
  }

  embed(texts: readonly string[]): Promise<Float32Array[]> {
    if (this.closed) return Promise.reject(new Error("embedder is closed"));
    if (this.failure) return Promise.reject(this.failure);
    if (texts.length === 0) return Promise.resolve([]);
    const id = this.nextId++;
    return new Promise<Float32Array[]>((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject, texts: texts.length });
      this.worker.postMessage({ kind: "embed", id, texts: [...texts] } satisfies WorkerRequest);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const exited = new Promise<void>((resolve) => this.worker.once("exit", () => resolve()));
    // Held until it has exited: the caller's code after `await close()` must still run.
    this.worker.ref();
    this.worker.postMessage({ kind: "close" } satisfies WorkerRequest);
    await exited;
    this.rejectAll(new Error("embedder is closed"));
  }

  private settle(reply: WorkerReply): void {
    if (reply.kind !== "vectors" && reply.kind !== "error") return;
    const p = this.pending.get(reply.id);
    if (!p) return;
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.worker.unref();
    if (reply.kind === "error") {
      p.reject(new Error(reply.message));
      return;
    }
    this.counters.calls += 1;
    this.counters.texts += p.texts;
    this.counters.ms += reply.ms;
    p.resolve(reply.vectors);
  }

  private fail(err: Error): void {
    if (this.failure === undefined) {
      this.failure = err;
      this.onFailure?.(err);
    }
    this.rejectAll(err);
  }

  private rejectAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    this.worker.unref();
  }
}

/**
 * Starts the worker thread, which loads the model folder as loadOnnxEmbedder does (same options,
 * same errors, e.g. the setup hint when files are missing); resolves once it is ready.
 */
export const loadThreadedOnnxEmbedder = (
  modelDir: string,
  options: OnnxEmbedderOptions = {},
  onFailure?: (err: Error) => void,
): Promise<ThreadedOnnxEmbedder> =>
  new Promise((resolve, reject) => {
    const worker = new Worker(workerUrl(), { workerData: { modelDir, options } });
    const onExit = (code: number) =>
      reject(new Error(`embedder worker thread exited before it was ready (code ${code})`));
    worker.once("error", reject);
    worker.once("exit", onExit);
    worker.once("message", (reply: WorkerReply) => {
      worker.off("error", reject);
      worker.off("exit", onExit);
      if (reply.kind === "ready") {
        resolve(
          new ThreadedOnnxEmbedder(
            worker,
            reply.id,
            reply.dimension,
            reply.variant,
            reply.maxLength,
            reply.batchSize,
            onFailure,
          ),
        );
        return;
      }
      void worker.terminate();
      reject(new Error(reply.kind === "failed" ? reply.message : `embedder worker sent ${reply.kind} before ready`));
    });
  });
