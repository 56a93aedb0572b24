/**
 * Graceful shutdown of a process: on SIGTERM or SIGINT, run the process's stop steps once, in
 * order, each allowed to fail without keeping the next from running, then exit. A second signal
 * while stopping does nothing more: the first stop is already under way.
 */
import type { LogFn } from "./log.ts";

export interface StopStep {
  /** What the step closes, for the log line when it fails. */
  name: string;
  run(): Promise<void>;
}

export interface GracefulShutdown {
  /** Stops the process (once) and exits with `code`; later calls return the same promise. */
  stop(why: string, code?: number): Promise<void>;
  /** Whether a stop has begun. */
  readonly stopping: boolean;
}

/** Steps every stop runs after the process's own (e.g. flushing traces), in registration order. */
const finalSteps: StopStep[] = [];

/** Adds a step that runs after the process's own stop steps, whoever installed the handlers. */
export const registerFinalStopStep = (step: StopStep): void => {
  finalSteps.push(step);
};

/**
 * Installs the signal handlers. `steps` is called when the stop begins, so it may name resources
 * opened after this call (e.g. servers that start later).
 */
export const onShutdownSignals = (log: LogFn, steps: () => readonly StopStep[]): GracefulShutdown => {
  let stopping: Promise<void> | undefined;
  const stop = (why: string, code = 0): Promise<void> => {
    stopping ??= (async () => {
      log("info", "stopping", { why });
      for (const step of [...steps(), ...finalSteps]) {
        await step.run().catch((err: unknown) => log("error", `${step.name} failed`, { error: String(err) }));
      }
      log("info", "stopped");
      process.exit(code);
    })();
    return stopping;
  };
  process.once("SIGTERM", () => void stop("SIGTERM"));
  process.once("SIGINT", () => void stop("SIGINT"));
  return {
    stop,
    get stopping() {
      return stopping !== undefined;
    },
  };
};
