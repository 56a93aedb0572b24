// Consolidation, version history, as-of and erasure through the gateway on the distributed runtime
// (real Kafka + schema registry + Neo4j), against the embedded runtime (issue 13): the consolidation
// scenario (test/helpers/consolidation-scenario.ts: moved city, changed job, reversed preference,
// Tokyo plan vs Kyoto trains, exact / near / cross-conversation duplicates) goes through the
// gateway for two tenants, consolidation is triggered by POST /v1/consolidate, and the reports,
// records (versions, validity, merged sources) and every record's history must equal the embedded
// runtime's for the same turns. Then a conversation and a tenant are erased through the gateway:
// the counts equal the embedded runtime's, and nothing of them is left in any listing, route,
// history or Neo4j (graph and vectors).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import { openDriver } from "../../../services/core/adapters/neo4j/driver.ts";
import { Neo4jGraphStore } from "../../../services/core/adapters/neo4j/graph-store.ts";
import { Neo4jVectorStore } from "../../../services/core/adapters/neo4j/vector-store.ts";
import { loadConfig } from "../../../services/core/config.ts";
import type { RecordHistory } from "../../../services/core/history.ts";
import type { ConsolidationReport, ErasureReport } from "../../../services/core/maintenance.ts";
import type { QueryResult } from "../../../services/core/query-types.ts";
import type { TurnInput } from "../../../services/core/requests.ts";
import type { MemoryRecord } from "../../../services/core/types.ts";
import type { EmbeddedEngine } from "../../../services/embedded/engine.ts";
import { openEmbeddedEngine } from "../../../services/embedded/open.ts";
import { LIFE, TRAVEL } from "../../helpers/consolidation-scenario.ts";
import { carries, standsFor } from "../../helpers/evidence.ts";
import { neo4jConnection } from "../../helpers/neo4j-env.ts";
import { runPrefix } from "../pipeline/helpers.ts";
import { cleanUp, type Deployment, skip, startDeployment, tails, waitDrained } from "./helpers.ts";

const CONSOLIDATION = { window: "", idleMinutes: 0, similarityThreshold: 0.8, concurrency: 2 };

/** A call to the gateway with the key of a tenant: status and JSON body. */
const call = async <T>(
  base: string,
  key: string,
  method: "GET" | "POST" | "DELETE",
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T }> => {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as T };
};

