#!/usr/bin/env node
// Regenerates the JSON schemas vendored in k8s/schemas/ (kubeconform validates the rendered
// manifests against them offline; see k8s/schemas/README.md for sources and versions).
//   node scripts/k8s-schemas.mjs <kubernetes swagger.json> <CRDs-catalog folder>
// - Kubernetes kinds: from the OpenAPI v2 document of k8s.io/kubernetes (api/openapi-spec/swagger.json
//   of the Go module, e.g. `go mod download -json k8s.io/kubernetes@v1.32.4`), every $ref inlined
//   ("standalone") and every object closed with additionalProperties: false ("strict"), as
//   yannh/kubernetes-json-schema's *-standalone-strict folders are built.
// - CRDs: the JSON schemas of datreeio/CRDs-catalog (generated from the operators' CRDs), closed
//   the same way so that a misspelt field fails there too.
// Only the kinds the manifests use are written: keep KINDS in step with k8s/.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = join(ROOT, "k8s", "schemas");

/** Kubernetes definitions by kubeconform's file name ({{.ResourceKind}}{{.KindSuffix}}.json). */
const KINDS = {
  "namespace-v1": "io.k8s.api.core.v1.Namespace",
  "configmap-v1": "io.k8s.api.core.v1.ConfigMap",
  "secret-v1": "io.k8s.api.core.v1.Secret",
  "service-v1": "io.k8s.api.core.v1.Service",
  "serviceaccount-v1": "io.k8s.api.core.v1.ServiceAccount",
  "persistentvolumeclaim-v1": "io.k8s.api.core.v1.PersistentVolumeClaim",
  "deployment-apps-v1": "io.k8s.api.apps.v1.Deployment",
  "poddisruptionbudget-policy-v1": "io.k8s.api.policy.v1.PodDisruptionBudget",
  "networkpolicy-networking-v1": "io.k8s.api.networking.v1.NetworkPolicy",
  "horizontalpodautoscaler-autoscaling-v2": "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
};

/** CRD schemas by their path in datreeio/CRDs-catalog ({{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json). */
const CRDS = [
  "keda.sh/scaledobject_v1alpha1.json",
  "kafka.strimzi.io/kafka_v1.json",
  "kafka.strimzi.io/kafkanodepool_v1.json",
  "kafka.strimzi.io/kafkatopic_v1.json",
  "monitoring.coreos.com/servicemonitor_v1.json",
  "monitoring.coreos.com/podmonitor_v1.json",
  "monitoring.coreos.com/prometheusrule_v1.json",
];

const [swaggerPath, catalogDir] = process.argv.slice(2);
if (!swaggerPath || !catalogDir) {
  console.error("usage: node scripts/k8s-schemas.mjs <swagger.json> <CRDs-catalog folder>");
  process.exit(2);
}

/** Closes every object that lists its properties, unless it says it keeps unknown fields. */
const strictify = (node) => {
  if (Array.isArray(node)) return node.map(strictify);
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) out[k] = k === "properties" ? mapValues(v, strictify) : strictify(v);
  if (out.properties && out.additionalProperties === undefined && !out["x-kubernetes-preserve-unknown-fields"])
    out.additionalProperties = false;
  return out;
};
const mapValues = (o, f) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, f(v)]));

const swagger = JSON.parse(readFileSync(swaggerPath, "utf8"));
const defs = swagger.definitions;

// What the API server accepts besides the declared type: quantities as numbers, int-or-string.
const SPECIAL = {
  "io.k8s.apimachinery.pkg.api.resource.Quantity": { oneOf: [{ type: "string" }, { type: "number" }] },
  "io.k8s.apimachinery.pkg.util.intstr.IntOrString": { oneOf: [{ type: "string" }, { type: "integer" }] },
};

const inline = (node, seen) => {
  if (Array.isArray(node)) return node.map((n) => inline(n, seen));
  if (node === null || typeof node !== "object") return node;
  if (typeof node.$ref === "string") {
    const name = node.$ref.replace("#/definitions/", "");
    if (SPECIAL[name]) return SPECIAL[name];
    // JSONSchemaProps (CRDs) is recursive; none of the kinds above needs it.
    if (seen.has(name)) return {};
    return inline(defs[name], new Set([...seen, name]));
  }
  if (node.format === "int-or-string") return SPECIAL["io.k8s.apimachinery.pkg.util.intstr.IntOrString"];
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === "x-kubernetes-group-version-kind" || k === "x-kubernetes-list-map-keys") continue;
    out[k] = k === "properties" ? mapValues(v, (p) => inline(p, seen)) : inline(v, seen);
  }
  return out;
};

rmSync(OUT, { recursive: true, force: true });
mkdirSync(join(OUT, "crds"), { recursive: true });
for (const [file, name] of Object.entries(KINDS)) {
  const def = defs[name];
  if (!def) throw new Error(`${name} is not in ${swaggerPath}`);
  const gvk = def["x-kubernetes-group-version-kind"][0];
  const schema = strictify(inline(def, new Set([name])));
  // apiVersion and kind must name this kind exactly (a typo in either picks no schema at all in
  // kubeconform, which -strict + -ignore-missing-schemas=false already reports).
  schema.properties.apiVersion = { type: "string", enum: [gvk.group ? `${gvk.group}/${gvk.version}` : gvk.version] };
  schema.properties.kind = { type: "string", enum: [gvk.kind] };
  schema.$schema = "http://json-schema.org/schema#";
  writeFileSync(join(OUT, `${file}.json`), `${JSON.stringify(schema)}\n`);
}
for (const rel of CRDS) {
  const schema = strictify(JSON.parse(readFileSync(join(catalogDir, rel), "utf8")));
  mkdirSync(dirname(join(OUT, "crds", rel)), { recursive: true });
  writeFileSync(join(OUT, "crds", rel), `${JSON.stringify(schema)}\n`);
}
console.log(`wrote ${Object.keys(KINDS).length} Kubernetes and ${CRDS.length} CRD schemas into ${OUT}`);
