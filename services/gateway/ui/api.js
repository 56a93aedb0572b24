// The gateway's /v1 API, with the API key kept in this tab's sessionStorage and sent as the
// Authorization header (never in a URL, never in localStorage).

const KEY = "memory-explorer.apiKey";

export const apiKey = {
  get: () => sessionStorage.getItem(KEY) ?? "",
  set: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, body) {
    const issues = Array.isArray(body?.issues) ? body.issues.map((i) => `${i.path}: ${i.message}`).join("; ") : "";
    super(`${status}: ${body?.error ?? "request failed"}${issues ? ` (${issues})` : ""}`);
    this.status = status;
    this.body = body;
  }
}

/** GET (no body) or POST (JSON body) to `path`; the parsed JSON answer, or an ApiError. */
export const api = async (path, { method, body } = {}) => {
  const headers = { accept: "application/json", authorization: `Bearer ${apiKey.get()}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(path, {
    method: method ?? (body === undefined ? "GET" : "POST"),
    headers,
    credentials: "omit",
    cache: "no-store",
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let parsed;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = { error: text };
  }
  if (!res.ok) throw new ApiError(res.status, parsed);
  return parsed;
};

/** A query string from the defined values of `params`. */
export const qs = (params) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
};
