/**
 * Raw turns first (issue 18). The indexer process runs two consumers on one event loop, one model
 * and one store connection pool: the raw-turn consumer, whose writes make a turn queryable (the
 * freshness goal is seconds), and the records consumer, whose segment indexing is long (embedding
 * the record texts, update-candidate lookups, the batch write) and only needs to keep up. Measured
 * with the freshness bench, raw turns that arrived while a segment was indexed waited 1–2 s more.
 *
 * The raw-turn consumer runs its store writes as urgent work; the records consumer waits for the
 * gate to be idle before each of its steps (an embedding slice, a round of candidate lookups, the
 * batch write). A step already running is not interrupted. So that a steady stream of raw turns
 * cannot hold the records back for long, a wait ends after maxWaitMs however busy the gate is.
 */
export class FreshnessGate {
  private active = 0;
  private waiters: (() => void)[] = [];

  constructor(
    /** The longest a records step waits for urgent work to finish (ms; MEMORY_RAW_TURNS_FIRST_MAX_WAIT_MS). */
    readonly maxWaitMs = 1000,
  ) {}

  /** Urgent work (a raw-turn write): while any runs, idle() waits. */
  async urgent<T>(fn: () => Promise<T>): Promise<T> {
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      if (this.active === 0) this.release();
    }
  }

  /** Resolves at once when no urgent work runs, else when it has all finished or maxWaitMs passed. */
  idle(): Promise<void> {
    if (this.active === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const waiter = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve();
      }, this.maxWaitMs);
      this.waiters.push(waiter);
    });
  }

  private release(): void {
    const waiting = this.waiters;
    this.waiters = [];
    for (const w of waiting) w();
  }
}
