// A conversation of 2,000 turns that never closes a segment early (issue 12), through the segmenter
// stage on the real broker and registry: no chunk is ever retried (each turn reaches the handler
// exactly once, so no commit failed, for size or anything else), the one segment that the final
// flush closes holds all 2,000 turns, and every changelog entry of the conversation stays under
// the bound of test/unit/segmenter-state-bound.test.ts (1 MB; the old format reached ~16 MB). Then a
// second runtime restores the state (the restore time is printed), and a compacted topic created
// with the old settings is aligned to the current compaction settings.
// The gate is configured not to cut (threshold above 1, hard cap out of reach): the turns are
// deterministic seeded text. Embeddings are the hashing embedder's (384-d, like the real model).
// Skips unless KAFKA_BROKERS and SCHEMA_REGISTRY_URL are set.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import kafkajs from "kafkajs";
import { HashingEmbedder } from "../../../services/core/adapters/hash/embedder.ts";
import { COMPACTED_TOPIC_CONFIG, ensureTopics } from "../../../services/core/adapters/kafka/admin.ts";
import { ensurePipelineTopics, kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import {
  openPipelineCodecs,
  RegistrySerdes,
  SCHEMA_FILES,
  StageStateEnvelopeSchema,
} from "../../../services/core/adapters/kafka/serde.ts";
import { type StageHandler, StageRuntime } from "../../../services/core/adapters/kafka/stage-runtime.ts";
import { CONTROL_HEADER } from "../../../services/core/adapters/kafka/topics.ts";
import { CachingEmbedder } from "../../../services/core/caching-embedder.ts";
import { turnEmbeddingText } from "../../../services/core/turn-text.ts";
import { keyOf, type Segment, type SensoryTurn } from "../../../services/core/types.ts";
import { DEFAULT_GATE } from "../../../services/segmenter/gate.ts";
import { segmenterStage } from "../../../services/segmenter/kafka-handler.ts";
import {
  defaultSegmenterConfig,
  initialSegmenterState,
  type SegmenterState,
  segmenterStep,
} from "../../../services/segmenter/segment-state.ts";
import { seededRandom } from "../../helpers/seeded.ts";
import { collect, deleteSubjects, deleteTopics, readAll, runPrefix, skip, testConfig, until } from "./helpers.ts";

const TURNS = 2000;
const STATE_BYTES_MAX = 1_000_000;
const WORDS = ["garden", "tomatoes", "watering", "the", "plan", "we", "talked", "about", "soil", "seeds", "sun"];
const CFG = defaultSegmenterConfig({
  bufferTokens: 0,
  gate: { ...DEFAULT_GATE, threshold: 1.01, hardCapTokens: 1_000_000 },
});

const turnsOf = (tenant: string, conversation: string): SensoryTurn[] => {
  const rnd = seededRandom(2000);
  return Array.from({ length: TURNS }, (_, i) => {
    const text = Array.from({ length: 6 }, () => WORDS[Math.floor(rnd() * WORDS.length)]).join(" ");
    return {
      tenant,
      conversation,
      turnId: `t${i + 1}`,
      speaker: i % 2 ? "Ana" : "Ben",
      role: "user",
      text,
      compressed: text,
      keptRatio: 1,
      timestamp: new Date(Date.UTC(2024, 0, 1) + i * 60_000).toISOString(),
      sessionId: "s1",
    };
  });
};

test("a 2,000-turn open segment: no commit fails, the changelog entries stay under the bound, the state restores", {
  skip,
  timeout: 600_000,
}, async () => {
  const prefix = runPrefix("seglong");
  const config = testConfig(prefix, { MEMORY_KAFKA_PARTITIONS: "1" });
  const kafka = kafkaClient(config, "segmenter-long-test");
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const admin = kafka.admin();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  const runtimes: StageRuntime<SensoryTurn, Segment, SegmenterState>[] = [];
  let collector: Awaited<ReturnType<typeof collect>> | undefined;
  try {
    const topics = await ensurePipelineTopics(kafka, config);
    const codecs = await openPipelineCodecs(serdes, topics);
    await admin.connect();
    const changelog = topics.state("segmenter");
    await ensureTopics(admin, [{ topic: changelog, partitions: 1, compacted: true }], config.kafka.replicationFactor);
    const stateCodec = await serdes.codec(changelog, SCHEMA_FILES.state, StageStateEnvelopeSchema);
    const embedder = new CachingEmbedder(new HashingEmbedder(384));

    // Counts the handler's calls per turn: a retried chunk (a failed commit) calls it twice.
    const handled = new Map<string, number>();
    const restores: Record<string, unknown>[] = [];
    const stage = (): StageHandler<SensoryTurn, Segment, SegmenterState> => {
      const inner = segmenterStage({
        input: codecs.sensory,
        output: codecs.segments,
        stateCodec,
        embedder,
        cfg: CFG,
      });
      return {
        ...inner,
        handle: (key, input, state) => {
          if (input.kind === "event") handled.set(input.value.turnId, (handled.get(input.value.turnId) ?? 0) + 1);
          return inner.handle(key, input, state);
        },
      };
    };
    const runtime = () =>
      new StageRuntime(stage(), {
        kafka,
        admin,
        groupId: `${prefix}memory-segmenter`,
        transactionalIdPrefix: `${prefix}segmenter`,
        dlq: codecs.dlq,
        changelogTopic: changelog,
        maxChunk: 50,
        sessionTimeoutMs: 30_000,
        observer: {
          log: (_level, msg, fields) => {
            if (msg === "state restored") restores.push(fields ?? {});
          },
        },
      });

    collector = await collect(kafka, topics.segments);
    const first = runtime();
    runtimes.push(first);
    await first.start();

    const tenant = `long-${randomUUID().slice(0, 6)}`;
    const key = keyOf(tenant, "c1");
    const turns = turnsOf(tenant, "c1");
    await producer.connect();
    for (let i = 0; i < turns.length; i += 200)
      await producer.send({
        topic: topics.sensory,
        messages: await Promise.all(
          turns.slice(i, i + 200).map(async (t) => ({ key, value: await codecs.sensory.encode(t) })),
        ),
      });
    await until("every turn handled", () => handled.size === TURNS, 300_000);
    assert.equal(collector.messages.length, 0, "no segment closes before the flush");

    // Restore: a second instance of the stage takes over the partition and reads the changelog.
    await first.stop();
    const second = runtime();
    runtimes.push(second);
    await second.start();
    await producer.send({
      topic: topics.sensory,
      messages: [{ key, value: null, headers: { [CONTROL_HEADER]: "flush" } }],
    });
    await until("the flushed segment", () => (collector?.messages.length ?? 0) >= 1, 120_000);

    const retried = [...handled].filter(([, n]) => n !== 1);
    assert.deepEqual(retried, [], "each turn handled once: no chunk was retried, no commit failed");
    assert.equal(collector.messages.length, 1);
    const value = collector.messages[0]?.value;
    assert.ok(value);
    const decoded = await codecs.segments.decode(value);
    assert.ok(decoded.ok);
    assert.equal(decoded.value.turns.length, TURNS, "one segment of all 2,000 turns");
    assert.equal(decoded.value.closedBy, "flush");

    const entries = await readAll(kafka, changelog, 120_000);
    const sizes = entries.filter((e) => e.key === key && e.value).map((e) => e.value?.length ?? 0);
    const largest = Math.max(...sizes);
    assert.ok(largest < STATE_BYTES_MAX, `largest changelog entry ${largest} B`);
    const restore = restores.find((r) => Number(r.entries) > 0);
    assert.ok(restore, "the second instance restored the state");
    console.log(
      `2,000-turn open segment: ${sizes.length} changelog entries, largest ${largest} B; ` +
        `restore ${JSON.stringify(restore)}`,
    );
  } finally {
    for (const r of runtimes) await r.stop().catch(() => undefined);
    await collector?.consumer.disconnect().catch(() => undefined);
    await producer.disconnect().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
    await deleteTopics(kafka, prefix);
    await deleteSubjects(prefix);
  }
});

test("a changelog entry of state format 1 (every embedding) is migrated at restore: the stage carries on as if never stopped", {
  skip,
  timeout: 180_000,
}, async () => {
  const prefix = runPrefix("segmigrate");
  const config = testConfig(prefix, { MEMORY_KAFKA_PARTITIONS: "1" });
  const kafka = kafkaClient(config, "segmenter-migrate-test");
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const admin = kafka.admin();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  let runtime: StageRuntime<SensoryTurn, Segment, SegmenterState> | undefined;
  let collector: Awaited<ReturnType<typeof collect>> | undefined;
  try {
    const topics = await ensurePipelineTopics(kafka, config);
    const codecs = await openPipelineCodecs(serdes, topics);
    await admin.connect();
    const changelog = topics.state("segmenter");
    await ensureTopics(admin, [{ topic: changelog, partitions: 1, compacted: true }], config.kafka.replicationFactor);
    const stateCodec = await serdes.codec(changelog, SCHEMA_FILES.state, StageStateEnvelopeSchema);
    const embedder = new HashingEmbedder(384);
    const cfg = defaultSegmenterConfig({ bufferTokens: 0 });
    const tenant = `mig-${randomUUID().slice(0, 6)}`;
    const key = keyOf(tenant, "c1");
    const turns = turnsOf(tenant, "c1").slice(0, 12);
    const vectors = await embedder.embed(turns.map((t) => turnEmbeddingText(t.speaker, t.text)));

    // The reference: the pure step over all turns, then a flush; expected are the segments of the
    // last turn's step and of the flush.
    let reference = initialSegmenterState(tenant, "c1");
    const expected: Segment[] = [];
    for (const [i, turn] of turns.entries()) {
      const r = segmenterStep(reference, { kind: "turn", turn, embedding: vectors[i] as Float32Array, nowMs: 0 }, cfg);
      reference = r.state;
      if (i === turns.length - 1) expected.push(...r.segments);
      if (i === turns.length - 2) {
        // What the previous version wrote after the eleventh turn: format 1, every open embedding.
        const open = reference.open;
        assert.ok(open);
        const first = turns.findIndex((t) => t.turnId === open.turns[0]?.turnId);
        const { gate: _gate, ...rest } = open;
        // Active just now, so that the runtime's idle tick leaves it open.
        const v1 = {
          ...reference,
          lastActivityMs: Date.now(),
          open: { ...rest, embeddings: vectors.slice(first, i + 1).map((v) => Array.from(v)) },
        };
        await producer.connect();
        await producer.send({
          topic: changelog,
          messages: [
            {
              key,
              partition: 0,
              value: await stateCodec.encode({
                stage: "segmenter",
                key,
                stateVersion: 1,
                payload: JSON.stringify(v1),
                updatedAt: new Date().toISOString(),
              }),
            },
          ],
        });
      }
    }
    expected.push(...segmenterStep(reference, { kind: "flush", reason: "flush", nowMs: 0 }, cfg).segments);

    // The current stage restores the format-1 entry, then takes the last turn and a flush.
    collector = await collect(kafka, topics.segments);
    runtime = new StageRuntime(
      segmenterStage({ input: codecs.sensory, output: codecs.segments, stateCodec, embedder, cfg }),
      {
        kafka,
        admin,
        groupId: `${prefix}memory-segmenter`,
        transactionalIdPrefix: `${prefix}segmenter`,
        dlq: codecs.dlq,
        changelogTopic: changelog,
      },
    );
    await runtime.start();
    const last = turns.at(-1);
    assert.ok(last);
    await producer.send({
      topic: topics.sensory,
      messages: [
        { key, value: await codecs.sensory.encode(last) },
        { key, value: null, headers: { [CONTROL_HEADER]: "flush" } },
      ],
    });
    await until(
      "the segments after the migrated state",
      () => (collector?.messages.length ?? 0) >= expected.length,
      120_000,
    );
    const got: Segment[] = [];
    for (const m of collector.messages) {
      assert.ok(m.value);
      const d = await codecs.segments.decode(m.value);
      assert.ok(d.ok);
      got.push(d.value);
    }
    assert.deepEqual(got, expected, "the segments of a run that never stopped");
  } finally {
    await runtime?.stop().catch(() => undefined);
    await collector?.consumer.disconnect().catch(() => undefined);
    await producer.disconnect().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
    await deleteTopics(kafka, prefix);
    await deleteSubjects(prefix);
  }
});

test("compacted topics get the changelog compaction settings; an existing one is aligned, its other overrides kept", {
  skip,
  timeout: 120_000,
}, async () => {
  const prefix = runPrefix("compaction");
  const config = testConfig(prefix);
  const kafka = kafkaClient(config, "compaction-config-test");
  const admin = kafka.admin();
  const fresh = `${prefix}fresh`;
  const old = `${prefix}old`;
  const describe = async (topic: string): Promise<Record<string, string>> => {
    const r = await admin.describeConfigs({
      resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: topic }],
      includeSynonyms: false,
    });
    return Object.fromEntries((r.resources[0]?.configEntries ?? []).map((e) => [e.configName, e.configValue]));
  };
  try {
    await admin.connect();
    // A topic as the previous version created it, plus an operator's own override.
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic: old,
          numPartitions: 1,
          replicationFactor: config.kafka.replicationFactor,
          configEntries: [
            { name: "cleanup.policy", value: "compact" },
            { name: "min.compaction.lag.ms", value: "0" },
            { name: "max.message.bytes", value: "2000000" },
          ],
        },
      ],
    });
    await ensureTopics(
      admin,
      [
        { topic: fresh, partitions: 1, compacted: true },
        { topic: old, partitions: 1, compacted: true },
      ],
      config.kafka.replicationFactor,
    );
    for (const topic of [fresh, old]) {
      const c = await describe(topic);
      for (const [k, v] of Object.entries(COMPACTED_TOPIC_CONFIG)) assert.equal(c[k], v, `${topic} ${k}`);
    }
    assert.equal((await describe(old))["max.message.bytes"], "2000000", "the operator's override is kept");
  } finally {
    await admin.disconnect().catch(() => undefined);
    await deleteTopics(kafka, prefix);
  }
});
