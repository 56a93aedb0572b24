#!/usr/bin/env node
// Writes the package.json + package-lock.json of the production image into a folder, so that
// `npm ci` there installs exactly the locked versions (used by the Dockerfile and by the CI
// rehearsal test/integration/prod-install.test.ts):
//   node scripts/prod-manifest.mjs <dest> [--dev] [--with-local-llm | --local-llm-types]
// Why not `npm ci --omit=dev` on the repository's own lock file: node-llama-cpp (the local-LLM
// runtime) lists prebuilt binaries for every platform as optional dependencies, the registry this
// project installs from lacks some of them, so they are missing from package-lock.json and `npm ci`
// refuses the file (see scripts/setup.mjs). The default image leaves the local LLM out anyway
// (~700 MB of CUDA/Vulkan llama.cpp builds), so node-llama-cpp is removed from the manifest and the
// lock is pruned to what the remaining dependencies reach: every version and integrity hash still
// comes from the committed lock file. --dev keeps the devDependencies (the build stage compiles
// with them); --with-local-llm keeps node-llama-cpp (then use `npm install`, not `npm ci`);
// --local-llm-types keeps node-llama-cpp without its prebuilt binaries, for the compiler only
// (its type declarations; install with `npm ci --ignore-scripts`: that package cannot run).
// Plain Node ESM, no dependencies.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
/** Left out of the default image: loaded with a dynamic import only when MEMORY_LLM_PROVIDER=local. */
export const LOCAL_LLM_PACKAGES = ["node-llama-cpp"];

/**
 * The lock entries reachable from the root's dependencies, found as npm resolves a require: from
 * the requiring package's own node_modules outwards to the top-level node_modules.
 */
export const pruneLock = (lock, rootDeps) => {
  const packages = lock.packages;
  const keep = new Set([""]);
  const resolveFrom = (from, name) => {
    let base = from;
    for (;;) {
      const candidate = base ? `${base}/node_modules/${name}` : `node_modules/${name}`;
      if (packages[candidate]) return candidate;
      if (!base) return undefined;
      const i = base.lastIndexOf("/node_modules/");
      base = i < 0 ? "" : base.slice(0, i);
    }
  };
  const queue = [["", rootDeps, false]];
  while (queue.length > 0) {
    const [from, deps, optional] = queue.shift();
    for (const [name, isOptional] of deps) {
      const path = resolveFrom(from, name);
      if (!path) {
        if (isOptional || optional) continue;
        throw new Error(`${name} (required by ${from || "the root"}) is not in package-lock.json`);
      }
      if (keep.has(path)) continue;
      keep.add(path);
      const p = packages[path];
      const next = [
        ...Object.keys(p.dependencies ?? {}).map((n) => [n, false]),
        ...Object.keys(p.optionalDependencies ?? {}).map((n) => [n, true]),
        ...Object.keys(p.peerDependencies ?? {})
          .filter((n) => !p.peerDependenciesMeta?.[n]?.optional)
          .map((n) => [n, true]),
      ];
      queue.push([path, next, false]);
    }
  }
  return Object.fromEntries(Object.entries(packages).filter(([path]) => keep.has(path)));
};

export const productionManifest = (pkg, lock, { dev = false, withLocalLlm = false, localLlmTypes = false } = {}) => {
  const drop = withLocalLlm || localLlmTypes ? [] : LOCAL_LLM_PACKAGES;
  if (localLlmTypes) {
    // The platform binaries are node-llama-cpp's optional dependencies: without them in its lock
    // entry, the pruned lock no longer names the packages the registry lacks.
    const packages = { ...lock.packages };
    for (const name of LOCAL_LLM_PACKAGES) {
      const entry = packages[`node_modules/${name}`];
      if (entry) {
        const { optionalDependencies: _binaries, ...rest } = entry;
        packages[`node_modules/${name}`] = rest;
      }
    }
    lock = { ...lock, packages };
  }
  const omit = (deps = {}) => Object.fromEntries(Object.entries(deps).filter(([n]) => !drop.includes(n)));
  const out = { ...pkg, dependencies: omit(pkg.dependencies) };
  if (!dev) delete out.devDependencies;
  else out.devDependencies = omit(pkg.devDependencies);
  const rootDeps = [...Object.keys(out.dependencies), ...Object.keys(out.devDependencies ?? {})].map((n) => [n, false]);
  const packages = pruneLock(lock, rootDeps);
  const root = { ...packages[""], dependencies: out.dependencies };
  if (out.devDependencies) root.devDependencies = out.devDependencies;
  else delete root.devDependencies;
  packages[""] = root;
  return { pkg: out, lock: { ...lock, packages } };
};

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const dest = args.find((a) => !a.startsWith("--"));
  if (!dest) {
    console.error("usage: node scripts/prod-manifest.mjs <dest> [--dev] [--with-local-llm | --local-llm-types]");
    process.exit(2);
  }
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8"));
  const out = productionManifest(pkg, lock, {
    dev: args.includes("--dev"),
    withLocalLlm: args.includes("--with-local-llm"),
    localLlmTypes: args.includes("--local-llm-types"),
  });
  mkdirSync(dest, { recursive: true });
  writeFileSync(join(dest, "package.json"), `${JSON.stringify(out.pkg, null, 2)}\n`);
  writeFileSync(join(dest, "package-lock.json"), `${JSON.stringify(out.lock, null, 2)}\n`);
  console.log(
    `[prod-manifest] ${dest}: ${Object.keys(out.lock.packages).length - 1} locked packages` +
      ` (of ${Object.keys(lock.packages).length - 1}); dev ${args.includes("--dev") ? "kept" : "left out"}`,
  );
}
