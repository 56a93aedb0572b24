/**
 * MCP over Streamable HTTP, for the gateway's `/mcp` mount (both runtimes). Stateless: every POST
 * gets its own server and transport for the tenant of the request's API key (authenticated by the
 * gateway before this runs), so no session outlives a request, a key's tenant can never leak into
 * another's session, and any gateway replica can answer any request. Answers are plain JSON (no
 * SSE stream): the tools answer once, they stream no progress.
 */
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { createMemoryMcpServer, type McpServerDeps } from "./server.ts";

export interface McpHttpOptions extends Omit<McpServerDeps, "tenant"> {
  /** Largest POST body read (the gateway's http.maxBodyBytes). */
  maxBodyBytes?: number;
}

/** JSON-RPC error for the methods a stateless server has no use for (GET's SSE stream, DELETE of a session). */
const methodNotAllowed = (): Response =>
  new Response(
    JSON.stringify({
      jsonrpc: "2.0",
      error: { code: -32000, message: "Method not allowed: this MCP endpoint is stateless, POST only" },
      id: null,
    }),
    { status: 405, headers: { "content-type": "application/json", allow: "POST" } },
  );

/** A handler for the raw request of an authenticated caller: (request, tenant) -> response. */
export const createMcpHttpHandler =
  (options: McpHttpOptions) =>
  async (request: Request, tenant: string): Promise<Response> => {
    if (request.method !== "POST") return methodNotAllowed();
    const server = createMemoryMcpServer({ ...options, tenant });
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      ...(options.maxBodyBytes ? { maxRequestBodySize: options.maxBodyBytes } : {}),
    });
    await server.connect(transport);
    try {
      return await transport.handleRequest(request);
    } finally {
      // The JSON answer is complete when handleRequest resolves: nothing is left to send.
      await server.close();
    }
  };
