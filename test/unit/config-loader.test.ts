// The config loader: every setting a process reads comes through it, good values land in their
// fields, and a bad value stops loading with the field and the variable (or file) named, never
// the value (passwords and keys are settings too).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { CONFIG_DEFAULTS, loadConfig, vectorStoreKind } from "../../services/core/config.ts";
import { DEFAULT_QUERY_SETTINGS } from "../../services/query/query.ts";

/** Only the variables given: no config file (MEMORY_CONFIG empty). */
const env = (vars: Record<string, string> = {}): NodeJS.ProcessEnv => ({ MEMORY_CONFIG: "", ...vars });

describe("config loader: process settings", () => {
  it("keeps the documented defaults", () => {
    const c = loadConfig({}, env());
    assert.deepEqual(c.store, { kind: "embedded" });
    assert.equal(vectorStoreKind(c), "hnsw");
    assert.deepEqual(c.neo4j, { uri: "bolt://127.0.0.1:7687", user: "neo4j", password: "" });
    assert.deepEqual(c.qdrant, { collection: "memory_vectors" });
    assert.deepEqual(c.metrics, {});
    assert.deepEqual(c.grpc, { port: 50051 });
    assert.deepEqual(c.queryService, { host: "127.0.0.1", port: 50052, address: "127.0.0.1:50052" });
    assert.equal(c.internalToken, undefined);
    assert.equal(c.kafka.maxChunk, 50);
    assert.equal(c.kafka.debug, false);
    assert.equal(c.llm.apiKey, undefined);
  });

  it("writes the query depths once: the schema's defaults are the query's defaults", () => {
    assert.equal(CONFIG_DEFAULTS.query.routeDepth, 40);
    assert.equal(CONFIG_DEFAULTS.query.candidates, 80);
    assert.deepEqual(DEFAULT_QUERY_SETTINGS, CONFIG_DEFAULTS.query);
  });

  it("reads every process setting from its variable", () => {
    const c = loadConfig(
      {},
      env({
        MEMORY_STORE: "neo4j",
        MEMORY_VECTOR_STORE: "qdrant",
        NEO4J_URI: "neo4j://db:7687",
        NEO4J_USER: "memory",
        NEO4J_PASSWORD: "pw",
        NEO4J_DATABASE: "mem",
        QDRANT_URL: "http://qdrant:6333",
        QDRANT_API_KEY: "qk",
        MEMORY_QDRANT_COLLECTION: "vectors_a",
        MEMORY_METRICS_HOST: "0.0.0.0",
        MEMORY_METRICS_PORT: "0",
        MEMORY_GRPC_HOST: "::",
        MEMORY_GRPC_PORT: "6000",
        MEMORY_QUERY_GRPC_HOST: "10.0.0.2",
        MEMORY_QUERY_GRPC_PORT: "6001",
        MEMORY_QUERY_ADDR: "query.svc:6001",
        MEMORY_INTERNAL_TOKEN: "internal-token",
        MEMORY_STAGE_MAX_CHUNK: "7",
        KAFKAJS_DEBUG: "1",
      }),
    );
    assert.deepEqual(c.store, { kind: "neo4j", vectors: "qdrant" });
    assert.equal(vectorStoreKind(c), "qdrant");
    assert.deepEqual(c.neo4j, { uri: "neo4j://db:7687", user: "memory", password: "pw", database: "mem" });
    assert.deepEqual(c.qdrant, { url: "http://qdrant:6333", apiKey: "qk", collection: "vectors_a" });
    assert.deepEqual(c.metrics, { host: "0.0.0.0", port: 0 });
    assert.deepEqual(c.grpc, { host: "::", port: 6000 });
    assert.deepEqual(c.queryService, { host: "10.0.0.2", port: 6001, address: "query.svc:6001" });
    assert.equal(c.internalToken, "internal-token");
    assert.equal(c.kafka.maxChunk, 7);
    assert.equal(c.kafka.debug, true);
    assert.equal(vectorStoreKind(loadConfig({}, env({ MEMORY_STORE: "neo4j" }))), "neo4j");
  });

  it("reads KAFKAJS_DEBUG as on unless it says off", () => {
    for (const on of ["1", "true", "yes", "debug"])
      assert.equal(loadConfig({}, env({ KAFKAJS_DEBUG: on })).kafka.debug, true);
    for (const off of ["0", "false", "No", "off"])
      assert.equal(loadConfig({}, env({ KAFKAJS_DEBUG: off })).kafka.debug, false);
  });

  it("falls back to OPENAI_API_KEY for the LLM key; MEMORY_LLM_API_KEY wins", () => {
    assert.equal(loadConfig({}, env({ OPENAI_API_KEY: "sk-openai" })).llm.apiKey, "sk-openai");
    assert.equal(
      loadConfig({}, env({ OPENAI_API_KEY: "sk-openai", MEMORY_LLM_API_KEY: "sk-memory" })).llm.apiKey,
      "sk-memory",
    );
  });

  it("stops on a bad value with the field and the variable named", () => {
    const cases: [string, string, string][] = [
      ["MEMORY_HTTP_PORT", "http", "http.port"],
      ["MEMORY_HTTP_PORT", "70000", "http.port"],
      ["MEMORY_METRICS_PORT", "nine", "metrics.port"],
      ["MEMORY_METRICS_PORT", "91.5", "metrics.port"],
      ["MEMORY_GRPC_PORT", "-1", "grpc.port"],
      ["MEMORY_QUERY_GRPC_PORT", "x", "queryService.port"],
      ["MEMORY_QUERY_ADDR", "no-port", "queryService.address"],
      ["MEMORY_STAGE_MAX_CHUNK", "0", "kafka.maxChunk"],
      ["MEMORY_STORE", "mongo", "store.kind"],
      ["MEMORY_VECTOR_STORE", "faiss", "store.vectors"],
      ["QDRANT_URL", "not a url", "qdrant.url"],
      ["MEMORY_KAFKA_PARTITIONS", "many", "kafka.partitions"],
      ["MEMORY_KEEP_RATE", "2", "sensory.keepRate"],
      ["MEMORY_QUERY_BUDGET", "lots", "query.budget"],
      ["MEMORY_LLM_PROVIDER", "claude", "llm.provider"],
    ];
    for (const [name, value, field] of cases)
      assert.throws(
        () => loadConfig({}, env({ [name]: value })),
        (err: Error) => {
          assert.match(err.message, /^invalid configuration: /, name);
          assert.ok(err.message.includes(`${field}: `), `${name}=${value}: ${err.message}`);
          assert.ok(err.message.includes(`[${name}]`), `${name}=${value}: ${err.message}`);
          return true;
        },
      );
  });

  it("never prints the value of a bad setting", () => {
    assert.throws(
      () => loadConfig({}, env({ MEMORY_CURSOR_SECRET: "short-secret" })),
      (err: Error) => {
        assert.match(err.message, /cursorSecret: must be at least 16 characters \[MEMORY_CURSOR_SECRET\]/);
        assert.doesNotMatch(err.message, /short-secret/);
        return true;
      },
    );
  });

  it("names the variables of a rule over several fields", () => {
    assert.throws(
      () => loadConfig({}, env({ MEMORY_VECTOR_STORE: "qdrant" })),
      /qdrant\.url: required with store\.vectors qdrant \(set QDRANT_URL\)/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_STORE: "neo4j", MEMORY_VECTOR_STORE: "hnsw" })),
      /store\.vectors: hnsw needs store\.kind embedded \[MEMORY_VECTOR_STORE\]/,
    );
    assert.throws(
      () => loadConfig({}, env({ MEMORY_STORE: "embedded", MEMORY_VECTOR_STORE: "neo4j" })),
      /store\.vectors: neo4j vectors need store\.kind neo4j \[MEMORY_VECTOR_STORE\]/,
    );
    assert.throws(() => loadConfig({}, env({ MEMORY_LLM_PLANNER: "llm" })), /llm: .*\[MEMORY_LLM_PLANNER\]/);
  });

  it("names the file when the bad value came from it, and nothing for an override", () => {
    const dir = mkdtempSync(join(tmpdir(), "config-loader-"));
    try {
      const file = join(dir, "memory.config.json");
      writeFileSync(file, JSON.stringify({ grpc: { port: "x" } }));
      assert.throws(
        () => loadConfig({}, { MEMORY_CONFIG: file }),
        (err: Error) => {
          assert.ok(err.message.includes(`grpc.port: `), err.message);
          assert.ok(err.message.includes(`[file ${file}]`), err.message);
          return true;
        },
      );
      // The variable wins over the file, and is the one named.
      assert.throws(
        () => loadConfig({}, { MEMORY_CONFIG: file, MEMORY_GRPC_PORT: "y" }),
        /grpc\.port: .*\[MEMORY_GRPC_PORT\]/,
      );
      // A bad override is nobody's variable, even with a file present.
      assert.throws(
        () => loadConfig({ grpc: { port: "w" } }, { MEMORY_CONFIG: file }),
        (err: Error) => {
          assert.match(err.message, /grpc\.port: /);
          assert.doesNotMatch(err.message, /\[/);
          return true;
        },
      );
      // An override replaces what the variables said: the message names no variable.
      assert.throws(
        () => loadConfig({ grpc: { port: "z" } }, env({ MEMORY_GRPC_PORT: "6000" })),
        (err: Error) => {
          assert.match(err.message, /grpc\.port: /);
          assert.doesNotMatch(err.message, /\[/);
          return true;
        },
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
