/**
 * Import rules of the services (issue 19, "Done when"): the layers a newcomer reads from the tree.
 * Run with `npm run check:imports` (scripts/check-imports.ts: dependency-cruiser's API over a
 * type-stripped copy that keeps `import type`, because the installed dependency-cruiser can use
 * neither Node 20 nor TypeScript 7 for .ts files by itself).
 *
 * Paths are relative to the repository root; a module path may end in .ts (the CLI on a newer
 * toolchain) or .ts.js (the copy the script cruises), so no rule anchors on the extension.
 */
const STAGES = "(sensory|segmenter|encoder|indexer|consolidator|query)";

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "A circle of imports (type imports included) hides which module is the lower layer.",
      from: { path: "^services/" },
      to: { circular: true },
    },
    {
      name: "stages-side-by-side",
      severity: "error",
      comment: "A stage folder does not import another stage folder; what they share lives in core.",
      from: { path: `^services/${STAGES}/` },
      to: { path: `^services/${STAGES}/`, pathNot: "^services/$1/" },
    },
    {
      name: "no-gateway-below-front-door",
      severity: "error",
      comment: "The gateway is a front door: core, the platform layer and the stages never import it.",
      from: { path: `^services/(core|platform|${STAGES.slice(1, -1)})/` },
      to: { path: "^services/gateway/" },
    },
    {
      name: "no-mcp-below-front-door",
      severity: "error",
      comment: "The MCP server (services/mcp/) is a front door like the gateway: nothing below the front doors imports it.",
      from: { path: `^services/(core|platform|embedded|composition|${STAGES.slice(1, -1)})/` },
      to: { path: "^services/mcp/" },
    },
    {
      name: "mcp-over-contracts",
      severity: "error",
      comment:
        "The MCP server speaks the service contracts (core, and the maintenance guard next to them): no stage internals, runtime, other front door or composition.",
      from: { path: "^services/mcp/" },
      to: {
        path: `^services/(${STAGES.slice(1, -1)}|embedded|gateway|cli|bench|composition)/`,
        pathNot: "^services/consolidator/types[.]ts",
      },
    },
    {
      name: "adapters-apart",
      severity: "error",
      comment: "An adapter (services/core/adapters/<name>/) does not import another adapter's folder.",
      from: { path: "^services/core/adapters/([^/]+)/" },
      to: { path: "^services/core/adapters/[^/]+/", pathNot: "^services/core/adapters/$1/" },
    },
    {
      name: "adapters-not-to-factories",
      severity: "error",
      comment: "The factories choose adapters; an adapter importing one closes a circle through them.",
      from: { path: "^services/core/adapters/[^/]+/" },
      to: { path: "^services/core/adapters/(llm-factory|open-stores)[.]ts" },
    },
    {
      name: "core-below-stages",
      severity: "error",
      comment: "services/core is the domain and its drivers: it does not import a stage.",
      from: { path: "^services/core/" },
      to: { path: `^services/${STAGES}/` },
    },
    {
      name: "stages-below-runtimes",
      severity: "error",
      comment:
        "A stage's logic does not reach up into a runtime, a front door or the composition root; only its process entry point (main.ts) is composed there.",
      from: { path: `^services/${STAGES}/`, pathNot: `^services/${STAGES}/main[.]ts` },
      to: { path: "^services/(embedded|gateway|cli|bench|composition)/" },
    },
    {
      name: "platform-below-stages",
      severity: "error",
      comment: "The platform layer is what every process shares: it knows no stage, runtime or composition.",
      from: { path: "^services/platform/" },
      to: { path: `^services/(${STAGES.slice(1, -1)}|embedded|gateway|cli|bench|composition)/` },
    },
    {
      name: "client-stands-alone",
      severity: "error",
      comment:
        "The TypeScript client (clients/typescript/) is a package of its own over the OpenAPI document: it never imports the services.",
      from: { path: "^clients/typescript/" },
      to: { path: "^services/" },
    },
    {
      name: "resolvable",
      severity: "error",
      comment: "Every import resolves (a ./x.ts import that the checker cannot follow would hide its edges).",
      from: { path: "^(services|clients/typescript)/" },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)node_modules/" },
    moduleSystems: ["es6", "cjs"],
    // With the typescript API available (the depcruise CLI on Node 22+ with TypeScript 5), count type-only imports too.
    tsPreCompilationDeps: true,
    // Packages' "exports" maps (hono/route, js-tiktoken/ranks/…) resolve as Node resolves them.
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default"],
      mainFields: ["module", "main", "types"],
    },
  },
};
