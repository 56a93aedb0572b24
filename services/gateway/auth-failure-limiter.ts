/**
 * Failed-authentication rate limit per client address: after `limit` failures within a window an
 * address is refused (429 with Retry-After) until that window ends, which slows down API-key
 * guessing. Memory is bounded: at most `maxAddresses` windows are kept, least recently touched
 * evicted first (a Map keeps insertion order; a touched entry is re-inserted at the end).
 */

export interface AuthFailureLimiterOptions {
  /** Failures per address per window before it is refused; 0 disables the limit. */
  limit: number;
  /** Window length (default 60 s). */
  windowMs?: number;
  /** Addresses tracked at most (default 10,000). */
  maxAddresses?: number;
  /** Clock (tests). */
  now?: () => number;
}

interface Window {
  start: number;
  failures: number;
}

export class AuthFailureLimiter {
  private readonly windows = new Map<string, Window>();
  private readonly limit: number;
  private readonly windowMs: number;
  private readonly maxAddresses: number;
  private readonly now: () => number;

  constructor(options: AuthFailureLimiterOptions) {
    this.limit = options.limit;
    this.windowMs = options.windowMs ?? 60_000;
    this.maxAddresses = options.maxAddresses ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /** Seconds the address must wait before trying again, or 0 when it may try now. */
  retryAfterSeconds(address: string): number {
    if (this.limit <= 0) return 0;
    const w = this.current(address);
    if (!w || w.failures < this.limit) return 0;
    return Math.max(1, Math.ceil((w.start + this.windowMs - this.now()) / 1000));
  }

  /** Counts one failed authentication of the address. */
  fail(address: string): void {
    if (this.limit <= 0) return;
    const w = this.current(address) ?? { start: this.now(), failures: 0 };
    w.failures++;
    this.windows.delete(address);
    this.windows.set(address, w);
    while (this.windows.size > this.maxAddresses) {
      const oldest = this.windows.keys().next().value;
      if (oldest === undefined) break;
      this.windows.delete(oldest);
    }
  }

  /** Addresses tracked now (tests, bounds). */
  get size(): number {
    return this.windows.size;
  }

  private current(address: string): Window | undefined {
    const w = this.windows.get(address);
    if (w && this.now() - w.start >= this.windowMs) {
      this.windows.delete(address);
      return undefined;
    }
    return w;
  }
}
