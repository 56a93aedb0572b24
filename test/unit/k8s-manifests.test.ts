/**
 * The Kubernetes manifests (k8s/) against the code they deploy. scripts/k8s-validate.mjs renders
 * both overlays with kustomize and decodes every object strictly against the vendored Kubernetes
 * and CRD schemas (kubeconform) and the alert rules with promtool; the checks below are what a
 * schema cannot know: that the environment matches what services/ reads, that probes hit served
 * paths, that autoscaling follows the topics, that secrets and metrics stay private.
 * Needs Go to build the tools once into .tools/bin; without Go (and no cached tools) it is skipped,
 * except in CI (CI=true), where that is a failure.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { KafkaConfigSchema } from "../../services/core/config.ts";
import { RAW_TURN_STAGE } from "../../services/indexer/raw-turn-stage.ts";

// biome-ignore lint/suspicious/noExplicitAny: rendered Kubernetes objects are arbitrary JSON
type Obj = any;

const ROOT = join(import.meta.dirname, "..", "..");
const STAGES = ["sensory", "segmenter", "encoder", "indexer"] as const;
/** Each stage's input, by topic role (checked against services/<stage>/main.ts below). */
const STAGE_INPUT = { sensory: "turns", segmenter: "sensory", encoder: "segments", indexer: "records" } as const;
const TOPICS = KafkaConfigSchema.parse(undefined).topics;

const toolsCached = ["kustomize", "kubeconform", "yaml2json"].every((t) => existsSync(join(ROOT, ".tools", "bin", t)));
// As scripts/k8s-validate.mjs finds it: $GO, `go` on the PATH, else the usual install folder.
const GO =
  process.env.GO ??
  (spawnSync("go", ["version"], { stdio: "ignore" }).status !== 0 && existsSync("/usr/local/go/bin/go")
    ? "/usr/local/go/bin/go"
    : "go");
const goPresent = spawnSync(GO, ["version"], { stdio: "ignore" }).status === 0;
const skip =
  !toolsCached && !goPresent && process.env.CI !== "true"
    ? "go is not installed and .tools/bin is empty: cannot build kustomize / kubeconform (README Kubernetes)"
    : false;

// --- What the code reads ----------------------------------------------------------------------------

const sources = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );

