// Smoke test for the local Kafka (infra/kafka.sh): kafkajs against a KRaft 4.x broker.
// Exactly-once consume-transform-produce: produce in a transaction, consume, produce the
// result and commit the consumed offsets in one transaction (sendOffsets), then check with a
// read_committed consumer. An aborted transaction's records must stay invisible.
// Skips unless KAFKA_BROKERS is set (npm run infra:up; eval "$(bash infra/env.sh)").
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { type Consumer, Kafka, type KafkaMessage, logLevel, Partitioners, type Producer } from "kafkajs";

const brokers = process.env.KAFKA_BROKERS;
const skip = !brokers ? "KAFKA_BROKERS not set: start with npm run infra:up" : false;
const DEADLINE_MS = 60_000;

/** Resolves when `check()` is true, polling; rejects after `ms`. */
async function until(what: string, check: () => boolean, ms = DEADLINE_MS): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms}ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

type Seen = { key: string; value: string; offset: string; partition: number };
function record(msg: KafkaMessage, partition: number): Seen {
  return { key: msg.key?.toString() ?? "", value: msg.value?.toString() ?? "", offset: msg.offset, partition };
}

test("kafka: transactional produce, consume-transform-produce with sendOffsets, read_committed", {
  skip,
  timeout: 180_000,
}, async () => {
  const run = randomUUID().slice(0, 8);
  const inTopic = `infra-smoke-in-${run}`;
  const outTopic = `infra-smoke-out-${run}`;
  const groupId = `infra-smoke-group-${run}`;
  const kafka = new Kafka({
    clientId: `infra-smoke-${run}`,
    brokers: (brokers ?? "").split(","),
    logLevel: process.env.KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.NOTHING,
    retry: { retries: 10, initialRetryTime: 100 },
  });
  const admin = kafka.admin();
  const producers: Producer[] = [];
  const consumers: Consumer[] = [];
  const txProducer = (id: string): Producer => {
    const p = kafka.producer({
      transactionalId: `${id}-${run}`,
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    producers.push(p);
    return p;
  };
  const consumer = (group: string, readUncommitted: boolean): Consumer => {
    const c = kafka.consumer({ groupId: group, readUncommitted, retry: { retries: 10 } });
    consumers.push(c);
    return c;
  };

  try {
    await admin.connect();
    const created = await admin.createTopics({
      waitForLeaders: true,
      topics: [
        { topic: inTopic, numPartitions: 1, replicationFactor: 1 },
        { topic: outTopic, numPartitions: 1, replicationFactor: 1 },
      ],
    });
    assert.equal(created, true);

    // 1. Source: one committed transaction, one aborted, then a committed sentinel.
    const source = txProducer("source");
    await source.connect();
    let tx = await source.transaction();
    await tx.send({
      topic: inTopic,
      messages: [
        { key: "k1", value: "one" },
        { key: "k2", value: "two" },
        { key: "k3", value: "three" },
      ],
    });
    await tx.commit();
    tx = await source.transaction();
    await tx.send({ topic: inTopic, messages: [{ key: "kx", value: "ABORTED" }] });
    await tx.abort();
    tx = await source.transaction();
    await tx.send({ topic: inTopic, messages: [{ key: "end", value: "sentinel" }] });
    await tx.commit();

    // 2. Consume-transform-produce: output + consumed offsets committed in one transaction.
    const processor = txProducer("processor");
    await processor.connect();
    const stage = consumer(groupId, false);
    await stage.connect();
    await stage.subscribe({ topic: inTopic, fromBeginning: true });
    const processed: Seen[] = [];
    await stage.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        const t = await processor.transaction();
        try {
          await t.send({
            topic: outTopic,
            messages: [{ key: message.key, value: (message.value?.toString() ?? "").toUpperCase() }],
          });
          await t.sendOffsets({
            consumerGroupId: groupId,
            topics: [{ topic, partitions: [{ partition, offset: (BigInt(message.offset) + 1n).toString() }] }],
          });
          await t.commit();
        } catch (err) {
          await t.abort();
          throw err;
        }
        processed.push(record(message, partition));
      },
    });
    await until("the stage to process the sentinel", () => processed.some((m) => m.key === "end"));
    await stage.disconnect();

    assert.deepEqual(
      processed.map((m) => m.value),
      ["one", "two", "three", "sentinel"],
      "read_committed stage must not see the aborted record",
    );

    // 3. The consumed offsets were committed by the transaction (not by the consumer).
    const [committed] = await admin.fetchOffsets({ groupId, topics: [inTopic] });
    const last = processed.at(-1);
    assert.ok(committed && last);
    assert.equal(committed.partitions[0]?.offset, (BigInt(last.offset) + 1n).toString());

    // 4. Output verified by an independent read_committed consumer.
    const verifier = consumer(`${groupId}-verify`, false);
    await verifier.connect();
    await verifier.subscribe({ topic: outTopic, fromBeginning: true });
    const out: Seen[] = [];
    await verifier.run({ eachMessage: async ({ partition, message }) => void out.push(record(message, partition)) });
    await until("4 committed output records", () => out.length >= 4);
    assert.deepEqual(
      out.map((m) => `${m.key}=${m.value}`),
      ["k1=ONE", "k2=TWO", "k3=THREE", "end=SENTINEL"],
    );

    // 5. A read_uncommitted consumer does see the aborted record: the abort really happened.
    const dirty = consumer(`${groupId}-dirty`, true);
    await dirty.connect();
    await dirty.subscribe({ topic: inTopic, fromBeginning: true });
    const raw: Seen[] = [];
    await dirty.run({ eachMessage: async ({ partition, message }) => void raw.push(record(message, partition)) });
    await until("the sentinel through read_uncommitted", () => raw.some((m) => m.key === "end"));
    assert.deepEqual(
      raw.map((m) => m.value),
      ["one", "two", "three", "ABORTED", "sentinel"],
    );
  } finally {
    await Promise.allSettled(consumers.map((c) => c.disconnect()));
    await Promise.allSettled(producers.map((p) => p.disconnect()));
    await admin.deleteTopics({ topics: [inTopic, outTopic] }).catch(() => undefined);
    await admin.disconnect();
  }
});
