// The indexer's two consumers in different processes erasing one conversation (issue 18), on real
// Kafka + schema registry + Neo4j. Each consumer is a StageRuntime of this process with its own Kafka
// clients and its own Neo4j store instances (driver, memos): nothing is shared between them but
// Kafka and the database, as between two indexer replicas, or one restarted between the erasures.
// The case the in-process hand-off missed: the records consumer has written a segment's records and
// computed their candidate sets when the raw-turn consumer reaches the erase control and commits
// it; only then does the records consumer go on (it is held at its candidate rows' write until the
// raw-turn consumer's group has committed past the control), commit the candidate sets and reach
// its own erase control. Afterwards the update queue, read to its end with tombstones applied,
// holds no live key of an erased record, and the stores hold nothing of the conversation.
// Skips unless KAFKA_BROKERS, SCHEMA_REGISTRY_URL and NEO4J_URI are set.
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { openEmbedder } from "../../../services/composition/parts.ts";
import { type OpenedStores, openStores } from "../../../services/composition/stores.ts";
import { ensurePipelineTopics, kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import { openPipelineCodecs, RegistrySerdes } from "../../../services/core/adapters/kafka/serde.ts";
import { StageRuntime } from "../../../services/core/adapters/kafka/stage-runtime.ts";
import { CONTROL_HEADER } from "../../../services/core/adapters/kafka/topics.ts";
import { turnRowId } from "../../../services/core/ids.ts";
import type { GraphStore } from "../../../services/core/ports.ts";
import { keyOf, type RecordsEvent, type SensoryTurn } from "../../../services/core/types.ts";
import { indexerStage } from "../../../services/indexer/kafka-handler.ts";
import { RAW_TURN_STAGE, rawTurnStage } from "../../../services/indexer/raw-turn-stage.ts";
import { neo4jSkip } from "../../helpers/neo4j-env.ts";
import { candidatePairEvent } from "../../helpers/stage-fixtures.ts";
import { ROOT } from "../distributed/helpers.ts";
import {
  deleteSubjects,
  deleteTopics,
  skip as kafkaSkip,
  readAll,
  runPrefix,
  testConfig,
  until,
  waitGroupsDrained,
} from "./helpers.ts";

const skip = kafkaSkip || neo4jSkip;

/** One segment whose two records are each other's update candidates (same person, same topic). */
const recordsEvent = (tenant: string): RecordsEvent => candidatePairEvent(tenant, "c1", "Paris", "seg-1");
/** Its turns, as they arrive on the sensory topic too. */
const TURNS = recordsEvent("unused").segment.turns;

/** The graph store as it is, except that writing candidate rows first waits for `held` (once). */
const holdingCandidates = (graph: GraphStore, reached: () => void, held: Promise<void>): GraphStore => {
  let first = true;
  return new Proxy(graph, {
    get(target, prop) {
      if (prop === "putUpdateCandidates")
        return async (...args: Parameters<GraphStore["putUpdateCandidates"]>) => {
          if (first) {
            first = false;
            reached();
            await held;
          }
          return target.putUpdateCandidates(...args);
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
};

test("erase controls across two indexer processes: no candidate set of an erased record stays live", {
  skip,
  timeout: 300_000,
}, async () => {
  const prefix = runPrefix("erase-split");
  const tenant = `erase-split-${prefix.slice(-9, -1)}`;
  const config = testConfig(prefix, {
    MEMORY_STORE: "neo4j",
    MEMORY_KAFKA_PARTITIONS: "1",
    MEMORY_MODEL_DIR: join(ROOT, "models"),
  });
  const kafka = kafkaClient(config, "erase-split-test");
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const admin = kafka.admin();
  const producer = kafka.producer();
  // The real embedder, as the indexer process has (the Neo4j vector index has its dimension).
  const embedder = await openEmbedder(config);
  const opened: OpenedStores[] = [];
  const runtimes: StageRuntime<never, unknown, unknown>[] = [];
  const key = keyOf(tenant, "c1");
  const event = recordsEvent(tenant);
  const recordIds = event.records.map((r) => r.id);
  let release = (): void => undefined;
  try {
    const topics = await ensurePipelineTopics(kafka, config);
    const codecs = await openPipelineCodecs(serdes, topics);
    await admin.connect();
    await producer.connect();
    // One set of stores per "process".
    const rawStores = await openStores(config, "neo4j");
    const recordStores = await openStores(config, "neo4j");
    opened.push(rawStores, recordStores);
    const groups = {
      raw: { groupId: `${prefix}memory-${RAW_TURN_STAGE}`, topic: topics.sensory },
      records: { groupId: `${prefix}memory-indexer`, topic: topics.records },
    };
    const common = (groupId: string) => ({
      kafka,
      admin,
      groupId,
      transactionalIdPrefix: groupId,
      dlq: codecs.dlq,
      sessionTimeoutMs: config.kafka.sessionTimeoutMs,
    });
    let reached = (): void => undefined;
    const atCandidates = new Promise<void>((resolve) => {
      reached = resolve;
    });
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const built = [
      new StageRuntime(
        rawTurnStage({
          input: codecs.sensory,
          output: codecs.updateQueue,
          graph: rawStores.graph,
          vectors: rawStores.vectors,
          embedder,
        }),
        common(groups.raw.groupId),
      ),
      new StageRuntime(
        indexerStage({
          input: codecs.records,
          output: codecs.updateQueue,
          graph: holdingCandidates(recordStores.graph, reached, held),
          vectors: recordStores.vectors,
          embedder,
        }),
        common(groups.records.groupId),
      ),
    ];
    runtimes.push(...(built as unknown as StageRuntime<never, unknown, unknown>[]));
    await Promise.all(runtimes.map((r) => r.start()));

    // The conversation's turns arrive (raw turns written at once), then its segment's records, and
    // behind them on the records topic the erase control.
    const sensory = (t: (typeof TURNS)[number]): SensoryTurn => ({ ...t, tenant, conversation: "c1", keptRatio: 1 });
    await producer.send({
      topic: topics.sensory,
      messages: await Promise.all(TURNS.map(async (t) => ({ key, value: await codecs.sensory.encode(sensory(t)) }))),
    });
    await waitGroupsDrained(kafka, [groups.raw]);
    assert.equal((await rawStores.graph.getTurns(tenant, [{ conversation: "c1", turnId: "t1" }])).length, 1);
    await producer.send({
      topic: topics.records,
      messages: [
        { key, value: await codecs.records.encode(event) },
        { key, value: null, headers: { [CONTROL_HEADER]: "erase" } },
      ],
    });

    // The records consumer has written the records and found their candidates: the raw-turn
    // consumer now gets the erase control and commits it before the records consumer goes on.
    let atCandidatesNow = false;
    void atCandidates.then(() => {
      atCandidatesNow = true;
    });
    await until("the records consumer at its candidate rows", () => atCandidatesNow, 120_000);
    assert.equal(await recordStores.graph.countRecords(tenant, "c1"), recordIds.length, "records written");
    await producer.send({
      topic: topics.sensory,
      messages: [{ key, value: null, headers: { [CONTROL_HEADER]: "erase" } }],
    });
    await waitGroupsDrained(kafka, [groups.raw]);
    // Asserted after the update queue's check, the point of this test.
    const recordsLeftByRawTurns = await rawStores.graph.countRecords(tenant, "c1");
    const turnsLeftByRawTurns = await rawStores.graph.getTurns(tenant, [{ conversation: "c1", turnId: "t1" }]);
    release();
    await waitGroupsDrained(kafka, [groups.records, groups.raw]);

    // The update queue to its end: candidate sets were produced, and each is followed by its tombstone.
    const queue = (await readAll(kafka, topics.updateQueue, 120_000)).filter((m) => recordIds.includes(m.key));
    assert.ok(
      queue.some((m) => m.value !== null),
      "the records' candidate sets reached the update queue",
    );
    const live = new Set<string>();
    for (const m of queue) {
      if (m.value === null) live.delete(m.key);
      else live.add(m.key);
    }
    assert.deepEqual(
      [...live],
      [],
      `no live update-queue key of an erased record: ${JSON.stringify(
        queue.map((m) => ({ key: m.key.slice(0, 12), offset: m.offset, tombstone: m.value === null })),
      )}`,
    );

    assert.equal(recordsLeftByRawTurns, recordIds.length, "the raw-turn consumer left the records alone");
    assert.deepEqual(turnsLeftByRawTurns, [], "and erased the raw turns");

    // And the stores hold nothing of the conversation.
    assert.equal(await recordStores.graph.countRecords(tenant), 0);
    assert.equal(await recordStores.graph.countPendingCandidates(tenant), 0);
    assert.equal(await recordStores.graph.countSegments(tenant), 0);
    assert.equal(await recordStores.vectors.count(tenant), 0, "no record or turn vector");
    assert.deepEqual(
      await recordStores.vectors.get(
        tenant,
        TURNS.map((t) => turnRowId("c1", t.turnId)),
      ),
      [],
    );
  } finally {
    release(); // a failed assertion must not leave the records consumer held
    await Promise.all(runtimes.map((r) => r.stop().catch(() => undefined)));
    for (const s of opened) {
      await s.graph.deleteTenant(tenant).catch(() => undefined);
      await s.vectors.deleteTenant(tenant).catch(() => undefined);
      await s.close().catch(() => undefined);
    }
    await producer.disconnect().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
    await serdes.close().catch(() => undefined);
    await embedder.close();
    await deleteTopics(kafka, prefix);
    await deleteSubjects(prefix);
  }
});
