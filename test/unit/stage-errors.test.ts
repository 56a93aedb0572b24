/**
 * The stage runtime's failure policy (issue 12): which errors are a dependency down (retried
 * without end, the partition paused) and which are the value's fault (dead letter), the backoff
 * between retries, since when a dependency has been down, and the replication check of topic
 * creation. Pure: no broker.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkReplication, ReplicationConfigError } from "../../services/core/adapters/kafka/admin.ts";
import { backoffDelay, seededRandom } from "../../services/core/adapters/kafka/backoff.ts";
import { DependencyHealth } from "../../services/core/adapters/kafka/dependency-health.ts";
import { classifyError, isFenced } from "../../services/core/adapters/kafka/error-class.ts";
import { PoisonError } from "../../services/core/adapters/kafka/stage-runtime-parts.ts";
import { loadConfig } from "../../services/core/config.ts";

const withProps = (message: string, props: Record<string, unknown>, name?: string): Error => {
  const e = Object.assign(new Error(message), props);
  if (name) e.name = name;
  return e;
};

describe("classifyError", () => {
  it("a dependency down is transient, named", () => {
    assert.deepEqual(classifyError(withProps("connect ECONNREFUSED 127.0.0.1:7687", { code: "ECONNREFUSED" })), {
      kind: "transient",
      dependency: "network",
    });
    assert.deepEqual(classifyError(withProps("x", { code: "ServiceUnavailable" }, "Neo4jError")), {
      kind: "transient",
      dependency: "neo4j",
    });
    assert.deepEqual(classifyError(withProps("x", { code: "SessionExpired" }, "Neo4jError")), {
      kind: "transient",
      dependency: "neo4j",
    });
    assert.deepEqual(
      classifyError(withProps("x", { code: "Neo.TransientError.Transaction.DeadlockDetected" }, "Neo4jError")),
      { kind: "transient", dependency: "neo4j" },
    );
    assert.equal(classifyError(withProps("rate limited", { status: 429 }, "LlmRequestError")).kind, "transient");
    assert.deepEqual(classifyError(withProps("llm: bad gateway", { status: 502 }, "LlmRequestError")), {
      kind: "transient",
      dependency: "llm",
    });
    assert.equal(classifyError(withProps("timed out", {}, "TimeoutError")).kind, "transient");
    assert.deepEqual(classifyError(withProps("Connection error", {}, "KafkaJSConnectionError")), {
      kind: "transient",
      dependency: "kafka",
    });
  });

  it("looks through cause and AggregateError, and takes the call site's hint", () => {
    const fetchFailed = new TypeError("fetch failed", { cause: withProps("refused", { code: "ECONNREFUSED" }) });
    assert.deepEqual(classifyError(fetchFailed, "registry"), { kind: "transient", dependency: "registry" });
    const agg = new AggregateError([withProps("a", { code: "ECONNREFUSED" })], "");
    assert.deepEqual(
      classifyError(withProps("", { code: "ECONNREFUSED", errors: agg.errors }, "AxiosError"), "registry"),
      {
        kind: "transient",
        dependency: "registry",
      },
    );
    const wrapped = new Error("indexer: write failed", { cause: withProps("x", { code: "ServiceUnavailable" }) });
    assert.deepEqual(classifyError(wrapped), { kind: "transient", dependency: "neo4j" });
    assert.deepEqual(classifyError(withProps("Unknown error", { status: 503 }), "registry"), {
      kind: "transient",
      dependency: "registry",
    });
  });

  it("the value's fault is permanent; the stage's decision wins over a wrapped timeout", () => {
    assert.deepEqual(classifyError(new PoisonError("key does not match")), { kind: "permanent" });
    assert.deepEqual(classifyError(withProps("invalid", {}, "ValidationError")), { kind: "permanent" });
    assert.deepEqual(classifyError(withProps("invalid output after 2 attempts", {}, "LlmEncoderError")), {
      kind: "permanent",
    });
    assert.deepEqual(classifyError(withProps("Schema not found", { status: 404 }), "registry"), { kind: "permanent" });
    assert.deepEqual(classifyError(withProps("bad request", { status: 400 })), { kind: "permanent" });
    assert.deepEqual(classifyError(new PoisonError("x", { cause: withProps("t", { code: "ETIMEDOUT" }) })), {
      kind: "permanent",
    });
  });

  it("anything else is unknown (bounded retries, then the DLQ)", () => {
    assert.deepEqual(classifyError(new Error("boom")), { kind: "unknown" });
    assert.deepEqual(classifyError("a string"), { kind: "unknown" });
    assert.deepEqual(classifyError(undefined), { kind: "unknown" });
    // An entity another transaction deleted under this one (an erasure racing a write): a few
    // retries, not a dead letter on the first attempt; a statement's own deleted entity stays permanent.
    const raced = withProps(
      "Unable to load NODE 4:1393e0c3-8150-46e8-a9da-4be4418c78d8:942.",
      { code: "Neo.ClientError.Statement.EntityNotFound" },
      "Neo4jError",
    );
    assert.deepEqual(classifyError(raced), { kind: "unknown" });
    assert.deepEqual(classifyError(new Error("indexer: write failed", { cause: raced })), { kind: "unknown" });
    const ownDelete = withProps(
      "Node with id 11 has been deleted in this transaction",
      { code: "Neo.ClientError.Statement.EntityNotFound" },
      "Neo4jError",
    );
    assert.deepEqual(classifyError(ownDelete), { kind: "permanent" });
    const cyclic: Error & { cause?: unknown } = new Error("loop");
    cyclic.cause = cyclic;
    assert.deepEqual(classifyError(cyclic), { kind: "unknown" });
  });
});

describe("isFenced", () => {
  it("recognises a fenced producer through kafkajs's wrapping", () => {
    const protocol = withProps("Producer attempted an operation with an old epoch. Either there is a newer producer", {
      type: "INVALID_PRODUCER_EPOCH",
    });
    assert.equal(isFenced(protocol), true);
    const wrapped = withProps(protocol.message, {}, "KafkaJSNonRetriableError");
    assert.equal(isFenced(wrapped), true);
    assert.equal(isFenced(new Error("x", { cause: withProps("", { type: "PRODUCER_FENCED" }) })), true);
    assert.equal(isFenced(withProps("Connection error", {}, "KafkaJSConnectionError")), false);
    assert.equal(isFenced(undefined), false);
  });
});

describe("backoffDelay", () => {
  const policy = { baseMs: 100, maxMs: 5000 };
  it("doubles from the base, capped, with half of each step jittered", () => {
    assert.equal(
      backoffDelay(1, policy, () => 0),
      50,
    );
    assert.equal(
      backoffDelay(1, policy, () => 0.999999),
      100,
    );
    assert.equal(
      backoffDelay(4, policy, () => 0),
      400,
    );
    assert.equal(
      backoffDelay(10, policy, () => 0),
      2500,
    );
    assert.equal(
      backoffDelay(1000, policy, () => 0.999999),
      5000,
    );
  });
  it("is reproducible with a seed and spreads instances apart", () => {
    const a = Array.from({ length: 8 }, (_, i) => backoffDelay(i + 1, policy, seededRandom(7)));
    const b = Array.from({ length: 8 }, (_, i) => backoffDelay(i + 1, policy, seededRandom(7)));
    assert.deepEqual(a, b);
    const r1 = seededRandom(1);
    const r2 = seededRandom(2);
    const spread = Array.from({ length: 20 }, () => backoffDelay(6, policy, r1) !== backoffDelay(6, policy, r2));
    assert.ok(spread.filter(Boolean).length > 15);
    for (let i = 1; i < 40; i++) {
      const d = backoffDelay(i, policy, r1);
      assert.ok(d >= 25 && d <= 5000, `${d}`);
    }
  });
});

describe("DependencyHealth", () => {
  it("an outage starts at the first failure, is overdue past the limit, ends on success", () => {
    const h = new DependencyHealth();
    assert.deepEqual(h.overdue(0, 1000), []);
    h.failed("neo4j", 1000);
    h.failed("neo4j", 1500);
    h.failed("registry", 1800);
    assert.deepEqual(h.overdue(2000, 1000), []);
    assert.deepEqual(h.overdue(2500, 1000), [{ dependency: "neo4j", downMs: 1500 }]);
    assert.equal(h.overdue(3000, 1000).length, 2);
    assert.deepEqual(h.recovered().sort(), ["neo4j", "registry"]);
    assert.deepEqual(h.overdue(9000, 1000), []);
    assert.equal(h.failing, false);
  });
});

describe("topic replication", () => {
  it("refuses replication 1 on a multi-broker cluster unless allowed", () => {
    assert.doesNotThrow(() => checkReplication({ replicationFactor: 1 }, 1));
    assert.throws(() => checkReplication({ replicationFactor: 1 }, 3), ReplicationConfigError);
    assert.throws(() => checkReplication({ replicationFactor: 1 }, 3), /MEMORY_KAFKA_REPLICATION/);
    assert.doesNotThrow(() => checkReplication({ replicationFactor: 1, allowSingleReplica: true }, 3));
    assert.doesNotThrow(() => checkReplication({ replicationFactor: 3, minInsyncReplicas: 2 }, 3));
    assert.throws(() => checkReplication({ replicationFactor: 3 }, 1), ReplicationConfigError);
    assert.throws(() => checkReplication({ replicationFactor: 2, minInsyncReplicas: 3 }, 3), ReplicationConfigError);
  });
  it("reads RF, min ISR, the override and the dependency limit from the environment", () => {
    const env = {
      MEMORY_CONFIG: "/nonexistent/memory.config.json",
      MEMORY_KAFKA_REPLICATION: "3",
      MEMORY_KAFKA_MIN_INSYNC_REPLICAS: "2",
      MEMORY_KAFKA_ALLOW_SINGLE_REPLICA: "1",
      MEMORY_DEPENDENCY_DOWN_LIMIT_MS: "5000",
      MEMORY_STAGE_RETRY_MAX_MS: "2000",
    };
    const k = loadConfig({}, env).kafka;
    assert.equal(k.replicationFactor, 3);
    assert.equal(k.minInsyncReplicas, 2);
    assert.equal(k.allowSingleReplica, true);
    assert.equal(k.dependencyDownLimitMs, 5000);
    assert.equal(k.retryMaxBackoffMs, 2000);
    const d = loadConfig({}, { MEMORY_CONFIG: "/nonexistent/memory.config.json" }).kafka;
    assert.equal(d.replicationFactor, 1);
    assert.equal(d.minInsyncReplicas, undefined);
    assert.equal(d.allowSingleReplica, false);
    assert.equal(d.dependencyDownLimitMs, 60_000);
  });
});
