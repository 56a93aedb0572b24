/**
 * The HTTP side of the fuzz suite: a generated request, how it is sent (bounded in time, from a
 * chosen source address), and what every answer must satisfy whatever the input: no 5xx, an answer
 * within the bound, and error bodies of the documented shape (schemas/openapi.yaml: JSON
 * `{error, issues?: [{path, message}]}`).
 */
import { KEY_A } from "./fuzz-child.ts";
import { type RawResponse, RequestTimeout, rawRequest } from "./raw-http.ts";

export interface HttpCase {
  /** What was generated, in words (goes into failure reports). */
  label: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}

export interface Failure {
  label: string;
  request: string;
  problem: string;
}

/**
 * Per-request bound: generous, because the suite shares a loaded 2-core machine (load averages of
 * 15+ were seen), yet far below the minutes a stalled event loop takes.
 */
export const REQUEST_TIMEOUT_MS = 30_000;
/** How long /healthz may take to answer after a request (a stalled event loop does not answer). */
export const PROBE_TIMEOUT_MS = 10_000;

const excerpt = (s: string | Buffer | undefined, n = 240): string => {
  if (s === undefined) return "";
  const text = typeof s === "string" ? s : s.toString("utf8");
  const shown = JSON.stringify(text.length > n ? `${text.slice(0, n)}…` : text);
  return text.length > n ? `${shown} (${text.length} chars)` : shown;
};

export const describeRequest = (c: HttpCase): string =>
  `${c.method} ${excerpt(c.path, 200)} headers=${excerpt(JSON.stringify(c.headers), 200)}${c.body !== undefined ? ` body=${excerpt(c.body)}` : ""}`;

/** Header values node's client accepts (tab, visible ASCII, Latin-1); anything else becomes "?". */
export const headerSafe = (s: string): string => s.replace(/[^\t\x20-\x7e\x80-\xff]/g, "?");

export const bearer = (key: string = KEY_A): Record<string, string> => ({ authorization: `Bearer ${key}` });

export const jsonHeaders = (key: string = KEY_A): Record<string, string> => ({
  ...bearer(key),
  "content-type": "application/json",
});

/** The shape problem of an answer, or undefined when it is acceptable for any input. */
export const answerProblem = (method: string, res: RawResponse): string | undefined => {
  if (res.status >= 500) return `status ${res.status}: ${excerpt(res.body, 400)}`;
  const type = String(res.headers["content-type"] ?? "");
  // A HEAD answer has no body by definition.
  if (res.status >= 400 && type.includes("application/json") && method !== "HEAD") {
    let body: unknown;
    try {
      body = JSON.parse(res.body);
    } catch {
      return `status ${res.status} with a JSON content type but a body that is not JSON: ${excerpt(res.body)}`;
    }
    const b = body as { error?: unknown; issues?: unknown };
    if (typeof b !== "object" || b === null || typeof b.error !== "string")
      return `status ${res.status}: error body without a string "error": ${excerpt(res.body)}`;
    if (b.issues !== undefined) {
      const ok =
        Array.isArray(b.issues) &&
        b.issues.every(
          (i: unknown) =>
            typeof i === "object" &&
            i !== null &&
            typeof (i as { path?: unknown }).path === "string" &&
            typeof (i as { message?: unknown }).message === "string",
        );
      if (!ok) return `status ${res.status}: malformed issues: ${excerpt(res.body)}`;
    }
  }
  return undefined;
};

export interface Target {
  base: string;
  exited(): boolean;
}

/** /healthz answered 200 within the probe bound? (From its own source address.) */
export const healthy = async (t: Target, probeAddress: string): Promise<string | undefined> => {
  if (t.exited()) return "the server process exited";
  try {
    const res = await rawRequest(t.base, {
      method: "GET",
      path: "/healthz",
      localAddress: probeAddress,
      timeoutMs: PROBE_TIMEOUT_MS,
    });
    return res.status === 200 ? undefined : `/healthz answered ${res.status}`;
  } catch (err) {
    return err instanceof RequestTimeout
      ? `/healthz did not answer within ${PROBE_TIMEOUT_MS} ms (event loop stalled?)`
      : `/healthz failed: ${String(err)}`;
  }
};

export interface RunOptions {
  sourceAddress: string;
  probeAddress: string;
  /** Requests in flight at once. */
  concurrency?: number;
  /** Probe /healthz after every request (attributes an asynchronous stall to the request that caused it). */
  probeEach?: boolean;
  /** Extra checks of an answer (an oracle), returning a problem or undefined. */
  check?: (c: HttpCase, res: RawResponse) => string | undefined;
}

/**
 * Sends every case and collects every failure (rather than stopping at the first, so one run
 * reports all the distinct problems). Stops early when the server stalls or dies: once /healthz no
 * longer answers, every later request would only wait out its timeout.
 */
export const runCases = async (t: Target, cases: readonly HttpCase[], opts: RunOptions): Promise<Failure[]> => {
  const failures: Failure[] = [];
  let next = 0;
  let stalled = false;
  const worker = async (): Promise<void> => {
    while (!stalled && next < cases.length) {
      const n = next++;
      const c = cases[n] as HttpCase;
      let failed = false;
      const fail = (problem: string): void => {
        failed = true;
        failures.push({ label: c.label, request: describeRequest(c), problem });
      };
      try {
        const res = await rawRequest(t.base, {
          method: c.method,
          path: c.path,
          headers: c.headers,
          ...(c.body !== undefined ? { body: c.body } : {}),
          localAddress: opts.sourceAddress,
          timeoutMs: REQUEST_TIMEOUT_MS,
        });
        const problem = answerProblem(c.method, res) ?? opts.check?.(c, res);
        if (problem) fail(problem);
      } catch (err) {
        // The server closing the connection is an answer (node's parser refusing a malformed
        // request, or a 413 sent before an over-limit body was written: EPIPE); a timeout is not.
        if (err instanceof RequestTimeout) fail(err.message);
        else if (!/ECONNRESET|EPIPE|socket hang up/.test(String(err))) fail(`request failed: ${String(err)}`);
      }
      if (opts.probeEach || failed) {
        const sick = await healthy(t, opts.probeAddress);
        if (sick) {
          fail(`server unhealthy after this request (#${n + 1} of ${cases.length}; the rest were not sent): ${sick}`);
          stalled = true;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency ?? 1 }, worker));
  return failures;
};

export const report = (failures: readonly Failure[], limit = 25): string =>
  `${failures.length} failing request(s):\n${failures
    .slice(0, limit)
    .map((f, i) => `${i + 1}. [${f.label}] ${f.request}\n   -> ${f.problem}`)
    .join("\n")}${failures.length > limit ? `\n… and ${failures.length - limit} more` : ""}`;
