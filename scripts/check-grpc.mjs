#!/usr/bin/env node
// Checks that the committed gRPC code is what schemas/memory.proto generates (run by `npm test`
// through test/unit/grpc-generated.test.ts, or by hand as `npm run check:grpc`): regenerates with
// buf.gen.yaml (ts-proto from node_modules, no network) into a temporary folder and compares every
// file byte for byte. A proto edit without `npm run generate:grpc`, a hand edit of generated code or
// a ts-proto upgrade without regenerating fails with the files named.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
/** The plugin's `out` in buf.gen.yaml. */
const GENERATED = "services/platform/grpc/generated";

const filesUnder = (dir) =>
  existsSync(dir)
    ? readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)],
      )
    : [];

const tmp = mkdtempSync(join(tmpdir(), "memory-grpc-check-"));
try {
  const buf = join(root, "node_modules", ".bin", "buf");
  const r = spawnSync(buf, ["generate", "--template", "buf.gen.yaml", "--output", tmp], {
    cwd: root,
    encoding: "utf8",
  });
  if (r.status !== 0) {
    console.error(`buf generate failed (${r.error?.message ?? `exit ${r.status}`}):\n${r.stderr}`);
    process.exit(2);
  }
  const committedDir = join(root, GENERATED);
  const freshDir = join(tmp, GENERATED);
  const committed = new Set(filesUnder(committedDir).map((f) => relative(committedDir, f)));
  const fresh = new Set(filesUnder(freshDir).map((f) => relative(freshDir, f)));
  const problems = [];
  for (const f of fresh)
    if (!committed.has(f)) problems.push(`${f}: generated but not committed`);
    else if (!readFileSync(join(committedDir, f)).equals(readFileSync(join(freshDir, f))))
      problems.push(`${f}: differs from what the proto generates`);
  for (const f of committed) if (!fresh.has(f)) problems.push(`${f}: committed but no longer generated`);
  if (problems.length > 0) {
    console.error(
      `${GENERATED} is out of date with schemas/memory.proto; run \`npm run generate:grpc\` and commit:\n  ${problems.join("\n  ")}`,
    );
    process.exit(1);
  }
  console.log(`${GENERATED}: ${fresh.size} file(s) match schemas/memory.proto`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
