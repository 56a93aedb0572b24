/**
 * Spike for issue 12 (docs/kafka-client.md): the fencing check of confluent-kafka-eos.mjs, with
 * kafkajs 2.2.4 (our dependency). An old owner opens a transaction; a new owner with the same
 * transactional id only connect()s; can the old owner still commit? Then the new owner begins its
 * first transaction; can the old owner commit after that? Not part of npm test.
 *
 *   eval "$(bash infra/env.sh)"; SPIKE_PREFIX=spike-$RANDOM- node scripts/spikes/kafkajs-fencing.mjs
 */
import { Kafka, logLevel } from "kafkajs";

const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:19092").split(",");
const prefix = process.env.SPIKE_PREFIX ?? `spike-${Date.now()}-`;
const kafka = new Kafka({ clientId: "spike", brokers, logLevel: logLevel.NOTHING });
const topic = `${prefix}kjs-fence`;
const txId = `${prefix}kjs-fence-tx`;

const admin = kafka.admin();
await admin.connect();
await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });

const producer = () => kafka.producer({ transactionalId: txId, idempotent: true, maxInFlightRequests: 1 });
const outcome = (p) =>
  p.then(
    () => "committed",
    (err) => `${err.name}: ${err.message}`,
  );

// Round 1: the new owner only connects.
const zombie = producer();
await zombie.connect();
const ztx = await zombie.transaction();
await ztx.send({ topic, messages: [{ key: "z", value: "zombie-after-owner-connect" }] });
const owner = producer();
await owner.connect();
const afterConnect = await outcome(ztx.commit());

// Round 2: the zombie opens another transaction; the new owner begins (and commits) its first one.
const ztx2 = await zombie.transaction();
await ztx2.send({ topic, messages: [{ key: "z", value: "zombie-after-owner-transaction" }] });
const otx = await owner.transaction();
await otx.send({ topic, messages: [{ key: "o", value: "owner" }] });
await otx.commit();
const afterOwnerTx = await outcome(ztx2.commit());

const values = [];
const reader = kafka.consumer({ groupId: `${prefix}kjs-reader`, readUncommitted: false });
await reader.connect();
await reader.subscribe({ topic, fromBeginning: true });
await reader.run({ eachMessage: async ({ message }) => void values.push(message.value?.toString()) });
const deadline = Date.now() + 30_000;
while (!values.includes("owner") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
await new Promise((r) => setTimeout(r, 2000)); // anything committed after "owner" shows up here
await reader.disconnect();
await Promise.allSettled([zombie.disconnect(), owner.disconnect()]);
await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
await admin.disconnect();
console.log(
  JSON.stringify({
    client: "kafkajs 2.2.4",
    zombieCommitAfterOwnerConnect: afterConnect,
    zombieCommitAfterOwnerFirstTransaction: afterOwnerTx,
    readCommitted: values,
  }),
);
