/**
 * MCP over stdio (`memory mcp`): one server, one tenant, stdin/stdout carry JSON-RPC, so nothing
 * else may write to stdout; diagnostics go to stderr.
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createMemoryMcpServer, type McpServerDeps } from "./server.ts";

export interface StdioMcp {
  /** Resolves when the client closes stdin (or the transport closes). */
  closed: Promise<void>;
  close(): Promise<void>;
}

export const serveMcpOverStdio = async (deps: McpServerDeps): Promise<StdioMcp> => {
  const server = createMemoryMcpServer(deps);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    // The SDK's stdio transport does not notice the end of stdin by itself: the client going away ends the server.
    process.stdin.once("end", () => resolve());
  });
  await server.connect(transport);
  return { closed, close: () => server.close() };
};
