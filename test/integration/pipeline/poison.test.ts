// Poison messages on memory.turns.v1 (real Kafka + schema registry): malformed bytes, a turn that
// fails validation (empty text), a value written with another Avro schema and a key that does not
// match its value land in memory.dlq.v1 with the stage and the reason; the valid turns around them
// reach memory.sensory.v1 in order. Skips unless KAFKA_BROKERS and SCHEMA_REGISTRY_URL are set.
import assert from "node:assert/strict";
import { test } from "node:test";
import { z } from "zod";
import { ensurePipelineTopics, kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import { openPipelineCodecs, RegistrySerdes, SCHEMA_FILES } from "../../../services/core/adapters/kafka/serde.ts";
import { StageRuntime } from "../../../services/core/adapters/kafka/stage-runtime.ts";
import { keyOf, type Turn } from "../../../services/core/types.ts";
import { sensoryStage } from "../../../services/sensory/kafka-handler.ts";
import { StatisticalCompressor } from "../../../services/sensory/statistical-compressor.ts";
import { collect, deleteSubjects, deleteTopics, runPrefix, skip, testConfig, until } from "./helpers.ts";

const turn = (id: string, text: string): Turn => ({
  tenant: "acme",
  conversation: "c1",
  turnId: id,
  speaker: "Ana",
  role: "user",
  text,
  timestamp: "2024-05-06T10:15:00.000Z",
  sessionId: "s1",
});

test("poison messages go to the DLQ with stage and reason; valid turns flow in order", {
  skip,
  timeout: 90_000,
}, async () => {
  const prefix = runPrefix("poison");
  const config = testConfig(prefix, { MEMORY_KAFKA_PARTITIONS: "1" });
  const kafka = kafkaClient(config, "poison-test");
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const admin = kafka.admin();
  const producer = kafka.producer();
  const collectors: Awaited<ReturnType<typeof collect>>[] = [];
  let runtime: StageRuntime<Turn, unknown, never> | undefined;
  try {
    const topics = await ensurePipelineTopics(kafka, config);
    const codecs = await openPipelineCodecs(serdes, topics);
    await admin.connect();
    runtime = new StageRuntime(
      sensoryStage({
        input: codecs.turns,
        output: codecs.sensory,
        compressor: new StatisticalCompressor(),
        keepRate: 0.7,
      }),
      { kafka, admin, groupId: `${prefix}memory-sensory`, transactionalIdPrefix: `${prefix}sensory`, dlq: codecs.dlq },
    );
    await runtime.start();

    // Bytes the turns codec would refuse to write: the same Avro schema without zod, and another schema.
    const rawTurns = await serdes.codec(topics.turns, SCHEMA_FILES.turns, z.unknown());
    const otherTopic = `${prefix}other`;
    const other = await serdes.codec(otherTopic, SCHEMA_FILES.dlq, z.unknown());
    const key = keyOf("acme", "c1");
    const garbage = Buffer.from("definitely not avro");
    const emptyText = await rawTurns.encode(turn("t-empty", ""));
    const wrongSchema = await other.encode({ stage: "x", key, error: "e", payload: "", at: "2024-01-01T00:00:00Z" });
    await producer.connect();
    await producer.send({
      topic: topics.turns,
      messages: [
        { key, value: await codecs.turns.encode(turn("t1", "Hi Ben! How was your weekend?")) },
        { key, value: garbage },
        { key, value: await codecs.turns.encode(turn("t2", "I adopted a dog called Pepper on Saturday.")) },
        { key, value: emptyText },
        { key, value: wrongSchema },
        { key: "acme/other", value: await codecs.turns.encode(turn("t-wrong-key", "This key lies.")) },
        { key, value: await codecs.turns.encode(turn("t3", "That's wonderful! What breed is Pepper?")) },
      ],
    });

    const sensory = await collect(kafka, topics.sensory);
    const dlq = await collect(kafka, topics.dlq);
    collectors.push(sensory, dlq);
    await until("3 sensory turns", () => sensory.messages.length >= 3);
    await until("4 dead letters", () => dlq.messages.length >= 4);

    const flowed = await Promise.all(sensory.messages.map((m) => codecs.sensory.decode(m.value)));
    assert.deepEqual(
      flowed.map((d) => (d.ok ? d.value.turnId : d.reason)),
      ["t1", "t2", "t3"],
    );
    for (const d of flowed) assert.ok(d.ok && d.value.compressed.length > 0 && d.value.keptRatio > 0);

    const letters = await Promise.all(dlq.messages.map((m) => codecs.dlq.decode(m.value)));
    const entries = letters.map((d) => {
      assert.ok(d.ok, d.ok ? "" : d.reason);
      return d.value;
    });
    assert.deepEqual(
      entries.map((e) => e.stage),
      ["sensory", "sensory", "sensory", "sensory"],
    );
    assert.deepEqual(
      entries.map((e) => e.key),
      [key, key, key, "acme/other"],
    );
    assert.match(entries[0]?.error ?? "", /^decode: /);
    assert.match(entries[1]?.error ?? "", /^validation: text/);
    assert.match(entries[2]?.error ?? "", /^validation: /);
    assert.match(entries[3]?.error ?? "", /^handler: key "acme\/other" does not match/);
    assert.equal(entries[3]?.attempts, 1, "a PoisonError is not retried");
    // The original bytes, byte for byte.
    assert.deepEqual(
      entries.slice(0, 3).map((e) => Buffer.from(e.payload, "base64")),
      [garbage, emptyText, wrongSchema],
    );
    assert.equal(entries[0]?.sourceTopic, topics.turns);
    assert.deepEqual(
      entries.map((e) => e.sourceOffset),
      ["1", "3", "4", "5"],
    );
  } finally {
    await runtime?.stop().catch(() => undefined);
    await Promise.allSettled(collectors.map((c) => c.consumer.disconnect()));
    await producer.disconnect().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
    await serdes.close().catch(() => undefined);
    await deleteTopics(kafka, prefix);
    await deleteSubjects(prefix);
  }
});
