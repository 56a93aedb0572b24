/**
 * Spike for issue 12 (docs/kafka-client.md): do @confluentinc/kafka-javascript's transactions,
 * fencing, cooperative-sticky assignment and static membership behave as our stage runtime needs,
 * against a real broker? Not part of npm test: the package is not a dependency of this repository.
 * It is installed in a scratch folder and named by CKJS_DIR:
 *
 *   mkdir /tmp/ckjs && cd /tmp/ckjs && npm init -y && CKJS_LINKING=dynamic npm install @confluentinc/kafka-javascript
 *   eval "$(bash infra/env.sh)"
 *   CKJS_DIR=/tmp/ckjs SPIKE_PREFIX=spike-$RANDOM- node scripts/spikes/confluent-kafka-eos.mjs
 *
 * It uses the package's KafkaJS-compatible API (what a port of stage-runtime.ts would use) and
 * prints one JSON line per check; it exits 1 if a check fails.
 */
import { createRequire } from "node:module";
import path from "node:path";

const dir = process.env.CKJS_DIR ?? "/tmp/ckjs";
const require = createRequire(path.join(dir, "package.json"));
const ckjs = require("@confluentinc/kafka-javascript");
const { Kafka, logLevel, PartitionAssigners } = ckjs.KafkaJS;

const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:19092").split(",");
const prefix = process.env.SPIKE_PREFIX ?? `spike-${Date.now()}-`;
const kafka = new Kafka({ kafkaJS: { brokers, logLevel: logLevel.ERROR } });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const results = [];
const report = (check, ok, details) => {
  results.push(ok);
  console.log(JSON.stringify({ check, ok, ...details }));
};

/** Waits for cond() (polling: the broker's state is only observable by asking), or fails after ms. */
const until = async (what, cond, ms = 60_000) => {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
};

/** Every committed value of a topic (read_committed), from the beginning, as strings. */
const readCommitted = async (topic, expected, ms = 60_000) => {
  const values = [];
  const c = kafka.consumer({
    kafkaJS: { groupId: `${prefix}reader-${Math.random()}`, fromBeginning: true, autoCommit: false },
  });
  await c.connect();
  await c.subscribe({ topics: [topic] });
  await c.run({ eachMessage: async ({ message }) => void values.push(message.value?.toString() ?? "") });
  // The expected count, then 3 s more to see that nothing extra (an aborted record) appears.
  await until(`${expected} values on ${topic}`, () => values.length >= expected, ms).catch(() => undefined);
  await sleep(3000);
  await c.disconnect();
  return values;
};

const admin = kafka.admin();
await admin.connect();
const topics = { in: `${prefix}in`, out: `${prefix}out`, fence: `${prefix}fence`, groups: `${prefix}groups` };
await admin.createTopics({
  topics: [
    { topic: topics.in, numPartitions: 2 },
    { topic: topics.out, numPartitions: 2 },
    { topic: topics.fence, numPartitions: 1 },
    { topic: topics.groups, numPartitions: 4 },
  ],
});

// --- 1. consume-transform-produce with sendOffsetsToTransaction + consumer group metadata ---------
const N = 200;
{
  const plain = kafka.producer({ kafkaJS: { idempotent: true } });
  await plain.connect();
  await plain.send({
    topic: topics.in,
    messages: Array.from({ length: N }, (_, i) => ({ key: `k${i % 10}`, value: `v${i}` })),
  });
  await plain.disconnect();

  const groupId = `${prefix}eos`;
  const consumer = kafka.consumer({ kafkaJS: { groupId, fromBeginning: true, autoCommit: false } });
  const producer = kafka.producer({ kafkaJS: { transactionalId: `${prefix}eos-tx`, maxInFlightRequests: 1 } });
  const t0 = performance.now();
  await producer.connect();
  const connectMs = performance.now() - t0;
  await consumer.connect();
  await consumer.subscribe({ topics: [topics.in] });
  let done = 0;
  let txs = 0;
  let maxBatch = 0;
  await consumer.run({
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset }) => {
      maxBatch = Math.max(maxBatch, batch.messages.length);
      const tx = await producer.transaction();
      try {
        await tx.send({
          topic: topics.out,
          messages: batch.messages.map((m) => ({ key: m.key, value: `${m.value?.toString().toUpperCase()}` })),
        });
        const last = batch.messages.at(-1);
        // KIP-447: the consumer itself (its group metadata: group, generation, member id) goes with the offsets.
        await tx.sendOffsets({
          consumer,
          topics: [
            {
              topic: batch.topic,
              partitions: [{ partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() }],
            },
          ],
        });
        await tx.commit();
      } catch (err) {
        await tx.abort().catch(() => undefined);
        throw err;
      }
      resolveOffset(batch.messages.at(-1).offset);
      txs++;
      done += batch.messages.length;
    },
  });
  const started = performance.now();
  await until("all inputs processed", () => done >= N, 120_000);
  const loopMs = performance.now() - started;
  await consumer.disconnect();
  await producer.disconnect();
  const out = await readCommitted(topics.out, N);
  const committed = await admin.fetchOffsets({ groupId, topics: [topics.in] });
  const committedSum = committed[0].partitions.reduce((n, p) => n + Number(p.offset), 0);
  const unique = new Set(out).size;
  report(
    "eos: consume-transform-produce, sendOffsets with consumer group metadata",
    out.length === N && unique === N && committedSum === N,
    {
      inputs: N,
      outputsReadCommitted: out.length,
      uniqueOutputs: unique,
      committedOffsetsSum: committedSum,
      transactions: txs,
      maxEachBatchSize: maxBatch,
      producerConnectMs: Math.round(connectMs),
      processMs: Math.round(loopMs),
    },
  );
}

