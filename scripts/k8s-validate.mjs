#!/usr/bin/env node
// Renders the Kubernetes overlays and validates them offline (run by `npm test` through
// test/unit/k8s-manifests.test.ts, or by hand):
//   node scripts/k8s-validate.mjs            render k8s/overlays/{dev,prod}, check, print a summary
//   node scripts/k8s-validate.mjs --json     also write .tools/rendered/<overlay>.json (the objects)
// 1. kustomize build of each overlay into .tools/rendered/<overlay>.yaml;
// 2. kubeconform -strict against the schemas vendored in k8s/schemas/ (Kubernetes 1.32 kinds and
//    the KEDA / Strimzi / Prometheus Operator CRDs; no network): an unknown or misspelt field fails;
// 3. promtool check rules on the PrometheusRule groups (when promtool is built: K8S_PROMTOOL=0
//    skips building it, see below).
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

/** Pinned tool versions (Go module proxy). promtool: the Prometheus release of the same version. */
const TOOL_MODULES = {
  kustomize: "sigs.k8s.io/kustomize/kustomize/v5@v5.7.1",
  kubeconform: "github.com/yannh/kubeconform/cmd/kubeconform@v0.7.0",
  promtool: "github.com/prometheus/prometheus/cmd/promtool@v0.316.0",
};

const log = (msg) => console.error(`[k8s-validate] ${msg}`);

const goAvailable = () => spawnSync("go", ["version"], { stdio: "ignore" }).status === 0;

const goInstall = (args, cwd = ROOT) => {
  const started = Date.now();
  const r = spawnSync("go", ["install", ...args], {
    cwd,
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, GOBIN: BIN, GOFLAGS: "-trimpath" },
  });
  if (r.status !== 0) throw new Error(`go install ${args.join(" ")} failed (${r.status ?? r.signal})`);
  log(`built ${args.join(" ")} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
};

/** Builds what is missing; returns whether promtool is there. */
export const ensureTools = ({ promtool = process.env.K8S_PROMTOOL !== "0" } = {}) => {
  mkdirSync(BIN, { recursive: true });
  const missing = (name) => !existsSync(join(BIN, name));
  const needed = [
    ...["kustomize", "kubeconform"].filter(missing),
    ...(promtool && missing("promtool") ? ["promtool"] : []),
  ];
  if ((needed.length > 0 || missing("yaml2json")) && !goAvailable())
    throw new Error(`go is not installed: cannot build ${[...needed, "yaml2json"].join(", ")} into ${BIN}`);
  for (const name of needed) goInstall([TOOL_MODULES[name]]);
  if (missing("yaml2json")) goInstall(["."], join(ROOT, "k8s", "tools", "yaml2json"));
  return !missing("promtool");
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

/** promtool check rules on every PrometheusRule's groups (written as JSON, which is YAML). */
export const promtoolCheck = (objects, name) => {
  const rules = objects.filter((o) => o.kind === "PrometheusRule");
  const reports = [];
  for (const r of rules) {
    const file = join(OUT, `${name}-${r.metadata.name}.rules.json`);
    writeFileSync(file, JSON.stringify({ groups: r.spec.groups }));
    const p = spawnSync(join(BIN, "promtool"), ["check", "rules", file], { encoding: "utf8" });
    if (p.status !== 0) throw new Error(`promtool check rules (${r.metadata.name}):\n${p.stdout}${p.stderr}`);
    reports.push(p.stdout.trim().split("\n").pop());
  }
  return reports;
};

/** Renders and validates every overlay; returns the rendered objects by overlay. */
export const validateAll = () => {
  const havePromtool = ensureTools();
  mkdirSync(OUT, { recursive: true });
  const result = {};
  for (const overlay of OVERLAYS) {
    const yaml = render(overlay);
    const file = join(OUT, `${overlay}.yaml`);
    writeFileSync(file, yaml);
    log(`${overlay}: ${kubeconform(file)}`);
    const objects = toObjects(yaml);
    if (havePromtool) for (const line of promtoolCheck(objects, overlay)) log(`${overlay}: promtool: ${line}`);
    else log(`${overlay}: promtool not built (K8S_PROMTOOL=0): alert rules not checked`);
    writeFileSync(join(OUT, `${overlay}.json`), JSON.stringify(objects));
    result[overlay] = objects;
  }
  return { objects: result, promtool: havePromtool };
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
