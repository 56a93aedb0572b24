/**
 * Retries of the client: a fetch that re-sends a request answered 429 or 503 (the server refused it
 * before doing anything: the failed-authentication limiter, a gateway not ready) and, for calls that
 * are safe to repeat, one that got no answer at all. It waits what `Retry-After` asks (seconds or an
 * HTTP date) or else an exponential backoff with full jitter, and gives up after `maxAttempts`.
 * The clock, sleep and randomness are injectable so that tests run without real waiting.
 */
import { MemoryNetworkError } from "./errors.ts";

export interface RetryOptions {
  /** Attempts in all, the first included (default 4; 1 disables retries). */
  maxAttempts?: number;
  /** Backoff unit: attempt n waits up to baseDelayMs * 2^(n-1), fully jittered (default 250). */
  baseDelayMs?: number;
  /** Cap of one backoff wait (default 8000). */
  maxDelayMs?: number;
  /**
   * Longest `Retry-After` the client waits for (default 60000). A longer one is not shortened (that
   * would only be refused again): the answer is returned as an error carrying `retryAfterMs`.
   */
  maxRetryAfterMs?: number;
  /** Statuses that are retried (default 429 and 503). */
  retryStatuses?: readonly number[];
  sleep?: (ms: number) => Promise<void>;
  /** Uniform in [0, 1) (default Math.random). */
  random?: () => number;
  /** Milliseconds since the epoch, to read HTTP-date Retry-After values (default Date.now). */
  now?: () => number;
}

export type RetryPolicy = Required<RetryOptions>;

const realSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export const retryPolicy = (options: RetryOptions = {}): RetryPolicy => {
  const policy: RetryPolicy = {
    maxAttempts: 4,
    baseDelayMs: 250,
    maxDelayMs: 8000,
    maxRetryAfterMs: 60_000,
    retryStatuses: [429, 503],
    sleep: realSleep,
    random: Math.random,
    now: Date.now,
    ...options,
  };
  if (!Number.isInteger(policy.maxAttempts) || policy.maxAttempts < 1) {
    throw new RangeError(`retry.maxAttempts must be an integer of at least 1, got ${policy.maxAttempts}`);
  }
  for (const key of ["baseDelayMs", "maxDelayMs", "maxRetryAfterMs"] as const) {
    if (!(policy[key] >= 0)) throw new RangeError(`retry.${key} must be a number of at least 0, got ${policy[key]}`);
  }
  return policy;
};

/**
 * Milliseconds a `Retry-After` value asks for: delay-seconds (`120`) or an HTTP date
 * (`Wed, 21 Oct 2015 07:28:00 GMT`, relative to `now`, never negative). Undefined when absent or
 * unreadable.
 */
export const parseRetryAfter = (value: string | null | undefined, now: number): number | undefined => {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Only a date-looking value: Date.parse would also read "1.5" or "-3" as dates.
  if (!/[A-Za-z]/.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
};

/** Full-jitter exponential backoff before retry number `retry` (1 = the first retry). */
export const backoffMs = (retry: number, policy: RetryPolicy): number =>
  Math.floor(policy.random() * Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1)));

/**
 * The wait before retry number `retry`: what Retry-After asks plus a jitter of up to one backoff
 * unit (so that many clients refused together do not come back together), or the backoff.
 */
export const retryDelayMs = (retry: number, retryAfterMs: number | undefined, policy: RetryPolicy): number =>
  retryAfterMs !== undefined
    ? retryAfterMs + Math.floor(policy.random() * policy.baseDelayMs)
    : backoffMs(retry, policy);

/** What the retrying fetch knows of an answer it returns: the request and how many attempts it took. */
export interface AnswerInfo {
  method: string;
  url: string;
  attempts: number;
}
const answers = new WeakMap<Response, AnswerInfo>();
export const answerInfo = (response: Response): AnswerInfo | undefined => answers.get(response);

export type FetchLike = (input: Request) => Promise<Response>;

export interface RetryingFetchOptions {
  /** The request may be sent again when it got no answer (a network error). */
  idempotent: boolean;
  /** Retry retryable statuses (false for probes whose 503 is the answer, e.g. /readyz). */
  retryStatuses?: boolean;
}

/** A fetch that retries per `policy`; throws MemoryNetworkError when no attempt got an answer. */
export const retryingFetch =
  (base: FetchLike, policy: RetryPolicy, options: RetryingFetchOptions): FetchLike =>
  async (request) => {
    for (let attempt = 1; ; attempt++) {
      const last = attempt >= policy.maxAttempts;
      let response: Response;
      try {
        // Each attempt sends a copy: a body can be read once.
        response = await base(last ? request : request.clone());
      } catch (error) {
        if (last || !options.idempotent) throw new MemoryNetworkError(request.method, request.url, attempt, error);
        await policy.sleep(backoffMs(attempt, policy));
        continue;
      }
      const retryable = options.retryStatuses !== false && policy.retryStatuses.includes(response.status);
      const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"), policy.now());
      if (last || !retryable || (retryAfterMs !== undefined && retryAfterMs > policy.maxRetryAfterMs)) {
        answers.set(response, { method: request.method, url: request.url, attempts: attempt });
        return response;
      }
      // Free the connection of the answer we are not going to read.
      await response.body?.cancel();
      await policy.sleep(retryDelayMs(attempt, retryAfterMs, policy));
    }
  };