// --- 2. fencing: a second producer with the same transactional id, at connect ---------------------
{
  const txId = `${prefix}fence-tx`;
  const zombie = kafka.producer({ kafkaJS: { transactionalId: txId } });
  await zombie.connect();
  const tx = await zombie.transaction();
  await tx.send({ topic: topics.fence, messages: [{ key: "z", value: "from-zombie" }] });
  // The new owner only connects: no transaction of its own yet.
  const owner = kafka.producer({ kafkaJS: { transactionalId: txId } });
  const t0 = performance.now();
  await owner.connect();
  const ownerConnectMs = performance.now() - t0;
  let zombieError;
  try {
    await tx.commit();
  } catch (err) {
    zombieError = err;
  }
  let zombieNewTx;
  try {
    await zombie.transaction();
    zombieNewTx = "began";
  } catch (err) {
    zombieNewTx = `${err.code ?? ""} ${err.message}`;
  }
  const otx = await owner.transaction();
  await otx.send({ topic: topics.fence, messages: [{ key: "o", value: "from-owner" }] });
  await otx.commit();
  await owner.disconnect();
  await zombie.disconnect().catch(() => undefined);
  const visible = await readCommitted(topics.fence, 1);
  report(
    "fencing: new owner's connect() fences the old producer before either begins a new transaction",
    zombieError !== undefined && visible.length === 1 && visible[0] === "from-owner",
    {
      ownerConnectMs: Math.round(ownerConnectMs),
      zombieCommit: zombieError ? `${zombieError.code} ${zombieError.message}` : "committed",
      zombieCommitFatal: zombieError?.fatal,
      zombieNextTransaction: zombieNewTx,
      readCommitted: visible,
    },
  );
}

// --- 3. cooperative-sticky: a join moves only the partitions that change owner ---------------------
/** A group member that records its rebalance callbacks (incremental under cooperative-sticky). */
const member = async (name, groupId, extra = {}) => {
  const events = [];
  const c = kafka.consumer({
    kafkaJS: {
      groupId,
      fromBeginning: true,
      autoCommit: false,
      sessionTimeout: 10_000,
      partitionAssigners: [PartitionAssigners.cooperativeSticky],
    },
    rebalance_cb: (err, assignment) => {
      const kind = err.code === ckjs.CODES.ERRORS.ERR__ASSIGN_PARTITIONS ? "assign" : "revoke";
      events.push({ kind, partitions: assignment.map((a) => a.partition).sort() });
    },
    ...extra,
  });
  await c.connect();
  await c.subscribe({ topics: [topics.groups] });
  await c.run({ eachMessage: async () => undefined });
  return {
    name,
    c,
    events,
    owned: () =>
      c
        .assignment()
        .map((a) => a.partition)
        .sort(),
  };
};
{
  const groupId = `${prefix}coop`;
  const a = await member("a", groupId);
  await until("a owns 4", () => a.owned().length === 4);
  const before = a.owned();
  const b = await member("b", groupId);
  await until("b owns 2", () => b.owned().length === 2 && a.owned().length === 2);
  const revokedFromA = a.events.filter((e) => e.kind === "revoke").flatMap((e) => e.partitions);
  const kept = a.owned().every((p) => before.includes(p));
  report(
    "cooperative-sticky: a joining member takes 2 partitions; the other keeps its 2 without revoking them",
    revokedFromA.length === 2 && kept,
    { aEvents: a.events, bEvents: b.events, aOwns: a.owned(), bOwns: b.owned() },
  );
  await b.c.disconnect();
  await a.c.disconnect();
}

// --- 4. static membership: a restart within the session timeout gets its partitions back, no rebalance
{
  const groupId = `${prefix}static`;
  const a = await member("a", groupId, { "group.instance.id": `${prefix}inst-a` });
  const b = await member("b", groupId, { "group.instance.id": `${prefix}inst-b` });
  await until("a and b own 2 each", () => a.owned().length === 2 && b.owned().length === 2);
  const aOwned = a.owned();
  const bEventsBefore = b.events.length;
  const described = await admin.describeGroups([groupId]);
  const instanceIds = described.groups[0].members.map((m) => m.groupInstanceId).sort();
  // A static member's close does not leave the group (KIP-345): the broker waits session.timeout.
  await a.c.disconnect();
  const a2 = await member("a2", groupId, { "group.instance.id": `${prefix}inst-a` });
  await until("a2 owns 2", () => a2.owned().length === 2);
  await sleep(3000); // a late rebalance of b would show up here
  report(
    "static membership: restart of group.instance.id inst-a gets the same partitions; inst-b sees no rebalance",
    JSON.stringify(a2.owned()) === JSON.stringify(aOwned) && b.events.length === bEventsBefore,
    {
      instanceIds,
      aBefore: aOwned,
      aAfterRestart: a2.owned(),
      bEventsDuringRestart: b.events.slice(bEventsBefore),
    },
  );
  await a2.c.disconnect();
  await b.c.disconnect();
}

await admin.deleteTopics({ topics: Object.values(topics) }).catch(() => undefined);
await admin.disconnect();
console.log(
  JSON.stringify({
    librdkafka: ckjs.librdkafkaVersion,
    passed: results.filter(Boolean).length,
    failed: results.filter((r) => !r).length,
  }),
);
process.exit(results.every(Boolean) ? 0 : 1);
