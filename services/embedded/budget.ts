/** A stage's work on one turn or segment took longer than its budget; it is set aside, not awaited. */
export class BudgetExceededError extends Error {
  constructor(what: string, ms: number) {
    super(`${what} exceeded its processing budget of ${ms} ms`);
    this.name = "BudgetExceededError";
  }
}

/**
 * Resolves or rejects as `work` does, or rejects with BudgetExceededError after `ms`. The work
 * itself cannot be cancelled: it runs on, and its late result or error is dropped (never an
 * unhandled rejection). Only asynchronous work can be cut this way; synchronous CPU work is bounded
 * by the stages themselves (linear token counting, bounded sentences), and a process that still
 * hangs is caught by the durable attempt counts on restart.
 */
export const withinBudget = <T>(work: Promise<T>, ms: number, what: string): Promise<T> => {
  work.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    // Not unref'd: while a stage waits on stuck work, this timer is what ends the wait.
    timer = setTimeout(() => reject(new BudgetExceededError(what, ms)), ms);
  });
  return Promise.race([work, limit]).finally(() => clearTimeout(timer));
};
