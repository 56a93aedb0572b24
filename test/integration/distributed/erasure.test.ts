// Erasure through the distributed runtime's Kafka pipeline (issue 13; real Kafka + schema registry +
// Neo4j, the stages as child processes). Tenant A has two conversations (one is erased), tenant B
// one, tenant C two (the whole tenant is erased). Turns of the erased conversation and of tenant C
// are still in the pipeline when the erasure happens, through the gateway's DELETE routes: the query
// service erases the stores at once and names the records it erased, then the gateway publishes the
// erase controls with a tombstone per erased record on the update queue (one Kafka transaction).
// Then every stage is restarted (state restored from the changelogs) and nothing of the erased
// subjects is found by a route, a listing, a Neo4j query or a read of the compacted topics to their
// end with tombstones applied (the update queue included: no live key of a record that is gone);
// the other two are intact. The second opinion is on (MEMORY_SECOND_OPINION): the indexer writes a
// second vector beside every record's and raw turn's, the query service fuses its order in, and
// the erasure takes those vectors with their nodes.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import type { Kafka } from "kafkajs";
import { kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import { openDriver } from "../../../services/core/adapters/neo4j/driver.ts";
import { Neo4jGraphStore } from "../../../services/core/adapters/neo4j/graph-store.ts";
import { Neo4jVectorStore } from "../../../services/core/adapters/neo4j/vector-store.ts";
import { loadConfig } from "../../../services/core/config.ts";
import { parseConversationKey } from "../../../services/core/keys.ts";
import type { ErasureReport } from "../../../services/core/maintenance.ts";
import type { QueryResult } from "../../../services/core/query-types.ts";
import type { TurnInput } from "../../../services/core/requests.ts";
import { keyOf } from "../../../services/core/types.ts";
import { neo4jConnection } from "../../helpers/neo4j-env.ts";
import { readAll } from "../pipeline/helpers.ts";
import {
  cleanUp,
  type Deployment,
  httpJson,
  listAllHttp,
  newKey,
  sharedEnv,
  skip,
  startDeployment,
  tails,
  waitDrained,
} from "./helpers.ts";

let clock = Date.UTC(2023, 4, 8, 13, 0);
const turns = (id: string, lines: readonly [string, string][]): TurnInput[] =>
  lines.map(([speaker, text], i) => {
    clock += 30_000;
    return {
      turnId: `${id}-${i + 1}`,
      speaker,
      role: "user" as const,
      text,
      timestamp: new Date(clock).toISOString(),
      sessionId: "session_1",
    };
  });

/** Each conversation says something only it says (its word), so a leak is visible in any text. */
const WORDS = { erased: "pineapple", keepA: "walrus", keepB: "zeppelin", goneC: "marmalade" } as const;

const secretTurns = (id: string, word: string) =>
  turns(id, [
    ["Caroline", `My secret code word for the vault is ${word}.`],
    ["Melanie", `Good, I will remember that the code word is ${word}.`],
    ["Caroline", "I moved to Paris in May and I love painting sunsets by the lake."],
    ["Melanie", "I ran a charity race for mental health last Saturday."],
  ]);

const inFlightTurns = (id: string, word: string) =>
  turns(id, [
    ["Caroline", `I moved to Paris in May, the ${word} city of my dreams.`],
    ["Melanie", `You told me you love painting sunsets, and ${word} too.`],
    ["Caroline", "I am planning to study counseling and work in mental health."],
  ]);

/** DELETE through the gateway's HTTP front door (httpJson has GET and POST). */
const httpDelete = async (
  base: string,
  key: string,
  path: string,
): Promise<{ status: number; body: ErasureReport }> => {
  const res = await fetch(`${base}${path}`, { method: "DELETE", headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as ErasureReport };
};

/** A compacted topic read to its end with tombstones applied: the live keys and their values. */
const liveKeys = async (kafka: Kafka, topic: string): Promise<Map<string, Buffer>> => {
  const live = new Map<string, Buffer>();
  for (const m of await readAll(kafka, topic, 120_000)) {
    if (m.value === null) live.delete(m.key);
    else live.set(m.key, m.value);
  }
  return live;
};

test("erasing a conversation and a tenant with turns in flight: nothing comes back after every stage restarts", {
  skip,
  timeout: 900_000,
}, async () => {
  const prefix = `t-dist-erase-${randomUUID().slice(0, 8)}.`;
  const run = randomUUID().slice(0, 8);
  const T = { a: `tenant-a-${run}`, b: `tenant-b-${run}`, c: `tenant-c-${run}` };
  const K = { a: newKey(), b: newKey(), c: newKey() };
  const keys = { [K.a]: T.a, [K.b]: T.b, [K.c]: T.c };
  const extra = { MEMORY_SECOND_OPINION: "1" };
  const env = sharedEnv(prefix, keys, extra);
  const config = loadConfig({}, env);
  const kafka = kafkaClient(config, "erasure-test");
  const { driver } = openDriver(neo4jConnection());
  const graph = new Neo4jGraphStore({ driver });
  const vectors = new Neo4jVectorStore({ driver });
  let dep: Deployment | undefined;
  const drained = async (d: Deployment, what: string) =>
    waitDrained(kafka, prefix, 600_000).catch((err: unknown) => {
      throw new Error(`${what}: ${err instanceof Error ? err.message : String(err)}\n${tails(d)}`);
    });
  const post = async (d: Deployment, key: string, conversation: string, body: TurnInput[]) => {
    const r = await httpJson(d.http, key, "POST", `/v1/conversations/${conversation}/turns:batch`, { turns: body });
    assert.equal(r.status, 202, JSON.stringify(r.body));
  };
  const flush = async (d: Deployment, key: string, conversation: string) =>
    assert.equal((await httpJson(d.http, key, "POST", `/v1/conversations/${conversation}/flush`)).status, 202);
  try {
    dep = await startDeployment(prefix, keys, extra);
    const d = dep;

    // 1. Everything ingested and indexed. The erased conversation goes first and alone, then the
    // others: their records' candidate sets on the update queue name its records, and its second
    // batch (in flight below) has candidates naming its first.
    await post(d, K.a, "erased", secretTurns("e1", WORDS.erased));
    await flush(d, K.a, "erased");
    await drained(d, "first conversation");
    await post(d, K.a, "keep-a", secretTurns("ka1", WORDS.keepA));
    await post(d, K.b, "keep-b", secretTurns("kb1", WORDS.keepB));
    await post(d, K.c, "gone-c1", secretTurns("c1", WORDS.goneC));
    await post(d, K.c, "gone-c2", secretTurns("c2", WORDS.goneC));
    for (const [key, conversation] of [
      [K.a, "keep-a"],
      [K.b, "keep-b"],
      [K.c, "gone-c1"],
      [K.c, "gone-c2"],
    ] as const)
      await flush(d, key, conversation);
    await drained(d, "all ingested");
    const before = {
      erased: await listAllHttp(d.http, K.a, "erased"),
      keepA: await listAllHttp(d.http, K.a, "keep-a"),
      keepB: await listAllHttp(d.http, K.b),
      c: await listAllHttp(d.http, K.c),
    };
    assert.ok(before.erased.length > 0 && before.keepA.length > 0 && before.keepB.length > 0 && before.c.length > 0);
    // Every record and raw turn the Kafka indexer wrote has its second-opinion vector.
    for (const tenant of [T.a, T.b, T.c]) {
      const ids = (
        await driver.executeQuery("MATCH (v:Vector {tenant: $tenant}) RETURN v.id AS id, v.second IS NULL AS missing", {
          tenant,
        })
      ).records.map((r) => ({ id: String(r.get("id")), missing: r.get("missing") === true }));
      assert.ok(ids.length > 0 && ids.every((v) => !v.missing), `${tenant}: every vector node has its second vector`);
    }

    // 2. Turns in flight (a flushed segment on its way to the indexer, then an open one in the
    // segmenter), then the erasures through the gateway: the stores at once, then the erase controls
    // behind those turns and the update-queue tombstones of the records the query service erased.
    await post(d, K.a, "erased", inFlightTurns("e2", WORDS.erased));
    await flush(d, K.a, "erased");
    await post(d, K.a, "erased", inFlightTurns("e3", WORDS.erased));
    await post(d, K.c, "gone-c1", inFlightTurns("c3", WORDS.goneC));
    await flush(d, K.c, "gone-c1");
    await post(d, K.c, "gone-c2", inFlightTurns("c4", WORDS.goneC));
    // And turns of the conversations that stay, open in the segmenter across the restart.
    await post(d, K.a, "keep-a", inFlightTurns("ka2", WORDS.keepA));
    await post(d, K.b, "keep-b", inFlightTurns("kb2", WORDS.keepB));
    const counted = async () => ({
      recordsErased: await graph.countRecords(T.a, "erased"),
      recordsC: await graph.countRecords(T.c),
      vectorsA: await vectors.count(T.a),
      vectorsC: await vectors.count(T.c),
    });
    const storesBefore = await counted();
    const erasedConversation = await httpDelete(d.http, K.a, "/v1/conversations/erased");
    assert.equal(erasedConversation.status, 200, JSON.stringify(erasedConversation.body));
    const erasedTenant = await httpDelete(d.http, K.c, `/v1/tenant?confirm=${encodeURIComponent(T.c)}`);
    assert.equal(erasedTenant.status, 200, JSON.stringify(erasedTenant.body));
    for (const report of [erasedConversation.body, erasedTenant.body])
      assert.ok(!("erasedRecordIds" in report), "the HTTP report has counts, not record ids");
    // One erase control (a tenant: one per partition) and one tombstone per record erased at once.
    assert.equal(erasedConversation.body.kafka, 1 + erasedConversation.body.records);
    // (A tenant's records are counted, then deleted, naming each: the indexer may add some between.)
    assert.ok((erasedTenant.body.kafka ?? 0) >= config.kafka.partitions + erasedTenant.body.records);
    assert.ok(erasedConversation.body.records >= before.erased.length);
    assert.ok(erasedTenant.body.records >= storesBefore.recordsC);
    await drained(d, "erasure");
    const storesAfter = await counted();

    // 3. Every stage restarted: state comes back from the changelogs only.
    await d.stop();
    dep = await startDeployment(prefix, keys, extra);
    const d2 = dep;
    // New turns after the restart: the pipeline flows, and the open segments of the kept
    // conversations were restored (released by these flushes).
    await post(d2, K.a, "keep-a", turns("ka3", [["Caroline", `After the restart the ${WORDS.keepA} still swims.`]]));
    await flush(d2, K.a, "keep-a");
    await flush(d2, K.b, "keep-b");
    await flush(d2, K.a, "erased");
    await flush(d2, K.c, "gone-c1");
    await flush(d2, K.c, "gone-c2");
    await drained(d2, "after restart");

    // Routes and listings.
    assert.deepEqual(await listAllHttp(d2.http, K.a, "erased"), []);
    assert.deepEqual(await listAllHttp(d2.http, K.c), []);
    const keepA = await listAllHttp(d2.http, K.a);
    const keepB = await listAllHttp(d2.http, K.b);
    assert.ok(keepA.every((r) => r.source.conversation === "keep-a"));
    for (const r of before.keepA)
      assert.ok(
        keepA.some((x) => x.id === r.id),
        `kept record ${r.id} is still there`,
      );
    for (const r of before.keepB)
      assert.ok(
        keepB.some((x) => x.id === r.id),
        `kept record ${r.id} is still there`,
      );
    assert.ok(
      keepA.some((r) => r.text.includes("After the restart")),
      "the restored pipeline indexed a new turn",
    );
    assert.ok(keepA.length > before.keepA.length && keepB.length > before.keepB.length, "open segments restored");
    for (const r of before.erased)
      assert.equal((await httpJson(d2.http, K.a, "GET", `/v1/records/${r.id}`)).status, 404);
    for (const [key, word, tenant] of [
      [K.a, WORDS.erased, T.a],
      [K.c, WORDS.goneC, T.c],
    ] as const) {
      for (const question of ["What is the secret code word for the vault?", "Where did Caroline move in May?"]) {
        const q = await httpJson<QueryResult>(d2.http, key, "POST", "/v1/query", { question, budget: 2000 });
        assert.equal(q.status, 200);
        assert.doesNotMatch(q.body.context, new RegExp(word), `${tenant}: ${question}`);
        assert.ok(q.body.items.every((i) => i.conversation !== "erased" && !i.conversation.startsWith("gone-")));
      }
    }
    const secretA = await httpJson<QueryResult>(d2.http, K.a, "POST", "/v1/query", {
      question: "What is the secret code word for the vault?",
      budget: 2000,
    });
    assert.match(secretA.body.context, new RegExp(WORDS.keepA), "the kept conversation is still found");
    assert.ok(
      secretA.body.items.every((i) => i.routes.some((r) => r.route === "second-opinion")),
      "the query service fused the second opinion in",
    );

    // Neo4j: no node of the erased conversation or tenant, no text of theirs anywhere.
    const session = driver.session();
    try {
      const res = await session.run(
        `MATCH (n) WHERE (n.tenant = $a AND n.conversation = 'erased') OR n.tenant = $c
            OR any(k IN keys(n) WHERE n[k] IS :: STRING AND (n[k] CONTAINS $w1 OR n[k] CONTAINS $w2))
         RETURN count(n) AS n`,
        { a: T.a, c: T.c, w1: WORDS.erased, w2: WORDS.goneC },
      );
      assert.equal(Number(res.records[0]?.get("n")), 0, "Neo4j holds nothing of the erased subjects");
    } finally {
      await session.close();
    }

    // Compacted topics read to their end with tombstones applied.
    const erasedKey = keyOf(T.a, "erased");
    const erasedKeyOf = (key: string): boolean => {
      const p = parseConversationKey(key);
      return key === erasedKey || p?.tenant === T.c;
    };
    for (const stage of ["segmenter", "encoder"]) {
      const live = await liveKeys(kafka, `${prefix}memory.${stage}-state.v1`);
      assert.deepEqual(
        [...live.keys()].filter(erasedKeyOf),
        [],
        `${stage} changelog: no live key of the erased subjects`,
      );
      assert.ok(live.has(keyOf(T.a, "keep-a")) || stage === "segmenter", `${stage} keeps keep-a's state`);
      for (const value of live.values()) {
        const text = value.toString("latin1");
        assert.ok(!text.includes(WORDS.erased) && !text.includes(WORDS.goneC), `${stage} changelog value leaks`);
      }
    }
    // The update queue (key: record id), read to its end with tombstones applied: every live key is
    // a record that exists. The records the query service erased at once are tombstoned by the
    // gateway, those that in-flight turns wrote afterwards by the indexer on the erase control.
    const queueMessages = await readAll(kafka, `${prefix}memory.update-queue.v1`, 120_000);
    const tombstoned = new Set(queueMessages.filter((m) => m.control && m.value === null).map((m) => m.key));
    const queue = await liveKeys(kafka, `${prefix}memory.update-queue.v1`);
    const orphans: string[] = [];
    /** Where a key's messages are (partition, offset, tombstone or not), for a failure's message. */
    const trail = (key: string): string =>
      JSON.stringify(
        queueMessages
          .filter((m) => m.key === key)
          .map((m) => ({ p: m.partition, o: m.offset, tombstone: m.value === null, control: m.control })),
      );
    for (const [recordId, value] of queue) {
      const text = value.toString("latin1");
      assert.ok(
        !text.includes(WORDS.erased) && !text.includes(WORDS.goneC),
        `update queue value of ${recordId}: ${trail(recordId)} ${text.replace(/[^\x20-\x7e]/g, ".")}`,
      );
      const owner = [T.a, T.b, T.c].find((t) => text.includes(t)) as string;
      assert.ok(owner, `update queue value of ${recordId} names its tenant`);
      if ((await graph.getRecords(owner, [recordId])).length === 1) continue;
      orphans.push(recordId);
    }
    assert.deepEqual(orphans, [], "every live update-queue key is a record that exists");
    assert.ok(tombstoned.size >= erasedConversation.body.records + erasedTenant.body.records);
    console.log(
      JSON.stringify({
        erasure: {
          http: { conversation: erasedConversation.body, tenant: erasedTenant.body },
          storesBefore,
          storesAfter,
          updateQueue: { live: queue.size, tombstoned: tombstoned.size, orphans: orphans.length },
          before: {
            erased: before.erased.length,
            keepA: before.keepA.length,
            keepB: before.keepB.length,
            c: before.c.length,
          },
          after: { keepA: keepA.length, keepB: keepB.length },
          indexerLog: d.procs.find((p) => p.name === "indexer")?.log.filter((l) => l.includes("erased")),
        },
      }),
    );
  } finally {
    await dep?.stop();
    await cleanUp(kafka, prefix, [T.a, T.b, T.c]);
    await driver.close();
  }
});