/** Every record of the tenant, superseded versions included, sorted by id. */
const allHttp = async (base: string, key: string): Promise<MemoryRecord[]> => {
  const out: MemoryRecord[] = [];
  let cursor: string | undefined;
  do {
    const qs = new URLSearchParams({ limit: "200", includeSuperseded: "true" });
    if (cursor) qs.set("cursor", cursor);
    const r = await call<{ records: MemoryRecord[]; nextCursor: string | null }>(base, key, "GET", `/v1/records?${qs}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    out.push(...r.body.records);
    cursor = r.body.nextCursor ?? undefined;
  } while (cursor);
  return out.sort((a, b) => (a.id < b.id ? -1 : 1));
};

const allEmbedded = async (engine: EmbeddedEngine, tenant: string): Promise<MemoryRecord[]> =>
  (await engine.listRecords(tenant, { limit: 1000, includeSuperseded: true })).records.sort((a, b) =>
    a.id < b.id ? -1 : 1,
  );

/** What consolidation may change of a record. */
const versionsOf = (records: readonly MemoryRecord[]) =>
  records.map((r) => ({ id: r.id, text: r.text, valid: r.valid, mergedSources: r.mergedSources ?? [] }));

/** A report without its clock-dependent time. */
const counts = ({ ms: _ms, ...rest }: ConsolidationReport) => rest;

/** An erasure report's per-store counts (not its time, nor the Kafka count the embedded runtime lacks). */
const erased = ({ ms: _ms, kafka: _kafka, ...rest }: ErasureReport) => rest;

/** A history in JSON form, relations in a stable order (stores may list edges in another order). */
const normal = (h: RecordHistory | undefined) =>
  h === undefined
    ? undefined
    : (JSON.parse(
        JSON.stringify({
          ...h,
          relations: [...h.relations].sort((a, b) =>
            `${a.from}${a.to}${a.relation}`.localeCompare(`${b.from}${b.to}${b.relation}`),
          ),
        }),
      ) as RecordHistory);

const find = (records: readonly MemoryRecord[], re: RegExp): MemoryRecord => {
  const r = records.find((x) => re.test(x.text));
  assert.ok(r, `no record matches ${re}: ${records.map((x) => x.text).join(" | ")}`);
  return r;
};

test("consolidation, history, as-of and erasure through the gateway equal the embedded runtime", {
  skip,
  timeout: 30 * 60_000,
}, async (t) => {
  const progress = (m: string) => t.diagnostic(`${new Date().toISOString()} ${m}`);
  const prefix = runPrefix("maint");
  const run = randomUUID().slice(0, 8);
  const alice = `alice-${run}`;
  const bob = `bob-${run}`;
  const keys = { [`key-alice-${run}`]: alice, [`key-bob-${run}`]: bob };
  const keyOf = (tenant: string) => Object.entries(keys).find(([, v]) => v === tenant)?.[0] as string;
  const kafka = kafkaClient(
    loadConfig({}, { ...process.env, MEMORY_CONFIG: "/nonexistent/memory.config.json" }),
    "maint-test",
  );
  const dir = mkdtempSync(join(tmpdir(), "memory-maint-"));
  const { driver } = openDriver(neo4jConnection());
  const neoGraph = new Neo4jGraphStore({ driver });
  const neoVectors = new Neo4jVectorStore({ driver });
  let d: Deployment | undefined;
  const opened = await openEmbeddedEngine(
    loadConfig(
      { dataDir: dir, consolidation: CONSOLIDATION },
      {
        ...process.env,
        MEMORY_CONFIG: "/nonexistent/memory.config.json",
        MEMORY_COMPRESSOR: "statistical",
        MEMORY_STORE: "embedded",
      },
    ),
  );
  const engine = opened.engine;
  try {
    // --- Both runtimes get the same turns, conversation after conversation ---------------------------
    const plan: [string, string, TurnInput[]][] = [
      [alice, "life", LIFE],
      [alice, "travel", TRAVEL],
      [bob, "life", LIFE],
    ];
    for (const [tenant, conversation, turns] of plan) {
      await engine.ingest(tenant, conversation, turns);
      await engine.flush(tenant, conversation);
      await engine.drain();
    }
    d = await startDeployment(prefix, keys);
    const dep = d;
    progress("deployment started");
    for (const [tenant, conversation, turns] of plan) {
      const r = await call(dep.http, keyOf(tenant), "POST", `/v1/conversations/${conversation}/turns:batch`, { turns });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      assert.equal(
        (await call(dep.http, keyOf(tenant), "POST", `/v1/conversations/${conversation}/flush`)).status,
        202,
      );
      // One conversation indexed before the next, as in the embedded run: update candidates are
      // chosen among the records indexed before.
      await waitDrained(kafka, prefix, 300_000).catch((err: unknown) => {
        throw new Error(`${err instanceof Error ? err.message : String(err)}\n${tails(dep)}`);
      });
      progress(`${tenant}/${conversation} indexed`);
    }
    for (const tenant of [alice, bob])
      assert.deepEqual(
        (await allHttp(dep.http, keyOf(tenant))).map((r) => r.id),
        (await allEmbedded(engine, tenant)).map((r) => r.id),
        `${tenant}: the same records before consolidation`,
      );

    // --- Consolidation triggered through the gateway ------------------------------------------------
    for (const tenant of [alice, bob]) {
      const viaGateway = await call<ConsolidationReport>(dep.http, keyOf(tenant), "POST", "/v1/consolidate");
      assert.equal(viaGateway.status, 200, JSON.stringify(viaGateway.body));
      const embedded = await engine.consolidate(tenant);
      assert.deepEqual(counts(viaGateway.body), counts(embedded), `${tenant}: the same consolidation report`);
      t.diagnostic(`consolidation ${tenant}: ${JSON.stringify(counts(viaGateway.body))}`);
      assert.ok(viaGateway.body.superseded >= 3 && viaGateway.body.merged >= 2);
      const again = await call<ConsolidationReport>(dep.http, keyOf(tenant), "POST", "/v1/consolidate");
      assert.equal(again.body.examined, 0, "a second run finds nothing to do");
    }
    const records = await allHttp(dep.http, keyOf(alice));
    assert.deepEqual(versionsOf(records), versionsOf(await allEmbedded(engine, alice)), "the same versions");
    assert.deepEqual(
      versionsOf(await allHttp(dep.http, keyOf(bob))),
      versionsOf(await allEmbedded(engine, bob)),
      "bob: the same versions",
    );
    const boston = find(records, /lives in Boston/);
    const denver = find(records, /moved to Denver/);
    assert.equal(boston.valid.supersededBy, denver.id);
    assert.equal(find(records, /works at Google/).valid.supersededBy, find(records, /Microsoft/).id);
    assert.equal(find(records, /loves sushi/).valid.supersededBy, find(records, /like sushi anymore/).id);
    assert.equal(find(records, /trip to Tokyo/).valid.to, undefined, "Tokyo plan and Kyoto trains both current");
    assert.equal(find(records, /train to Kyoto/).valid.to, undefined);
    const canonical = records.find((r) => /band is Coldplay/.test(r.text) && r.valid.to === undefined);
    assert.deepEqual((canonical?.mergedSources ?? []).map((s) => s.conversation).sort(), ["life", "travel"]);

    // --- History of every record: the same as the embedded runtime's ------------------------------
    for (const r of records) {
      const h = await call<RecordHistory>(dep.http, keyOf(alice), "GET", `/v1/records/${r.id}/history`);
      assert.equal(h.status, 200);
      assert.deepEqual(normal(h.body), normal(await engine.history(alice, r.id)), `history of ${r.text}`);
    }
    assert.equal((await call(dep.http, keyOf(bob), "GET", `/v1/records/${boston.id}/history`)).status, 404);

    // --- As-of through the gateway: the version valid then ----------------------------------------
    // Evidence is matched as the record or its raw turn (test/helpers/evidence.ts).
    const items = async (asOf?: string) =>
      (
        await call<QueryResult>(dep.http, keyOf(alice), "POST", "/v1/query", {
          question: "Where does Ana live?",
          budget: 2000,
          ...(asOf ? { asOf } : {}),
        })
      ).body.items;
    const now = await items();
    assert.ok(carries(now, denver), "now: Ana lives in Denver");
    assert.ok(!now.some((i) => i.id === boston.id), "now: the superseded Boston record is not current");
    const then = await items("2024-02-01T00:00:00.000Z");
    assert.ok(carries(then, boston) && !carries(then, denver), "as of February, Ana lived in Boston");
    // Not only through the dense route: Neo4j's lexical and entity indexes return the version valid then.
    const february = Date.parse("2024-02-01T00:00:00.000Z");
    const routeIds = async (at?: number) => ({
      lexical: (await neoGraph.searchRecordsLexical(alice, "Ana lives Boston Denver", 20, undefined, at)).map(
        (h) => h.id,
      ),
      entity: (await neoGraph.recordsByEntities(alice, ["Boston", "Denver"], 20, undefined, at)).map((h) => h.id),
    });
    for (const [route, hits] of Object.entries(await routeIds(february)))
      assert.ok(hits.includes(boston.id) && !hits.includes(denver.id), `${route} route as of February`);
    for (const [route, hits] of Object.entries(await routeIds()))
      assert.ok(!hits.includes(boston.id) && hits.includes(denver.id), `${route} route now`);
    const asked = await call<QueryResult>(dep.http, keyOf(alice), "POST", "/v1/query", {
      question: "Did Ana live in Boston?",
      budget: 2000,
      asOf: "2024-02-01T00:00:00.000Z",
    });
    const bostonItem = asked.body.items.find((i) => standsFor(i, boston));
    assert.ok(
      bostonItem?.routes.some((r) => r.route !== "dense"),
      "found by more than the dense route",
    );
    // A question that asks as of a moment itself (question-time.ts) reads Neo4j at that moment.
    const askedThen = await call<QueryResult>(dep.http, keyOf(alice), "POST", "/v1/query", {
      question: "Where did Ana live as of February 2024?",
      budget: 2000,
    });
    const bostonThen = askedThen.body.items.find((i) => i.id === boston.id);
    assert.ok(
      bostonThen?.routes.some((r) => r.route === "time"),
      `as of February in the question: the Boston version, by the time route (${JSON.stringify(bostonThen?.routes)})`,
    );

    // --- Erasure of a conversation through the gateway --------------------------------------------
    const travelIds = records.filter((r) => r.source.conversation === "travel").map((r) => r.id);
    assert.ok(travelIds.length > 0);
    const erasedConv = await call<ErasureReport>(dep.http, keyOf(alice), "DELETE", "/v1/conversations/travel");
    assert.equal(erasedConv.status, 200, JSON.stringify(erasedConv.body));
    const embeddedConv = await engine.erase(alice, "travel");
    t.diagnostic(
      `erasure of a conversation: ${JSON.stringify(erasedConv.body)} (embedded ${JSON.stringify(embeddedConv)})`,
    );
    const { inboxEntries: _i, stateKeys: _s, ...storeCounts } = erased(embeddedConv);
    const { inboxEntries: _i2, stateKeys: _s2, ...gatewayCounts } = erased(erasedConv.body);
    assert.deepEqual(gatewayCounts, storeCounts, "the same per-store counts as the embedded runtime");
    const left = await allHttp(dep.http, keyOf(alice));
    assert.deepEqual(versionsOf(left), versionsOf(await allEmbedded(engine, alice)), "what is left is the same");
    assert.ok(left.every((r) => r.source.conversation !== "travel" && !travelIds.includes(r.id)));
    assert.ok(left.every((r) => (r.mergedSources ?? []).every((s) => s.conversation !== "travel")));
    for (const id of travelIds)
      assert.equal((await call(dep.http, keyOf(alice), "GET", `/v1/records/${id}`)).status, 404);
    for (const r of left) {
      const h = await call<RecordHistory>(dep.http, keyOf(alice), "GET", `/v1/records/${r.id}/history`);
      assert.ok(h.body.versions.every((v) => v.record.source.conversation !== "travel"));
    }
    for (const question of ["Which hotel did Ana book in Kyoto?", "Is Coldplay still her favorite band?"]) {
      const q = await call<QueryResult>(dep.http, keyOf(alice), "POST", "/v1/query", { question, budget: 2000 });
      assert.equal(q.status, 200);
      assert.ok(
        q.body.items.every((i) => i.conversation !== "travel"),
        `no route finds the erased conversation`,
      );
    }
    assert.equal(await neoGraph.countRecords(alice, "travel"), 0);
    assert.equal(await neoGraph.countSegments(alice, "travel"), 0);
    assert.deepEqual(await neoGraph.searchTurnsLexical(alice, "hotel Kyoto station Coldplay", 10, "travel"), []);
    const probe = new Float32Array(384).fill(1 / Math.sqrt(384));
    assert.deepEqual(await neoVectors.search(alice, probe, 50, { conversation: "travel" }), []);
    assert.ok((await neoGraph.countRecords(alice, "life")) > 0, "the other conversation is intact");

    // --- Erasure of a tenant -----------------------------------------------------------------------
    const bobRecords = (await allHttp(dep.http, keyOf(bob))).length;
    const erasedTenant = await call<ErasureReport>(dep.http, keyOf(bob), "DELETE", `/v1/tenant?confirm=${bob}`);
    assert.equal(erasedTenant.status, 200, JSON.stringify(erasedTenant.body));
    const embeddedTenant = await engine.erase(bob);
    t.diagnostic(
      `erasure of a tenant: ${JSON.stringify(erasedTenant.body)} (embedded ${JSON.stringify(embeddedTenant)})`,
    );
    assert.equal(erasedTenant.body.records, bobRecords);
    assert.equal(erasedTenant.body.records, embeddedTenant.records);
    assert.equal(erasedTenant.body.vectors, embeddedTenant.vectors);
    assert.deepEqual(await allHttp(dep.http, keyOf(bob)), []);
    assert.equal(await neoGraph.countRecords(bob), 0);
    assert.equal(await neoGraph.countSegments(bob), 0);
    assert.equal(await neoVectors.count(bob), 0);
    assert.ok((await allHttp(dep.http, keyOf(alice))).length > 0, "the other tenant is intact");
  } finally {
    await d?.stop();
    await opened.close();
    await cleanUp(kafka, prefix, [alice, bob]);
    await driver.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
