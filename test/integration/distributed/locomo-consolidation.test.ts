// LoCoMo conv-26 and conv-30 through the distributed runtime (gateway + stages + query service on
// Neo4j) and the embedded runtime (issue 13's figures): each conversation is ingested as its own
// tenant, then every question of categories 1-4 is asked at 1,000 and 2,000 tokens, consolidation
// runs (POST /v1/consolidate through the gateway; engine.consolidate embedded) and the questions are
// asked again. Asserted: the consolidation reports and the evidence recall before and after are the
// same in both runtimes. The figures are printed as LOCOMO_CONSOLIDATION {...}.
// Opt-in: LOCOMO_CONVS=conv-26,conv-30 runs both (the figures of issue 13's note). `npm test` covers
// conv-30 in parity.test.ts, on the deployment it already has (one ingest instead of two).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import { loadConfig } from "../../../services/core/config.ts";
import { loadLocomo } from "../../../services/core/datasets/locomo.ts";
import type { ConsolidationReport } from "../../../services/core/maintenance.ts";
import type { QueryResult } from "../../../services/core/query-types.ts";
import { openEmbeddedEngine } from "../../../services/embedded/open.ts";
import { runPrefix } from "../pipeline/helpers.ts";
import {
  cleanUp,
  type Deployment,
  httpJson,
  skip as infraSkip,
  LOCOMO,
  newKey,
  sharedEnv,
  startDeployment,
  tails,
  waitDrained,
} from "./helpers.ts";
import { consolidationCounts as counts, type Recall, recallOf } from "./locomo-recall.ts";

const skip =
  infraSkip ||
  (existsSync(LOCOMO) ? false : `${LOCOMO} not found`) ||
  (process.env.LOCOMO_CONVS
    ? false
    : "opt-in (LOCOMO_CONVS=conv-26,conv-30): conv-30's consolidation parity runs in parity.test.ts");
const CHUNK = 50;

const chunks = <T>(xs: readonly T[], n: number): T[][] =>
  Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, i * n + n));

test("LoCoMo: consolidation counts and recall before -> after are the same through the distributed runtime", {
  skip,
  timeout: 60 * 60_000,
}, async (t) => {
  const progress = (m: string) => process.stderr.write(`[locomo-consolidation ${new Date().toISOString()}] ${m}\n`);
  const wanted = (process.env.LOCOMO_CONVS ?? "").split(",");
  const convs = loadLocomo(LOCOMO).filter((c) => wanted.includes(c.id));
  assert.equal(convs.length, wanted.length, `conversations ${wanted.join(", ")} in the dataset`);
  const run = randomUUID().slice(0, 8);
  const tenants = convs.map((c) => `locomo-${c.id}-${run}`);
  const keys = Object.fromEntries(tenants.map((tenant) => [newKey(), tenant]));
  const keyOf = (tenant: string) => Object.entries(keys).find(([, v]) => v === tenant)?.[0] as string;
  const prefix = runPrefix("locomo-cons");
  const env = sharedEnv(prefix, keys);
  const kafka = kafkaClient(loadConfig({}, env), "locomo-consolidation-test");
  const dir = mkdtempSync(join(tmpdir(), "memory-locomo-cons-"));
  let d: Deployment | undefined;
  const results: Record<string, unknown> = {};
  try {
    // --- Embedded ----------------------------------------------------------------------------------
    const embedded: Record<string, { before: Recall; after: Recall; report: ConsolidationReport }> = {};
    const opened = await openEmbeddedEngine(loadConfig({ dataDir: dir }, env));
    try {
      for (const [i, conv] of convs.entries()) {
        const tenant = tenants[i] as string;
        for (const c of chunks(conv.turns, CHUNK)) await opened.engine.ingest(tenant, conv.id, c);
        await opened.engine.flush(tenant, conv.id);
        await opened.engine.drain();
        const ask = (question: string, budget: number) =>
          opened.engine.query(tenant, { question, conversation: conv.id, budget });
        const before = await recallOf(conv, ask);
        const report = await opened.engine.consolidate(tenant);
        embedded[conv.id] = { before, after: await recallOf(conv, ask), report };
        progress(`embedded ${conv.id}: ${JSON.stringify(embedded[conv.id])}`);
      }
    } finally {
      await opened.close();
    }

    // --- Distributed, through the gateway ------------------------------------------------------------
    d = await startDeployment(prefix, keys);
    const dep = d;
    for (const [i, conv] of convs.entries()) {
      const tenant = tenants[i] as string;
      for (const c of chunks(conv.turns, CHUNK)) {
        const r = await httpJson(dep.http, keyOf(tenant), "POST", `/v1/conversations/${conv.id}/turns:batch`, {
          turns: c,
        });
        assert.equal(r.status, 202, JSON.stringify(r.body));
      }
      assert.equal((await httpJson(dep.http, keyOf(tenant), "POST", `/v1/conversations/${conv.id}/flush`)).status, 202);
      // One conversation indexed before the next (they are separate tenants; this keeps the load low).
      await waitDrained(kafka, prefix, 1_200_000).catch((err: unknown) => {
        throw new Error(`${err instanceof Error ? err.message : String(err)}\n${tails(dep)}`);
      });
      progress(`distributed ${conv.id} indexed`);
    }
    for (const [i, conv] of convs.entries()) {
      const tenant = tenants[i] as string;
      const ask = async (question: string, budget: number) => {
        const r = await httpJson<QueryResult>(dep.http, keyOf(tenant), "POST", "/v1/query", {
          question,
          conversation: conv.id,
          budget,
        });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        return r.body;
      };
      const before = await recallOf(conv, ask);
      const consolidated = await httpJson<ConsolidationReport>(dep.http, keyOf(tenant), "POST", "/v1/consolidate");
      assert.equal(consolidated.status, 200, JSON.stringify(consolidated.body));
      const after = await recallOf(conv, ask);
      const reference = embedded[conv.id] as { before: Recall; after: Recall; report: ConsolidationReport };
      results[conv.id] = {
        consolidation: counts(consolidated.body),
        consolidationMs: Math.round(consolidated.body.ms),
        recallBefore: before,
        recallAfter: after,
        embedded: {
          consolidation: counts(reference.report),
          consolidationMs: Math.round(reference.report.ms),
          recallBefore: reference.before,
          recallAfter: reference.after,
        },
      };
      progress(`distributed ${conv.id}: ${JSON.stringify(results[conv.id])}`);
      assert.deepEqual(counts(consolidated.body), counts(reference.report), `${conv.id}: the same consolidation`);
      assert.deepEqual(before, reference.before, `${conv.id}: the same recall before consolidation`);
      assert.deepEqual(after, reference.after, `${conv.id}: the same recall after consolidation`);
    }
  } finally {
    t.diagnostic(`LOCOMO_CONSOLIDATION ${JSON.stringify(results)}`);
    console.log(`LOCOMO_CONSOLIDATION ${JSON.stringify(results)}`);
    await d?.stop();
    await cleanUp(kafka, prefix, tenants);
    rmSync(dir, { recursive: true, force: true });
  }
});
