/**
 * Spike for issue 12 (docs/kafka-client.md): does KIP-447 (consumer group metadata in
 * sendOffsetsToTransaction) fence a zombie whose producer has its OWN transactional id, as the
 * issue's test does it? A child process consumes the input, opens a transaction, writes its
 * outputs and is SIGSTOPped before it sends its offsets; past the session timeout the parent's
 * consumer (same group, another transactional id) owns the partition and processes everything;
 * then the child is resumed (SIGCONT) and tries to send its offsets and commit. Not part of npm test.
 *
 *   CKJS_DIR=/tmp/ckjs SPIKE_PREFIX=spike-$RANDOM- node scripts/spikes/confluent-kafka-zombie.mjs
 */
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const dir = process.env.CKJS_DIR ?? "/tmp/ckjs";
const require = createRequire(path.join(dir, "package.json"));
const ckjs = require("@confluentinc/kafka-javascript");
const { Kafka, logLevel } = ckjs.KafkaJS;
const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:19092").split(",");
const prefix = process.env.SPIKE_PREFIX ?? `spike-${Date.now()}-`;
const kafka = new Kafka({ kafkaJS: { brokers, logLevel: logLevel.NOTHING } });
const topics = { in: `${prefix}z-in`, out: `${prefix}z-out` };
const groupId = `${prefix}z-group`;
const N = 10;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const until = async (what, cond, ms = 90_000) => {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
};

/** A consumer of the group and a transactional producer that writes `tag:value` per input. */
const worker = async (tag, onBatchSent) => {
  const consumer = kafka.consumer({
    kafkaJS: { groupId, fromBeginning: true, autoCommit: false, sessionTimeout: 6000, heartbeatInterval: 1000 },
  });
  const producer = kafka.producer({ kafkaJS: { transactionalId: `${prefix}${tag}-tx` } });
  await producer.connect();
  await consumer.connect();
  await consumer.subscribe({ topics: [topics.in] });
  let done = 0;
  await consumer.run({
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset }) => {
      const tx = await producer.transaction();
      await tx.send({
        topic: topics.out,
        messages: batch.messages.map((m) => ({ key: m.key, value: `${tag}:${m.value?.toString()}` })),
      });
      await onBatchSent?.();
      const last = batch.messages.at(-1);
      try {
        await tx.sendOffsets({
          consumer,
          topics: [
            { topic: batch.topic, partitions: [{ partition: batch.partition, offset: `${BigInt(last.offset) + 1n}` }] },
          ],
        });
        await tx.commit();
      } catch (err) {
        // The zombie's outcome, for the parent (the owner's errors fail the run as usual).
        if (tag === "zombie") console.log(JSON.stringify({ zombieError: `${err.code} ${err.message}` }));
        await tx.abort().catch(() => undefined);
        throw err;
      }
      resolveOffset(last.offset);
      done += batch.messages.length;
    },
  });
  return { consumer, producer, done: () => done };
};

if (process.argv[2] === "zombie") {
  // Child: tells the parent when its outputs are in the open transaction, then waits for "go".
  const lines = createInterface({ input: process.stdin });
  const go = new Promise((r) => lines.once("line", r));
  let result = "no batch";
  await worker("zombie", async () => {
    console.log("SENT");
    await go;
  }).then(
    async (w) => {
      await until("the zombie's batch", () => w.done() > 0 || result !== "no batch", 60_000).catch(() => undefined);
      result = w.done() > 0 ? `committed ${w.done()}` : result;
      console.log(JSON.stringify({ zombie: result }));
      process.exit(0);
    },
    (err) => console.log(JSON.stringify({ zombieError: String(err) })),
  );
} else {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: [
      { topic: topics.in, numPartitions: 1 },
      { topic: topics.out, numPartitions: 1 },
    ],
  });
  const plain = kafka.producer({ kafkaJS: {} });
  await plain.connect();
  await plain.send({ topic: topics.in, messages: Array.from({ length: N }, (_, i) => ({ key: "k", value: `v${i}` })) });
  await plain.disconnect();

  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "zombie"], {
    stdio: ["pipe", "pipe", "inherit"],
    env: process.env,
  });
  const childLines = [];
  createInterface({ input: child.stdout }).on("line", (l) => childLines.push(l));
  await until("the zombie's open transaction", () => childLines.includes("SENT"));
  process.kill(child.pid, "SIGSTOP");
  const stoppedAt = Date.now();
  const owner = await worker("owner");
  await until("the owner processed every input", () => owner.done() >= N, 120_000);
  const takeoverMs = Date.now() - stoppedAt;
  process.kill(child.pid, "SIGCONT");
  child.stdin.write("go\n");
  // The zombie's own logic: it reports its commit or its error and exits (or we give up after 60 s).
  await until("the zombie's outcome", () => childLines.some((l) => l.startsWith("{")), 60_000).catch(() => undefined);
  const zombieOutcome = childLines.filter((l) => l.startsWith("{"));
  child.kill("SIGKILL");

  const values = [];
  const reader = kafka.consumer({ kafkaJS: { groupId: `${prefix}z-reader`, fromBeginning: true } });
  await reader.connect();
  await reader.subscribe({ topics: [topics.out] });
  await reader.run({ eachMessage: async ({ message }) => void values.push(message.value?.toString()) });
  await until("the owner's outputs", () => values.length >= N, 30_000).catch(() => undefined);
  await sleep(3000);
  await reader.disconnect();
  await owner.consumer.disconnect();
  await owner.producer.disconnect();
  const committed = await admin.fetchOffsets({ groupId, topics: [topics.in] });
  await admin.deleteTopics({ topics: Object.values(topics) }).catch(() => undefined);
  await admin.disconnect();
  const zombieOutputs = values.filter((v) => v.startsWith("zombie:")).length;
  const ok = zombieOutputs === 0 && values.length === N;
  console.log(
    JSON.stringify({
      check: "KIP-447: a resumed zombie with its own transactional id cannot commit after the group moved on",
      ok,
      takeoverMs,
      zombieOutcome,
      outputsReadCommitted: values.length,
      zombieOutputs,
      committedOffset: committed[0].partitions[0].offset,
    }),
  );
  process.exit(ok ? 0 : 1);
}
