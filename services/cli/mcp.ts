/**
 * `memory mcp`: the embedded engine served to one agent over MCP on stdin/stdout (a desktop client
 * starts it as a subprocess). The tenant is fixed at start: --tenant, else MEMORY_MCP_TENANT, else
 * the tenant of the default API key when it is configured, else the only tenant of the configured
 * keys. There is no API key on stdio: whoever can start the process can open the data folder.
 */
import type { Command } from "commander";
import { type Config, DEFAULT_API_KEY } from "../core/config.ts";
import { openEmbeddedEngine } from "../embedded/open.ts";
import { serveMcpOverStdio } from "../mcp/stdio.ts";
import { onShutdownSignals } from "../platform/shutdown.ts";
import { tenantFromArg, UsageError } from "./usage.ts";

/** The tenant `memory mcp` serves (see the module comment for the order). */
export const mcpTenant = (config: Pick<Config, "apiKeys">, flag?: string, env = process.env): string => {
  const chosen = flag ?? env.MEMORY_MCP_TENANT;
  if (chosen !== undefined && chosen !== "") {
    return tenantFromArg(chosen);
  }
  const byDefaultKey = Object.hasOwn(config.apiKeys, DEFAULT_API_KEY) ? config.apiKeys[DEFAULT_API_KEY] : undefined;
  if (byDefaultKey !== undefined) return byDefaultKey;
  const tenants = [...new Set(Object.values(config.apiKeys))];
  if (tenants.length === 1 && tenants[0] !== undefined) return tenants[0];
  throw new UsageError(
    `several tenants are configured (${tenants.join(", ")}): choose one with --tenant or MEMORY_MCP_TENANT`,
  );
};

export const runMcp = async (config: Config, o: { tenant?: string }): Promise<void> => {
  const tenant = mcpTenant(config, o.tenant);
  // stdout is the protocol channel: a stray console.log from any module would corrupt it.
  console.log = console.error;
  const opened = await openEmbeddedEngine(config);
  // Before serving: the first query would otherwise load the tables on its request path.
  await opened.engine.warmUpQueries();
  const mcp = await serveMcpOverStdio({
    service: opened.engine,
    tenant,
    onInternalError: (err, tool) => console.error(`memory mcp: ${tool} failed:`, err),
  });
  console.error(`memory mcp: serving tenant "${tenant}" over stdio (data in ${config.dataDir})`);
  const steps = () => [
    { name: "closing the MCP server", run: () => mcp.close() },
    { name: "closing the engine", run: () => opened.close() },
  ];
  const shutdown = onShutdownSignals((level, msg, fields) => {
    if (level === "error") console.error(`memory mcp: ${msg}${fields ? ` ${JSON.stringify(fields)}` : ""}`);
  }, steps);
  await mcp.closed;
  if (!shutdown.stopping) await shutdown.stop("stdin closed");
};

export const registerMcpCommand = (program: Command, config: () => Config): void => {
  program
    .command("mcp")
    .description("serve the memory tools to an agent over MCP on stdin/stdout (embedded engine)")
    .option("--tenant <tenant>", "tenant (default MEMORY_MCP_TENANT, else the default API key's tenant)")
    .action(async (o: { tenant?: string }) => {
      await runMcp(config(), o);
    });
};
