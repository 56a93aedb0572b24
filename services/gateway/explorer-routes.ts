/**
 * The browser memory explorer: its static page at /ui (plain ES modules and CSS from
 * services/gateway/ui/, no build step, no CDN) and the read-only /v1 routes it needs that the
 * query contract does not serve: the tenant's conversations, and a conversation's timeline
 * (segments with their turns, boundary decisions and records). The /v1 routes sit behind the
 * app's API-key middleware like every /v1 route; the page itself holds no secret (the key is typed
 * into it and kept in the tab's sessionStorage) and is served under a strict Content-Security-Policy.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type Context, Hono } from "hono";
import { z } from "zod";
import { issuesFromZod, ValidationError } from "../core/errors.ts";
import { type ExplorerReader, isExplorerReader, MAX_EXPLORER_PAGE } from "../core/explorer.ts";
import { idSchema } from "../core/input-rules.ts";

/** What the app's middleware sets on the context (http-app.ts's HttpAppEnv, which this module may not import: it mounts this one). */
type ExplorerEnv = { Variables: { tenant: string; requestId: string } };

/** Same-origin everything, no inline script or style, no framing, no forms posting elsewhere. */
export const EXPLORER_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

/** The page's files, by name: a fixed list, so no request path ever reaches the file system. */
const UI_FILES = ["index.html", "app.js", "api.js", "views.js", "timeline.js", "dom.js", "explorer.css"] as const;

const UI_DIR = new URL("./ui/", import.meta.url);

const loadUi = (): Map<string, { body: string; type: string }> =>
  new Map(
    UI_FILES.map((name) => {
      const ext = name.slice(name.lastIndexOf("."));
      const body = readFileSync(fileURLToPath(new URL(name, UI_DIR)), "utf8");
      return [name, { body, type: CONTENT_TYPES[ext] ?? "application/octet-stream" }];
    }),
  );

const pageParams = (defaultLimit: number) =>
  z.object({
    limit: z.coerce.number().int().min(1).max(MAX_EXPLORER_PAGE).default(defaultLimit),
    cursor: z.string().min(1).max(2048).optional(),
  });
const ConversationsParamsSchema = pageParams(50);
const TimelineParamsSchema = pageParams(20);
const ConversationParamSchema = idSchema();

/** The query string without empty parameters (`?cursor=` counts as absent, as on /v1/records). */
const queryOf = (c: Context<ExplorerEnv>): Record<string, string> =>
  Object.fromEntries(Object.entries(c.req.query()).filter(([, v]) => v !== ""));

/** Where the explorer's data comes from: a runtime that is an ExplorerReader, or one that carries one. */
export const explorerOf = (service: unknown): ExplorerReader | undefined => {
  const carried = (service as { explorer?: unknown } | null)?.explorer;
  if (isExplorerReader(carried)) return carried;
  return isExplorerReader(service) ? service : undefined;
};

export interface ExplorerRoutesDeps {
  /** The runtime (the embedded engine is a reader; the distributed service carries one when configured). */
  service: unknown;
  /** Overrides what `service` offers (tests). */
  explorer?: ExplorerReader;
}

/**
 * /ui and the explorer's /v1 routes, for the gateway's app to mount with `app.route("/", …)` after
 * its /v1 key middleware (which then guards these /v1 routes too).
 */
export const explorerRoutes = (deps: ExplorerRoutesDeps): Hono<ExplorerEnv> => {
  const app = new Hono<ExplorerEnv>();
  const explorer = deps.explorer ?? explorerOf(deps.service);
  const ui = loadUi();

  const serve = (c: Context<ExplorerEnv>, name: string) => {
    const file = ui.get(name);
    if (!file) return c.json({ error: "not found" }, 404);
    return c.body(file.body, 200, {
      "content-type": file.type,
      "content-security-policy": EXPLORER_CSP,
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "cache-control": "no-cache",
    });
  };
  app.get("/ui", (c) => c.redirect("/ui/", 308));
  app.get("/ui/", (c) => serve(c, "index.html"));
  app.get("/ui/:file", (c) => serve(c, c.req.param("file")));

  const unsupported = (c: Context<ExplorerEnv>) =>
    c.json(
      {
        error: "not supported by this runtime: the gateway has no graph store to read (set MEMORY_STORE=neo4j)",
        requestId: c.get("requestId"),
      },
      501,
    );

  app.get("/v1/conversations", async (c) => {
    if (!explorer) return unsupported(c);
    const params = ConversationsParamsSchema.safeParse(queryOf(c));
    if (!params.success) return c.json({ error: "invalid query parameters", issues: issuesFromZod(params.error) }, 400);
    const page = await explorer.listConversations(c.get("tenant"), params.data);
    return c.json({ conversations: page.conversations, nextCursor: page.nextCursor ?? null }, 200);
  });

  app.get("/v1/conversations/:conversation/timeline", async (c) => {
    if (!explorer) return unsupported(c);
    const conversation = ConversationParamSchema.safeParse(c.req.param("conversation"));
    if (!conversation.success) {
      throw new ValidationError(
        "invalid conversation",
        issuesFromZod(conversation.error).map((i) => ({ ...i, path: "conversation" })),
      );
    }
    const params = TimelineParamsSchema.safeParse(queryOf(c));
    if (!params.success) return c.json({ error: "invalid query parameters", issues: issuesFromZod(params.error) }, 400);
    const timeline = await explorer.timeline(c.get("tenant"), conversation.data, params.data);
    if (!timeline) return c.json({ error: "conversation not found" }, 404);
    return c.json({ ...timeline, nextCursor: timeline.nextCursor ?? null }, 200);
  });
  return app;
};
