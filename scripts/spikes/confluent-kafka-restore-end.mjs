/**
 * Spike for issue 12 (docs/kafka-client.md): how would a restore reader on
 * @confluentinc/kafka-javascript know it has read a transactional changelog partition to its end?
 * kafkajs's END_BATCH_PROCESS event (which our restore uses) does not exist there. This writes
 * 3 committed transactions and then an aborted one (the log ends with an ABORT marker), reads the
 * partition with the callback API (assign(), no consumer group join, read_committed,
 * enable.partition.eof) and reports what it saw: the data, the partition EOF event and position()
 * against the high watermark. Not part of npm test.
 *
 *   CKJS_DIR=/tmp/ckjs SPIKE_PREFIX=spike-$RANDOM- node scripts/spikes/confluent-kafka-restore-end.mjs
 */
import { createRequire } from "node:module";
import path from "node:path";

const dir = process.env.CKJS_DIR ?? "/tmp/ckjs";
const require = createRequire(path.join(dir, "package.json"));
const ckjs = require("@confluentinc/kafka-javascript");
const { Kafka, logLevel } = ckjs.KafkaJS;
const brokers = process.env.KAFKA_BROKERS ?? "127.0.0.1:19092";
const prefix = process.env.SPIKE_PREFIX ?? `spike-${Date.now()}-`;
const topic = `${prefix}changelog`;
const kafka = new Kafka({ kafkaJS: { brokers: brokers.split(","), logLevel: logLevel.NOTHING } });

const admin = kafka.admin();
await admin.connect();
await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] });
const producer = kafka.producer({ kafkaJS: { transactionalId: `${prefix}changelog-tx` } });
await producer.connect();
for (let t = 0; t < 3; t++) {
  const tx = await producer.transaction();
  await tx.send({ topic, messages: [{ key: `k${t}`, value: `state-${t}` }] });
  await tx.commit();
}
const aborted = await producer.transaction();
await aborted.send({ topic, messages: [{ key: "k9", value: "aborted" }] });
await aborted.abort();
await producer.disconnect();
const [offsets] = await admin.fetchTopicOffsets(topic);

const started = performance.now();
const result = await new Promise((resolve, reject) => {
  const seen = [];
  const reader = new ckjs.KafkaConsumer(
    {
      "group.id": `${prefix}restore-unused`, // required by librdkafka; assign() does not join it
      "metadata.broker.list": brokers,
      "enable.auto.commit": false,
      "isolation.level": "read_committed",
      "enable.partition.eof": true,
    },
    { "auto.offset.reset": "earliest" },
  );
  const timer = setTimeout(() => reject(new Error("no partition EOF within 30 s")), 30_000);
  reader.on("event.error", reject);
  reader.on("data", (m) => seen.push(`${m.offset}:${m.value?.toString()}`));
  reader.on("partition.eof", (e) => {
    clearTimeout(timer);
    const position = reader.position([{ topic, partition: 0 }])[0]?.offset;
    reader.queryWatermarkOffsets(topic, 0, 5000, (err, wm) => {
      reader.disconnect();
      if (err) reject(err);
      else resolve({ seen, eofOffset: e.offset, position, highWatermark: wm.highOffset });
    });
  });
  reader.on("ready", () => {
    reader.assign([{ topic, partition: 0, offset: 0 }]);
    reader.consume();
  });
  reader.connect();
});
await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
await admin.disconnect();
const ok = result.seen.length === 3 && Number(result.position) === Number(result.highWatermark);
console.log(
  JSON.stringify({
    check: "restore end: read_committed + partition EOF after 3 committed and 1 aborted transaction",
    ok,
    adminOffsets: offsets,
    ...result,
    ms: Math.round(performance.now() - started),
  }),
);
process.exit(ok ? 0 : 1);