/** Every environment variable services/ reads: process.env.X, env.X, envInt("X"), config's ENV_PATHS. */
const readByCode = (): Set<string> => {
  const names = new Set<string>();
  for (const file of sources(join(ROOT, "services"))) {
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(/\benv(?:\.|\[")([A-Z][A-Z0-9_]+)/g)) names.add(m[1] as string);
    for (const m of text.matchAll(/envInt\("([A-Z][A-Z0-9_]+)"/g)) names.add(m[1] as string);
    const block = /const ENV_PATHS[^{]*\{([\s\S]*?)\n\};/.exec(text);
    if (block) for (const m of (block[1] as string).matchAll(/^\s+([A-Z][A-Z0-9_]+):/gm)) names.add(m[1] as string);
  }
  return names;
};

/**
 * Variables each component needs on a cluster: the code's defaults are loopback addresses, the
 * embedded store, no internal token, a development API key, or replication factor 1.
 */
const KAFKA = ["KAFKA_BROKERS", "SCHEMA_REGISTRY_URL", "MEMORY_KAFKA_PARTITIONS", "MEMORY_KAFKA_REPLICATION"];
const NEO4J = ["MEMORY_STORE", "NEO4J_URI", "NEO4J_USER", "NEO4J_PASSWORD"];
const REQUIRED: Record<string, string[]> = {
  sensory: [...KAFKA, "MEMORY_METRICS_HOST"],
  segmenter: [...KAFKA, "MEMORY_METRICS_HOST"],
  encoder: [...KAFKA, "MEMORY_METRICS_HOST"],
  indexer: [...KAFKA, ...NEO4J, "MEMORY_METRICS_HOST"],
  consolidator: [...KAFKA, ...NEO4J, "MEMORY_METRICS_HOST", "MEMORY_CONSOLIDATION_WINDOW"],
  query: [...NEO4J, "MEMORY_QUERY_GRPC_HOST", "MEMORY_METRICS_HOST", "MEMORY_INTERNAL_TOKEN"],
  gateway: [...KAFKA, ...NEO4J, "MEMORY_HTTP_HOST", "MEMORY_QUERY_ADDR", "MEMORY_API_KEYS", "MEMORY_INTERNAL_TOKEN"],
};

// --- Rendered objects ---------------------------------------------------------------------------------

const rendered: Record<string, Obj[]> = {};
const of = (overlay: string, kind: string): Obj[] => (rendered[overlay] ?? []).filter((o) => o.kind === kind);
const named = (overlay: string, kind: string, name: string): Obj => {
  const o = of(overlay, kind).find((x) => x.metadata.name === name);
  assert.ok(o, `${overlay}: ${kind} ${name} is missing`);
  return o;
};
const component = (d: Obj): string => d.metadata.labels["app.kubernetes.io/component"];
const ours = (overlay: string): Obj[] =>
  of(overlay, "Deployment").filter((d) => d.metadata.labels?.["app.kubernetes.io/part-of"] === "streaming-memory");

/** Name -> value ("<secret:name/key>", "<field:path>" or "<configmap:name>") of a container's environment. */
const envOf = (overlay: string, c: Obj): Map<string, string> => {
  const env = new Map<string, string>();
  for (const from of c.envFrom ?? []) {
    assert.ok(from.configMapRef, "envFrom takes ConfigMaps only: Secrets are referenced key by key");
    const cm = named(overlay, "ConfigMap", from.configMapRef.name);
    for (const [k, v] of Object.entries(cm.data)) env.set(k, String(v));
  }
  for (const e of c.env ?? []) {
    const ref = e.valueFrom?.secretKeyRef;
    const field = e.valueFrom?.fieldRef;
    env.set(e.name, ref ? `<secret:${ref.name}/${ref.key}>` : field ? `<field:${field.fieldPath}>` : e.value);
  }
  return env;
};

describe("k8s manifests", { skip }, () => {
  before(() => {
    const r = spawnSync(process.execPath, [join(ROOT, "scripts", "k8s-validate.mjs"), "--json"], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 15 * 60_000,
    });
    assert.equal(r.status, 0, `scripts/k8s-validate.mjs failed:\n${r.stdout}\n${r.stderr}`);
    for (const overlay of ["dev", "prod"])
      rendered[overlay] = JSON.parse(readFileSync(join(ROOT, ".tools", "rendered", `${overlay}.json`), "utf8"));
  });

  it("renders every component in both overlays", () => {
    for (const overlay of ["dev", "prod"])
      assert.deepEqual(
        ours(overlay).map(component).sort(),
        [...STAGES, "consolidator", "gateway", "query"].sort(),
        overlay,
      );
  });

  it("sets only variables the code reads, and every variable a component needs", () => {
    const read = readByCode();
    for (const [c, names] of Object.entries(REQUIRED))
      for (const n of names) assert.ok(read.has(n), `${n} (required by ${c}) is no longer read by services/`);
    for (const overlay of ["dev", "prod"])
      for (const d of ours(overlay)) {
        const env = envOf(overlay, d.spec.template.spec.containers[0]);
        for (const name of env.keys())
          assert.ok(read.has(name), `${overlay}: ${d.metadata.name} sets ${name}, which services/ never reads`);
        for (const name of REQUIRED[component(d)] ?? [])
          assert.ok(env.has(name), `${overlay}: ${d.metadata.name} does not set ${name}`);
      }
  });

  it("points the gateway at the query Service and binds every server to the pod's address", () => {
    for (const overlay of ["dev", "prod"]) {
      const gw = envOf(overlay, named(overlay, "Deployment", "memory-gateway").spec.template.spec.containers[0]);
      const svc = named(overlay, "Service", "memory-query");
      const port = svc.spec.ports.find((p: Obj) => p.name === "grpc").port;
      assert.equal(gw.get("MEMORY_QUERY_ADDR"), `memory-query.${svc.metadata.namespace}.svc.cluster.local:${port}`);
      const q = envOf(overlay, named(overlay, "Deployment", "memory-query").spec.template.spec.containers[0]);
      assert.equal(q.get("MEMORY_QUERY_GRPC_PORT"), String(port));
      assert.equal(gw.get("MEMORY_INTERNAL_TOKEN"), q.get("MEMORY_INTERNAL_TOKEN"), "one internal token for both");
      for (const d of ours(overlay)) {
        const env = envOf(overlay, d.spec.template.spec.containers[0]);
        for (const [k, v] of env) if (k.endsWith("_HOST")) assert.equal(v, "0.0.0.0", `${d.metadata.name} ${k}`);
      }
    }
  });

  it("probes served paths on declared ports, with startup probes and drain time", () => {
    for (const overlay of ["dev", "prod"])
      for (const d of ours(overlay)) {
        const spec = d.spec.template.spec;
        const c = spec.containers[0];
        const ports = new Set(c.ports.map((p: Obj) => p.name));
        for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
          assert.ok(c[probe]?.httpGet, `${d.metadata.name}: ${probe}`);
          assert.ok(ports.has(c[probe].httpGet.port), `${d.metadata.name}: ${probe} port ${c[probe].httpGet.port}`);
        }
        assert.equal(c.livenessProbe.httpGet.path, "/healthz");
        // Every process serves /readyz (stages: process.ts, ready once the consumer joined).
        const stage = (STAGES as readonly string[]).includes(component(d));
        assert.equal(c.readinessProbe.httpGet.path, "/readyz", d.metadata.name);
        // Kafka transaction timeout (stage-runtime.ts) is 60 s; gRPC deadline 30 s.
        assert.ok(spec.terminationGracePeriodSeconds > (stage ? 60 : 30), `${d.metadata.name}: grace period`);
      }
    const runtime = readFileSync(join(ROOT, "services", "core", "adapters", "kafka", "stage-runtime.ts"), "utf8");
    assert.match(runtime, /transactionTimeout: 60_000/, "update the stages' terminationGracePeriodSeconds");
  });

  it("runs every pod non-root, read-only, without privilege escalation or capabilities", () => {
    for (const overlay of ["dev", "prod"])
      for (const d of of(overlay, "Deployment")) {
        const spec = d.spec.template.spec;
        assert.equal(spec.securityContext.runAsNonRoot, true, d.metadata.name);
        assert.ok(Number.isInteger(spec.securityContext.runAsUser) && spec.securityContext.runAsUser > 0);
        assert.equal(spec.securityContext.seccompProfile.type, "RuntimeDefault");
        assert.equal(spec.automountServiceAccountToken, false, d.metadata.name);
        for (const c of spec.containers) {
          assert.equal(c.securityContext.allowPrivilegeEscalation, false, d.metadata.name);
          assert.equal(c.securityContext.readOnlyRootFilesystem, true, d.metadata.name);
          assert.deepEqual(c.securityContext.capabilities.drop, ["ALL"], d.metadata.name);
          assert.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory);
        }
      }
  });

  it("commits no secret values and gives each pod only the secrets it uses", () => {
    for (const overlay of ["dev", "prod"]) {
      assert.deepEqual(of(overlay, "Secret"), [], `${overlay}: Secrets are created by the user (README)`);
      for (const d of ours(overlay)) {
        const env = envOf(overlay, d.spec.template.spec.containers[0]);
        const secrets = [...env.values()].filter((v) => v.startsWith("<secret:")).sort();
        const expected: Record<string, string[]> = {
          gateway: [
            "<secret:memory-api-keys/keys>",
            "<secret:memory-internal-token/token>",
            "<secret:memory-neo4j/password>",
          ],
          query: [
            "<secret:memory-internal-token/token>",
            "<secret:memory-llm/api-key>",
            "<secret:memory-neo4j/password>",
          ],
          indexer: ["<secret:memory-neo4j/password>"],
          consolidator: ["<secret:memory-neo4j/password>"],
          encoder: ["<secret:memory-llm/api-key>"],
        };
        assert.deepEqual(secrets, (expected[component(d)] ?? []).sort(), d.metadata.name);
      }
    }
  });

  it("exposes only the gateway publicly, the query service to the gateway, metrics on no public Service", () => {
    for (const overlay of ["dev", "prod"]) {
      const gw = named(overlay, "Service", "memory-gateway");
      assert.deepEqual(gw.spec.ports.map((p: Obj) => p.targetPort).sort(), ["grpc", "http"]);
      assert.deepEqual(
        named(overlay, "Service", "memory-query").spec.ports.map((p: Obj) => p.targetPort),
        ["grpc"],
      );
      const deny = named(overlay, "NetworkPolicy", "memory-default-deny-ingress");
      assert.deepEqual(deny.spec.policyTypes, ["Ingress"]);
      assert.equal(deny.spec.ingress, undefined);
      const q = named(overlay, "NetworkPolicy", "memory-query");
      assert.deepEqual(q.spec.ingress, [
        {
          from: [
            {
              podSelector: {
                matchLabels: {
                  "app.kubernetes.io/part-of": "streaming-memory",
                  "app.kubernetes.io/component": "gateway",
                },
              },
            },
          ],
          ports: [{ port: "grpc", protocol: "TCP" }],
        },
      ]);
      for (const s of of(overlay, "Service").filter((x) => x.spec.clusterIP !== "None"))
        for (const p of s.spec.ports) assert.notEqual(p.targetPort, "metrics", `${s.metadata.name} exposes metrics`);
      // The gateway serves /metrics on its own port (MEMORY_METRICS_PORT), not on the public one.
      const gwEnv = new Map(
        ours(overlay)
          .find((d) => component(d) === "gateway")
          ?.spec.template.spec.containers[0].env.map((e: Obj) => [e.name, e.value]),
      );
      assert.equal(gwEnv.get("MEMORY_METRICS_PORT"), "9100");
    }
  });

  it("scales each stage on its consumer group's lag, capped at the partitions, without replicas fields", () => {
    const main = (stage: string) => readFileSync(join(ROOT, "services", stage, "main.ts"), "utf8");
    const process = readFileSync(join(ROOT, "services", "core", "adapters", "kafka", "process.ts"), "utf8");
    assert.match(process, /groupId: `\$\{config\.kafka\.topicPrefix\}memory-\$\{stage\}`/, "consumer group name");
    const cm = named("prod", "ConfigMap", "memory-kafka").data;
    const partitions = Number(cm.MEMORY_KAFKA_PARTITIONS);
    // KEDA's kafka scaler metadata is a free-form map: the schema cannot catch a misspelt key.
    const KNOWN = new Set([
      "bootstrapServers",
      "consumerGroup",
      "topic",
      "lagThreshold",
      "activationLagThreshold",
      "offsetResetPolicy",
      "allowIdleConsumers",
      "scaleToZeroOnInvalidOffset",
      "excludePersistentLag",
      "limitToPartitionsWithLag",
    ]);
    /** The indexer process also runs its raw-turn consumer (services/indexer/main.ts): its lag scales the pods too. */
    const COMPANIONS: Partial<Record<(typeof STAGES)[number], { group: string; input: keyof typeof TOPICS }[]>> = {
      indexer: [{ group: `memory-${RAW_TURN_STAGE}`, input: "sensory" }],
    };
    assert.match(main("indexer"), /rawTurnStage\(\{\s*input: codecs\.sensory\b/, "the raw-turn consumer's input");
    for (const stage of STAGES) {
      assert.match(main(stage), new RegExp(`input: codecs\\.${STAGE_INPUT[stage]}\\b`), `${stage} input`);
      const so = named("prod", "ScaledObject", `memory-${stage}`);
      assert.equal(so.spec.scaleTargetRef.name, `memory-${stage}`);
      const [trigger, ...rest] = so.spec.triggers;
      const companions = COMPANIONS[stage] ?? [];
      assert.equal(rest.length, companions.length);
      for (const [i, c] of companions.entries()) {
        const t = rest[i];
        assert.equal(t.type, "kafka");
        for (const k of Object.keys(t.metadata)) assert.ok(KNOWN.has(k), `${stage}: unknown KEDA kafka key ${k}`);
        assert.equal(t.metadata.consumerGroup, c.group);
        assert.equal(t.metadata.topic, TOPICS[c.input]);
        assert.equal(t.metadata.bootstrapServers, cm.KAFKA_BROKERS);
        assert.equal(t.metadata.offsetResetPolicy, "earliest");
        assert.ok(Number(t.metadata.lagThreshold) > 0);
      }
      assert.equal(trigger.type, "kafka");
      for (const k of Object.keys(trigger.metadata)) assert.ok(KNOWN.has(k), `${stage}: unknown KEDA kafka key ${k}`);
      assert.equal(trigger.metadata.consumerGroup, `memory-${stage}`);
      assert.equal(trigger.metadata.topic, TOPICS[STAGE_INPUT[stage]]);
      assert.equal(trigger.metadata.bootstrapServers, cm.KAFKA_BROKERS);
      assert.equal(trigger.metadata.offsetResetPolicy, "earliest");
      assert.ok(Number(trigger.metadata.lagThreshold) > 0);
      assert.ok(so.spec.maxReplicaCount <= partitions, `${stage}: maxReplicaCount > ${partitions} partitions`);
      const behavior = so.spec.advanced.horizontalPodAutoscalerConfig.behavior;
      assert.ok(behavior.scaleUp.policies.length > 0 && behavior.scaleDown.stabilizationWindowSeconds >= 60);
    }
    for (const overlay of ["dev", "prod"])
      for (const d of ours(overlay)) assert.equal(d.spec.replicas, undefined, `${overlay}: ${d.metadata.name}`);
    assert.deepEqual(of("dev", "ScaledObject"), [], "dev runs one replica of each stage");
    assert.deepEqual(
      of("prod", "HorizontalPodAutoscaler")
        .map((h) => h.spec.scaleTargetRef.name)
        .sort(),
      ["memory-gateway", "memory-query"],
    );
  });

  it("scales the consolidator on its group's update-queue lag, only inside its window, to zero", () => {
    const cm = named("prod", "ConfigMap", "memory-kafka").data;
    const so = named("prod", "ScaledObject", "memory-consolidator");
    const env = envOf("prod", named("prod", "Deployment", "memory-consolidator").spec.template.spec.containers[0]);
    assert.equal(so.spec.minReplicaCount, 0);
    assert.ok(so.spec.maxReplicaCount <= Number(cm.MEMORY_KAFKA_PARTITIONS));
    const lag = so.spec.triggers.find((t: Obj) => t.type === "kafka");
    const cron = so.spec.triggers.find((t: Obj) => t.type === "cron");
    assert.equal(lag.metadata.consumerGroup, env.get("MEMORY_CONSOLIDATOR_GROUP"));
    assert.equal(lag.metadata.topic, TOPICS.updateQueue);
    assert.equal(lag.metadata.offsetResetPolicy, "earliest");
    // The cron trigger covers the same UTC hours as the service's window.
    const [from, to] = String(env.get("MEMORY_CONSOLIDATION_WINDOW")).split("-");
    const cronAt = (hhmm: string) => `${Number(hhmm.split(":")[1])} ${Number(hhmm.split(":")[0])} * * *`;
    assert.equal(cron.metadata.timezone, "Etc/UTC");
    assert.equal(cron.metadata.start, cronAt(from as string));
    assert.equal(cron.metadata.end, cronAt(to as string));
    assert.equal(so.spec.advanced.scalingModifiers.formula, `${cron.name} * ${lag.name}`);
  });

  it("declares the topics with the services' partitions, compaction and replication", () => {
    for (const [overlay, rf] of [
      ["dev", 1],
      ["prod", 3],
    ] as const) {
      const cm = named(overlay, "ConfigMap", "memory-kafka").data;
      assert.equal(Number(cm.MEMORY_KAFKA_REPLICATION), rf);
      const topics = new Map(of(overlay, "KafkaTopic").map((t) => [t.spec.topicName, t.spec]));
      const compacted = [TOPICS.updateQueue, "memory.segmenter-state.v1", "memory.encoder-state.v1"];
      for (const name of [...Object.values(TOPICS), ...compacted]) {
        const t = topics.get(name);
        assert.ok(t, `${overlay}: KafkaTopic ${name}`);
        assert.equal(t.partitions, Number(cm.MEMORY_KAFKA_PARTITIONS), `${overlay}: ${name} partitions`);
        assert.equal(t.replicas, rf, `${overlay}: ${name} replicas`);
        assert.equal(t.config["cleanup.policy"] === "compact", compacted.includes(name), `${overlay}: ${name} policy`);
      }
      const pool = named(overlay, "KafkaNodePool", "dual-role");
      assert.ok(pool.spec.replicas >= rf);
      const kafka = named(overlay, "Kafka", "memory-kafka").spec.kafka.config;
      assert.equal(kafka["transaction.state.log.replication.factor"], rf, "the stages use transactions");
      assert.equal(topics.get("kafkasql-journal")?.partitions, 1, "the registry's journal is one ordered log");
    }
  });

  it("gives every production Deployment a PodDisruptionBudget and topology spread", () => {
    const pdbs = of("prod", "PodDisruptionBudget");
    for (const d of ours("prod")) {
      const labels = d.spec.template.metadata.labels;
      const match = (sel: Obj) => Object.entries(sel.matchLabels).every(([k, v]) => labels[k] === v);
      assert.ok(
        pdbs.some((p) => match(p.spec.selector)),
        `${d.metadata.name}: no PodDisruptionBudget`,
      );
      const spread = d.spec.template.spec.topologySpreadConstraints ?? [];
      assert.deepEqual(spread.map((s: Obj) => s.topologyKey).sort(), [
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
      ]);
    }
    assert.deepEqual(of("dev", "PodDisruptionBudget"), []);
  });

  it("monitors with metric names the code exports", () => {
    const exported = new Set<string>();
    for (const file of sources(join(ROOT, "services")))
      for (const m of readFileSync(file, "utf8").matchAll(/name: "(memory_[a-z_]+)"/g)) exported.add(m[1] as string);
    const used = (text: string) =>
      [...text.matchAll(/\b(memory_[a-z_]+)/g)].map((m) => (m[1] as string).replace(/_(bucket|sum|count)$/, ""));
    const rules = named("prod", "PrometheusRule", "memory");
    const alerts = rules.spec.groups.flatMap((g: Obj) => g.rules.map((r: Obj) => r.alert)).sort();
    assert.deepEqual(alerts, [
      "MemoryConsolidationFailing",
      "MemoryConsolidationNotRun",
      "MemoryConsumerLagGrowing",
      "MemoryDeadLetterRate",
      "MemoryPartitionPausedTooLong",
      "MemoryPodNotReady",
      "MemoryScrapeDown",
    ]);
    const dashboard = JSON.parse(named("prod", "ConfigMap", "memory-grafana-dashboard").data["memory-dashboard.json"]);
    const exprs = [
      ...rules.spec.groups.flatMap((g: Obj) => g.rules.map((r: Obj) => r.expr)),
      ...dashboard.panels.flatMap((p: Obj) => p.targets.map((t: Obj) => t.expr)),
    ];
    for (const name of exprs.flatMap(used)) assert.ok(exported.has(name), `${name} is not exported by services/`);
    const sm = named("prod", "ServiceMonitor", "memory");
    assert.deepEqual(
      sm.spec.endpoints.map((e: Obj) => e.port),
      ["metrics"],
    );
  });

  it("validates what the cluster would: kubeconform rejects a misspelt field", () => {
    // The strict schemas are what make the checks above trustworthy: prove they bite.
    const bad = readFileSync(join(ROOT, ".tools", "rendered", "prod.yaml"), "utf8").replace(
      "readOnlyRootFilesystem: true",
      "readOnlyRootFileSystem: true",
    );
    const r = spawnSync(
      join(ROOT, ".tools", "bin", "kubeconform"),
      ["-strict", "-schema-location", "k8s/schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json", "-"],
      { cwd: ROOT, input: bad, encoding: "utf8" },
    );
    assert.notEqual(r.status, 0);
    assert.match(r.stdout, /additional properties 'readOnlyRootFileSystem' not allowed/);
    // And the rendered image name carries a tag (no :latest).
    for (const d of ours("prod")) assert.match(d.spec.template.spec.containers[0].image, /:[0-9][\w.-]*$/);
  });
});
