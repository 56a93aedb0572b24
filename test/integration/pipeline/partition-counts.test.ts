// The pipeline's data topics must share one partition count (real Kafka): a key's partition is then
// the same on every topic, which the stages' keyed state and a tenant's erasure rely on (each
// erase-tenant control erases its partition's share of the tenant). A records topic made by hand
// with another count would leave part of an erased tenant behind; a process refuses to start on it,
// naming the counts, and starts once the topics agree. Skips unless KAFKA_BROKERS is set.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ensurePipelineTopics, kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import { topicNames } from "../../../services/core/adapters/kafka/topics.ts";
import { deleteTopics, runPrefix, skip, testConfig } from "./helpers.ts";

test("a process refuses topics whose partition counts differ, naming them", { skip, timeout: 60_000 }, async () => {
  const prefix = runPrefix("partcount");
  const config = testConfig(prefix, { MEMORY_KAFKA_PARTITIONS: "3" });
  const kafka = kafkaClient(config, "partcount-test");
  const admin = kafka.admin();
  const names = topicNames(config.kafka);
  try {
    await admin.connect();
    await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic: names.records, numPartitions: 2, replicationFactor: 1 }],
    });
    await assert.rejects(ensurePipelineTopics(kafka, config), (err: Error) => {
      assert.match(err.message, /one partition count/);
      assert.ok(err.message.includes(`${names.records} 2`) && err.message.includes(`${names.turns} 3`), err.message);
      return true;
    });
    await admin.createPartitions({ topicPartitions: [{ topic: names.records, count: 3 }] });
    assert.equal((await ensurePipelineTopics(kafka, config)).records, names.records);
  } finally {
    await admin.disconnect();
    await deleteTopics(kafka, prefix);
  }
});
