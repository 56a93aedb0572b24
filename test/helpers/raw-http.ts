/**
 * A bare HTTP/1.1 client for the fuzz suite (node:http, not fetch): the path goes on the wire as
 * given (fetch's URL parser would normalise `..` and re-encode `%`), any method token is allowed,
 * the source address can be chosen (127.0.0.x) so that one group of requests cannot exhaust a
 * per-address limit of another, and every request has a hard time bound.
 */
import { type IncomingHttpHeaders, request } from "node:http";

export interface RawRequest {
  method: string;
  /** Request target as sent: must already be percent-encoded where HTTP requires it. */
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Local (source) address, e.g. 127.0.0.3. */
  localAddress?: string;
  timeoutMs: number;
}

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  ms: number;
}

export class RequestTimeout extends Error {
  override readonly name = "RequestTimeout";
}

/** Sends one request; rejects with RequestTimeout when no complete response came within timeoutMs. */
export const rawRequest = (base: string, r: RawRequest): Promise<RawResponse> => {
  const url = new URL(base);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request({
      host: url.hostname,
      port: url.port,
      method: r.method,
      path: r.path,
      headers: r.headers ?? {},
      agent: false,
      ...(r.localAddress ? { localAddress: r.localAddress } : {}),
    });
    const timer = setTimeout(
      () =>
        req.destroy(new RequestTimeout(`no response within ${r.timeoutMs} ms: ${r.method} ${r.path.slice(0, 200)}`)),
      r.timeoutMs,
    );
    req.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", (err) => {
        clearTimeout(timer);
        reject(err);
      });
      res.on("end", () => {
        clearTimeout(timer);
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString("utf8"),
          ms: performance.now() - started,
        });
      });
    });
    req.end(r.body);
  });
};
