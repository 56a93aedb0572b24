#!/usr/bin/env node
// Production build: services/ compiled to JavaScript in dist/ (tsconfig.build.json), with the
// files the code reads next to itself at run time (paths are relative to the compiled file:
// dist/schemas/ for the Avro and proto schemas, the CLI's demo sample). Then
//   node dist/services/<service>/main.js
// runs without tsx. Used by the Dockerfile and test/integration/prod-install.test.ts.
//   node scripts/build.mjs [--out <dir>]   (default dist/; the TypeScript compiler from node_modules)
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const i = process.argv.indexOf("--out");
const OUT = resolve(i > 0 ? (process.argv[i + 1] ?? "dist") : join(ROOT, "dist"));

const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc");
if (!existsSync(tsc)) {
  console.error(`[build] ${tsc} is missing: install the dev dependencies first (npm ci)`);
  process.exit(1);
}
rmSync(OUT, { recursive: true, force: true });
const started = Date.now();
const r = spawnSync(process.execPath, [tsc, "-p", join(ROOT, "tsconfig.build.json"), "--outDir", OUT], {
  cwd: ROOT,
  stdio: "inherit",
});
if (r.status !== 0) {
  console.error(`[build] tsc failed (${r.status ?? r.signal})`);
  process.exit(1);
}
cpSync(join(ROOT, "schemas"), join(OUT, "schemas"), { recursive: true });
cpSync(join(ROOT, "services", "cli", "sample-locomo.json"), join(OUT, "services", "cli", "sample-locomo.json"));
// The explorer's static page (served by the gateway at /ui from the folder next to its module).
cpSync(join(ROOT, "services", "gateway", "ui"), join(OUT, "services", "gateway", "ui"), { recursive: true });
console.log(
  `[build] ${OUT}: compiled services/ and copied schemas/ in ${((Date.now() - started) / 1000).toFixed(1)} s`,
);
