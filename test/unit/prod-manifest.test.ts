/**
 * scripts/prod-manifest.mjs: the manifests the image installs from. `npm ci --dry-run` (no
 * download, a few seconds) proves that npm accepts each pruned lock file, which it refuses for the
 * repository's own (node-llama-cpp's platform packages the registry lacks); the lock entries kept
 * are the committed ones, unchanged.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const ROOT = join(import.meta.dirname, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "prod-manifest-"));
after(() => rmSync(dir, { recursive: true, force: true }));

interface LockEntry {
  version?: string;
  integrity?: string;
  optionalDependencies?: Record<string, string>;
  dev?: boolean;
}
interface Lock {
  packages: Record<string, LockEntry>;
}
const original = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as Lock;

const write = (name: string, ...flags: string[]) => {
  const dest = join(dir, name);
  const r = spawnSync(process.execPath, [join(ROOT, "scripts", "prod-manifest.mjs"), dest, ...flags], {
    encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr);
  return {
    dest,
    pkg: JSON.parse(readFileSync(join(dest, "package.json"), "utf8")) as Record<string, Record<string, string>>,
    lock: JSON.parse(readFileSync(join(dest, "package-lock.json"), "utf8")) as Lock,
  };
};

const npmCiAccepts = (cwd: string, ...flags: string[]) => {
  const r = spawnSync(
    "npm",
    ["ci", "--dry-run", "--ignore-scripts", "--prefer-offline", "--no-audit", "--no-fund", ...flags],
    {
      cwd,
      encoding: "utf8",
      env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: "skip" },
      timeout: 120_000,
    },
  );
  assert.equal(r.status, 0, `npm ci --dry-run refused ${cwd}:\n${r.stderr.slice(-2000)}`);
};

describe("production manifest", () => {
  it("runtime: no dev dependencies, no local-LLM runtime, a lock npm ci accepts", () => {
    const { dest, pkg, lock } = write("runtime");
    assert.equal(pkg.devDependencies, undefined);
    assert.equal(pkg.dependencies?.["node-llama-cpp"], undefined);
    assert.ok(pkg.dependencies?.kafkajs && pkg.dependencies["onnxruntime-node"]);
    const paths = Object.keys(lock.packages);
    assert.ok(!paths.some((p) => p.includes("node-llama-cpp")), "no node-llama-cpp package");
    assert.ok(!paths.includes("node_modules/tsx") && !paths.includes("node_modules/@biomejs/biome"));
    for (const [path, entry] of Object.entries(lock.packages)) {
      if (path === "") continue;
      assert.deepEqual(entry, original.packages[path], `${path} differs from the committed lock`);
    }
    npmCiAccepts(dest, "--omit=dev");
  });

  it("build: dev dependencies and node-llama-cpp's types, without its platform binaries", () => {
    const { dest, pkg, lock } = write("build", "--dev", "--local-llm-types");
    assert.ok(pkg.devDependencies?.typescript && pkg.dependencies?.["node-llama-cpp"]);
    const llama = lock.packages["node_modules/node-llama-cpp"];
    assert.equal(llama?.version, original.packages["node_modules/node-llama-cpp"]?.version);
    assert.equal(llama?.optionalDependencies, undefined);
    assert.ok(!Object.keys(lock.packages).some((p) => p.includes("@node-llama-cpp/")));
    npmCiAccepts(dest);
  });
});
