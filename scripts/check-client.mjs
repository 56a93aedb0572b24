#!/usr/bin/env node
// Checks that the TypeScript client's committed types are what schemas/openapi.yaml generates (run
// by `npm test` through test/unit/client-generated.test.ts, or by hand as `npm run check:client`):
// runs the client's generator (clients/typescript/scripts/generate.mjs: openapi-typescript from
// node_modules, no network) into a temporary folder and compares every file byte for byte. An
// OpenAPI edit without `npm run generate -w @streaming-memory/client`, a hand edit of the generated
// types or an openapi-typescript upgrade without regenerating fails with the files named.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const GENERATED = "clients/typescript/src/generated";
const GENERATOR = "clients/typescript/scripts/generate.mjs";

/** The committed folder (an argument only for the check's own test, which passes an altered copy). */
const committedDir = resolve(process.argv[2] ?? join(root, GENERATED));

const filesIn = (dir) => (existsSync(dir) ? readdirSync(dir).filter((f) => !f.startsWith(".")) : []);

const tmp = mkdtempSync(join(tmpdir(), "memory-client-check-"));
try {
  const r = spawnSync(process.execPath, [join(root, GENERATOR), tmp], { cwd: root, encoding: "utf8" });
  if (r.status !== 0) {
    console.error(`${GENERATOR} failed (${r.error?.message ?? `exit ${r.status}`}):\n${r.stderr}`);
    process.exit(2);
  }
  const committed = new Set(filesIn(committedDir));
  const fresh = new Set(filesIn(tmp));
  const problems = [];
  for (const f of fresh)
    if (!committed.has(f)) problems.push(`${f}: generated but not committed`);
    else if (!readFileSync(join(committedDir, f)).equals(readFileSync(join(tmp, f))))
      problems.push(`${f}: differs from what schemas/openapi.yaml generates`);
  for (const f of committed) if (!fresh.has(f)) problems.push(`${f}: committed but no longer generated`);
  if (problems.length > 0) {
    console.error(
      `${GENERATED} is out of date with schemas/openapi.yaml (the client and the API document disagree); run \`npm run generate -w @streaming-memory/client\` and commit:\n  ${problems.join("\n  ")}`,
    );
    process.exit(1);
  }
  console.log(`${GENERATED}: ${fresh.size} file(s) match schemas/openapi.yaml`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
