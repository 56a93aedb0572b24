// Runs every test file under test/ with node's test runner (Node 20's --test takes no globs).
// Files run one at a time: the end-to-end tests each use both cores.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { testProcessEnv } from "./test-env.mjs";

const find = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? find(join(dir, e.name)) : e.name.endsWith(".test.ts") ? [join(dir, e.name)] : [],
  );

const only = process.argv.slice(2);
const files = find("test")
  .filter((f) => only.length === 0 || only.some((o) => f.startsWith(o)))
  .sort();
if (files.length === 0) {
  console.error(`no test files under test/${only.length ? ` matching ${only.join(", ")}` : ""}`);
  process.exit(1);
}
const r = spawnSync(process.execPath, ["--import", "tsx", "--test", "--test-concurrency=1", ...files], {
  stdio: "inherit",
  env: testProcessEnv(process.env),
});
process.exit(r.status ?? 1);
