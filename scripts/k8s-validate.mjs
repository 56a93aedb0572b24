#!/usr/bin/env node
// Renders the Kubernetes overlays and validates them offline (run by `npm test` through
// test/unit/k8s-manifests.test.ts, or by hand):
//   node scripts/k8s-validate.mjs            render k8s/overlays/{dev,prod}, check, print a summary
//   node scripts/k8s-validate.mjs --json     also write .tools/rendered/<overlay>.json (the objects)
// 1. kustomize build of each overlay into .tools/rendered/<overlay>.yaml;
// 2. kubeconform -strict against the schemas vendored in k8s/schemas/ (Kubernetes 1.32 kinds and
//    the KEDA / Strimzi / Prometheus Operator CRDs; no network): an unknown or misspelt field fails;
// 3. the PrometheusRule groups through Prometheus' own rule-file parser (k8s/tools/promrules:
//    rulefmt.Parse of prometheus v0.316.0, what `promtool check rules` runs: structure, every
//    PromQL expression, templates). promtool itself is not built: it links every service-discovery
//    SDK, and its build did not finish in 20 minutes on the 2-core CI machine.
// The tools are Go programs built once into the git-ignored .tools/bin with `go install` at pinned
// versions (Go module proxy); later runs reuse them. yaml2json (k8s/tools/yaml2json) turns the
// rendered YAML into JSON for the checks written in Node.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const TOOLS = join(ROOT, ".tools");
const BIN = join(TOOLS, "bin");
const OUT = join(TOOLS, "rendered");
export const OVERLAYS = ["dev", "prod"];

/** Pinned tool versions (Go module proxy); the helpers in k8s/tools/ pin theirs in go.mod / go.sum. */
const TOOL_MODULES = {
  kustomize: "sigs.k8s.io/kustomize/kustomize/v5@v5.7.1",
  kubeconform: "github.com/yannh/kubeconform/cmd/kubeconform@v0.7.0",
};
const LOCAL_TOOLS = ["yaml2json", "promrules"];

const log = (msg) => console.error(`[k8s-validate] ${msg}`);

/** The go binary: $GO, else `go` on the PATH, else the usual install folder (a PATH without it). */
export const GO =
  process.env.GO ??
  (spawnSync("go", ["version"], { stdio: "ignore" }).status !== 0 && existsSync("/usr/local/go/bin/go")
    ? "/usr/local/go/bin/go"
    : "go");

const goAvailable = () => spawnSync(GO, ["version"], { stdio: "ignore" }).status === 0;

const goInstall = (args, cwd = ROOT) => {
  const started = Date.now();
  const r = spawnSync(GO, ["install", ...args], {
    cwd,
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, GOBIN: BIN, GOFLAGS: "-trimpath" },
  });
  if (r.status !== 0) throw new Error(`go install ${args.join(" ")} failed (${r.status ?? r.signal})`);
  log(
    `built ${args.join(" ")} (${cwd === ROOT ? "module proxy" : cwd}) in ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
};

/** Builds the tools that are missing from .tools/bin. */
export const ensureTools = () => {
  mkdirSync(BIN, { recursive: true });
  const missing = [...Object.keys(TOOL_MODULES), ...LOCAL_TOOLS].filter((name) => !existsSync(join(BIN, name)));
  if (missing.length > 0 && !goAvailable())
    throw new Error(`go is not installed: cannot build ${missing.join(", ")} into ${BIN}`);
  for (const name of missing)
    if (TOOL_MODULES[name]) goInstall([TOOL_MODULES[name]]);
    else goInstall(["."], join(ROOT, "k8s", "tools", name));
};

const run = (tool, args, input) =>
  execFileSync(join(BIN, tool), args, { cwd: ROOT, encoding: "utf8", input, maxBuffer: 64 * 1024 * 1024 });

export const render = (overlay) => run("kustomize", ["build", join("k8s", "overlays", overlay)]);

export const toObjects = (yaml) => JSON.parse(run("yaml2json", [], yaml));

const SCHEMA_LOCATIONS = [
  "k8s/schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json",
  "k8s/schemas/crds/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json",
];

/** kubeconform -strict; throws with its report when an object is invalid or has no schema. */
export const kubeconform = (file) => {
  const args = ["-strict", "-summary", ...SCHEMA_LOCATIONS.flatMap((l) => ["-schema-location", l]), file];
  const r = spawnSync(join(BIN, "kubeconform"), args, { cwd: ROOT, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`kubeconform ${file}:\n${r.stdout}${r.stderr}`);
  return r.stdout.trim();
};

/** Every PrometheusRule's groups through Prometheus' rule parser (written as JSON, which is YAML). */
export const checkRules = (objects, name) => {
  const rules = objects.filter((o) => o.kind === "PrometheusRule");
  const reports = [];
  for (const r of rules) {
    const file = join(OUT, `${name}-${r.metadata.name}.rules.json`);
    writeFileSync(file, JSON.stringify({ groups: r.spec.groups }));
    const p = spawnSync(join(BIN, "promrules"), [file], { encoding: "utf8" });
    if (p.status !== 0) throw new Error(`rule check (${r.metadata.name}):\n${p.stdout}${p.stderr}`);
    reports.push(p.stdout.trim().split("\n").pop());
  }
  return reports;
};

/** Renders and validates every overlay; returns the rendered objects by overlay. */
export const validateAll = () => {
  ensureTools();
  mkdirSync(OUT, { recursive: true });
  const result = {};
  for (const overlay of OVERLAYS) {
    const yaml = render(overlay);
    const file = join(OUT, `${overlay}.yaml`);
    writeFileSync(file, yaml);
    log(`${overlay}: ${kubeconform(file)}`);
    const objects = toObjects(yaml);
    for (const line of checkRules(objects, overlay)) log(`${overlay}: rules: ${line}`);
    writeFileSync(join(OUT, `${overlay}.json`), JSON.stringify(objects));
    result[overlay] = objects;
  }
  return { objects: result };
};

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const { objects } = validateAll();
    for (const [overlay, objs] of Object.entries(objects))
      console.log(`${overlay}: ${objs.length} objects valid (written to ${join(OUT, `${overlay}.yaml`)})`);
  } catch (err) {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  }
}
