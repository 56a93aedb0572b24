// `memory backfill-second-opinion` against the distributed runtime's stores (MEMORY_STORE=neo4j):
// segments indexed by the indexer with the second opinion off (real MiniLM), then the command with
// it on (real bge-small-en-v1.5) gives each record and raw turn its vector, the one bge gives its
// text, and leaves another tenant as it was. Skips unless NEO4J_URI is set and the model is fetched.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { SECOND_OPINION_DIR } from "../../services/composition/parts.ts";
import { openStores } from "../../services/composition/stores.ts";
import { loadOnnxEmbedder } from "../../services/core/adapters/onnx/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";
import { dot } from "../../services/core/vector-math.ts";
import { recordVectorText } from "../../services/indexer/derive.ts";
import { indexSegment } from "../../services/indexer/indexer.ts";
import { batchesFor } from "../contract/graph-store.contract.ts";
import { neo4jSkip } from "../helpers/neo4j-env.ts";

const SECOND = join("models", SECOND_OPINION_DIR);
const FIRST = join("models", "all-MiniLM-L6-v2");

test("memory backfill-second-opinion on Neo4j: every item of the tenant, no other tenant", {
  skip:
    neo4jSkip ||
    (existsSync(join(SECOND, "manifest.json")) ? false : "second-opinion model missing: node scripts/setup.mjs"),
}, async () => {
  const env = { ...process.env, MEMORY_STORE: "neo4j", MEMORY_SECOND_OPINION: "" };
  const stores = await openStores(loadConfig({}, env));
  const first = await loadOnnxEmbedder(FIRST);
  const suffix = randomUUID().slice(0, 8);
  // A separator in the name, as tenants are named (acme/eu).
  const tenant = `backfill/${suffix}`;
  const other = `backfill-other-${suffix}`;
  try {
    for (const t of [tenant, other]) {
      for (const b of batchesFor(t)) {
        await indexSegment(
          { graph: stores.graph, vectors: stores.vectors, embedder: first, candidates: false },
          b.segment,
          b.records,
        );
      }
    }
    const missing = (await stores.vectors.idsWithoutSecond?.(tenant, undefined, 1000)) ?? [];
    assert.ok(missing.length > 5, "indexed without second vectors");

    const run = spawnSync(
      process.execPath,
      ["bin/memory.js", "backfill-second-opinion", "--tenant", tenant, "--batch", "4", "--json"],
      {
        encoding: "utf8",
        env: { ...env, MEMORY_SECOND_OPINION: "1" },
        timeout: 120_000,
      },
    );
    assert.equal(run.status, 0, run.stderr);
    const [report] = JSON.parse(run.stdout) as { tenant: string; set: number; withoutText: number; gone: number }[];
    assert.deepEqual({ ...report, ms: 0 }, { tenant, set: missing.length, withoutText: 0, gone: 0, ms: 0 });
    assert.deepEqual(await stores.vectors.idsWithoutSecond?.(tenant, undefined, 1000), []);
    assert.equal(
      (await stores.vectors.idsWithoutSecond?.(other, undefined, 1000))?.length,
      missing.length,
      "the other tenant is untouched",
    );

    // A record's vector is bge's of its text (within the int8 file's per-pass quantization).
    const record = batchesFor(tenant)[0]?.records[0];
    assert.ok(record);
    const second = await loadOnnxEmbedder(SECOND, { variant: "int8" });
    try {
      const [expected] = await second.embed([recordVectorText(record)]);
      const stored = (await stores.vectors.getSecondVectors?.(tenant, [record.id]))?.get(record.id);
      assert.equal(stored?.length, 384);
      assert.ok(dot(stored as Float32Array, expected as Float32Array) > 0.99);
    } finally {
      await second.close?.();
    }
  } finally {
    for (const t of [tenant, other]) {
      await stores.vectors.deleteTenant(t);
      await stores.graph.deleteTenant?.(t);
    }
    await first.close?.();
    await stores.close();
  }
});
