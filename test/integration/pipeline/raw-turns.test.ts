// Raw turns queryable on arrival through Kafka (issue 18), real Kafka + schema registry + Neo4j: the
// indexer process (services/indexer/main.ts, a child process) consumes memory.sensory.v1 beside its
// records topic; a produced turn is found by both raw-turn routes (dense with the real embedder,
// lexical) while no segment holds it, because none has closed. The segment's records event then
// names the segment on the same rows, and an erase control on the sensory topic erases them.
// Bounded waits, no timing assertion. Skips unless KAFKA_BROKERS, SCHEMA_REGISTRY_URL and NEO4J_URI are set.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ensurePipelineTopics } from "../../../services/core/adapters/kafka/process.ts";
import { openPipelineCodecs } from "../../../services/core/adapters/kafka/serde.ts";
import { CONTROL_HEADER } from "../../../services/core/adapters/kafka/topics.ts";
import { turnRowId } from "../../../services/core/ids.ts";
import { OPEN_SEGMENT_ID } from "../../../services/core/ports.ts";
import { keyOf, type SensoryTurn } from "../../../services/core/types.ts";
import { emptyContext } from "../../../services/encoder/extractor.ts";
import { rawTurnText } from "../../../services/indexer/raw-turns.ts";
import { neo4jSkip } from "../../helpers/neo4j-env.ts";
import { segmentOf, segmentTurnOf } from "../../helpers/stage-fixtures.ts";
import { skip as kafkaSkip } from "./helpers.ts";
import { openNeo4jPipelineRun } from "./neo4j-run.ts";
import { startInstance, stopInstance, waitStarted } from "./stage-harness.ts";

const skip = kafkaSkip || neo4jSkip;

const TURNS = [
  segmentTurnOf("t1", "I adopted a greyhound called Pepper last week.", "2023-06-01T10:00:00.000Z"),
  segmentTurnOf("t2", "She sleeps on the sofa all afternoon.", "2023-06-01T10:01:00.000Z"),
  segmentTurnOf("t3", "We walk along the canal every morning.", "2023-06-01T10:02:00.000Z"),
];

test("a produced turn is found by the raw-turn routes before its segment closes", {
  skip,
  timeout: 300_000,
}, async () => {
  const run = await openNeo4jPipelineRun("raw-turns");
  const { tenant, env, config, kafka, serdes, producer, stores, embedder } = run;
  const indexer = startInstance("indexer", "0", env);
  const key = keyOf(tenant, "c1");
  const rowIds = TURNS.map((t) => turnRowId("c1", t.turnId));
  const keys = TURNS.map((t) => ({ conversation: "c1", turnId: t.turnId }));
  /** Reads until done(value) or 120 s (the value then fails the assertion after it), 100 ms apart. */
  const poll = async <T>(read: () => Promise<T>, done: (v: T) => boolean): Promise<T> => {
    const end = Date.now() + 120_000;
    let v = await read();
    while (!done(v) && Date.now() < end && !indexer.exited) {
      await new Promise((r) => setTimeout(r, 100));
      v = await read();
    }
    return v;
  };
  try {
    const topics = await ensurePipelineTopics(kafka, config);
    const codecs = await openPipelineCodecs(serdes, topics);
    await waitStarted([indexer]);
    assert.ok(
      indexer.log.some((l) => l.includes(topics.sensory)),
      "the indexer consumes the sensory topic beside the records topic",
    );
    await producer.connect();
    const sensory = (t: (typeof TURNS)[number]): SensoryTurn => ({
      ...t,
      tenant,
      conversation: "c1",
      keptRatio: 1,
    });
    await producer.send({
      topic: topics.sensory,
      messages: await Promise.all(TURNS.map(async (t) => ({ key, value: await codecs.sensory.encode(sensory(t)) }))),
    });

    const [question] = await embedder.embed([rawTurnText(TURNS[0] as (typeof TURNS)[number])]);
    const [dense, lexical] = await poll(
      async () => [
        (await stores.vectors.search(tenant, question as Float32Array, 3, { kind: "turn" })).map((h) => h.id),
        (await stores.graph.searchTurnsLexical(tenant, "greyhound Pepper", 3)).map((h) => h.id),
      ],
      ([d, l]) => d?.[0] === rowIds[0] && l?.[0] === rowIds[0],
    );
    assert.equal(dense?.[0], rowIds[0], "raw-dense finds the turn");
    assert.equal(lexical?.[0], rowIds[0], "raw-lexical finds the turn");
    assert.equal(await stores.graph.countSegments(tenant), 0, "no segment holds it yet");
    const early = await stores.graph.getTurns(tenant, [{ conversation: "c1", turnId: "t1" }]);
    assert.equal(early[0]?.segmentId, OPEN_SEGMENT_ID);

    // Its segment closes: the records event names the segment on the same rows (none twice).
    const segment = segmentOf("seg-raw-1", TURNS, tenant, "c1");
    await producer.send({
      topic: topics.records,
      messages: [
        {
          key,
          value: await codecs.records.encode({
            tenant,
            conversation: "c1",
            segment,
            records: [],
            context: emptyContext(),
          }),
        },
      ],
    });
    const named = await poll(
      async () => (await stores.graph.getTurns(tenant, keys)).map((t) => t.segmentId),
      (ids) => ids.length === 3 && ids.every((id) => id === segment.id),
    );
    assert.deepEqual(named, [segment.id, segment.id, segment.id]);
    assert.equal(await stores.graph.countSegments(tenant), 1);
    assert.equal((await stores.graph.searchTurnsLexical(tenant, "greyhound", 5)).length, 1);

    // An erase control on the sensory topic: the raw-turn consumer erases the conversation.
    await producer.send({
      topic: topics.sensory,
      messages: [{ key, value: null, headers: { [CONTROL_HEADER]: "erase" } }],
    });
    // Rows first, then vectors (erase-in-stores.ts): wait for both.
    const [left, vectorsLeft] = await poll(
      async () => [
        (await stores.graph.getTurns(tenant, keys)).length,
        (await stores.vectors.search(tenant, question as Float32Array, 3, { kind: "turn" })).length,
      ],
      ([rows, vectors]) => rows === 0 && vectors === 0,
    );
    assert.equal(left, 0, "the erase control erased the raw turns");
    assert.equal(vectorsLeft, 0, "and their vectors");
  } catch (err) {
    process.stderr.write(`--- indexer log\n${indexer.log.slice(-25).join("\n")}\n`);
    throw err;
  } finally {
    await stopInstance(indexer, "SIGTERM").catch(() => undefined);
    await run.close();
  }
});
