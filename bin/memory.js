#!/usr/bin/env node
// The `memory` command of package.json "bin" (`npx memory ...`, or `memory` after a global or
// linked install). It runs the CLI's TypeScript source (services/cli/main.ts, found next to this
// file, not from the working directory) through tsx, registered in this process rather than in a
// child: the arguments, stdin/stdout, signals (Ctrl-C reaches `memory serve` once) and the exit
// status are the CLI's own. An install without dev dependencies (no tsx) runs the compiled CLI
// from dist/ (`npm run build`) instead.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const source = new URL("../services/cli/main.ts", import.meta.url);
const compiled = new URL("../dist/services/cli/main.js", import.meta.url);

const tsxApi = async () => {
  try {
    return await import("tsx/esm/api");
  } catch (err) {
    // Only a missing tsx means "use the compiled CLI"; a broken one is an error to see.
    if (err?.code === "ERR_MODULE_NOT_FOUND") return undefined;
    throw err;
  }
};

const tsx = await tsxApi();
if (tsx) {
  tsx.register();
  await import(source.href);
} else if (existsSync(fileURLToPath(compiled))) {
  await import(compiled.href);
} else {
  console.error(
    `memory: cannot run ${fileURLToPath(source)}: tsx is not installed (npm install) and there is no compiled CLI at ${fileURLToPath(compiled)} (npm run build)`,
  );
  process.exit(1);
}
