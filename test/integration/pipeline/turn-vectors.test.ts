// Each turn embedded once in the distributed pipeline (issue 18), real Kafka + schema registry +
// Neo4j and the real embedder. 1: the sensory schema's optional embedding field through the
// registry: the registry accepts it over the schema before it (BACKWARD), a value with it and one
// without round-trip, and a value an older producer wrote reads without it. 2: the sensory, segmenter
// and indexer processes: turns produced to memory.turns.v1 reach memory.sensory.v1 with their
// vectors; the segmenter and the indexer's raw-turn consumer embed none of them (their models' text
// counters, memory_embedded_texts_total, stay at 0) and the stored vectors are the sensory stage's;
// turns produced to the sensory topic without a vector, or with another model's, are embedded by
// both and still indexed. Bounded waits, no timing assertion.
// Skips unless KAFKA_BROKERS, SCHEMA_REGISTRY_URL and NEO4J_URI are set.
import assert from "node:assert/strict";
import { test } from "node:test";
import { AvroSerializer, Compatibility, SerdeType } from "@confluentinc/schemaregistry";
import { ensurePipelineTopics } from "../../../services/core/adapters/kafka/process.ts";
import {
  openPipelineCodecs,
  RegistrySerdes,
  readSchema,
  SCHEMA_FILES,
} from "../../../services/core/adapters/kafka/serde.ts";
import { type SensoryEvent, SensoryEventSchema } from "../../../services/core/adapters/kafka/turn-embedding.ts";
import { turnRowId } from "../../../services/core/ids.ts";
import { keyOf, type Turn } from "../../../services/core/types.ts";
import { rawTurnText } from "../../../services/indexer/raw-turns.ts";
import { neo4jSkip } from "../../helpers/neo4j-env.ts";
import { turnOf } from "../../helpers/stage-fixtures.ts";
import { deleteSubjects, skip as kafkaSkip, readAll, registryUrl, runPrefix, waitGroupsDrained } from "./helpers.ts";
import { openNeo4jPipelineRun } from "./neo4j-run.ts";
import { type Instance, startInstance, stopInstance, waitStarted } from "./stage-harness.ts";

const skip = kafkaSkip || neo4jSkip;

/** The schema before the embedding field (what producers wrote until issue 18). */
const schemaBefore = (): string => {
  const schema = JSON.parse(readSchema(SCHEMA_FILES.sensory)) as { fields: { name: string }[] };
  assert.ok(schema.fields.some((f) => f.name === "embedding"));
  return JSON.stringify({ ...schema, fields: schema.fields.filter((f) => f.name !== "embedding") });
};

test("the sensory schema's embedding field: accepted over the old schema, round-trips with and without, old values read", {
  skip: kafkaSkip,
  timeout: 60_000,
}, async () => {
  const prefix = runPrefix("turn-vectors-schema");
  const topic = `${prefix}memory.sensory.v1`;
  const serdes = new RegistrySerdes(registryUrl as string);
  try {
    // An older deployment registered the schema without the field and wrote a value with it.
    const subject = `${topic}-value`;
    await serdes.client.updateConfig(subject, { compatibility: Compatibility.BACKWARD });
    const oldId = await serdes.client.register(subject, { schemaType: "AVRO", schema: schemaBefore() });
    const oldWriter = new AvroSerializer(serdes.client, SerdeType.VALUE, {
      autoRegisterSchemas: false,
      useSchemaId: oldId,
    });
    const turn = { ...turnOf({ turnId: "t1", text: "I adopted a greyhound." }), tenant: "acme", conversation: "c1" };
    const base = { ...turn, metadata: null, compressed: "adopted greyhound", keptRatio: 0.5 };
    const oldBytes = await oldWriter.serialize(topic, base);

    // The new schema is a compatible next version of the subject (the registry checks BACKWARD).
    const codec = await serdes.codec(topic, SCHEMA_FILES.sensory, SensoryEventSchema);
    assert.notEqual(codec.schemaId, oldId, "a new version");

    const old = await codec.decode(oldBytes);
    assert.ok(old.ok, old.ok ? "" : old.reason);
    assert.equal(old.value.embedding, undefined, "an old value has no vector");
    assert.equal(old.value.compressed, base.compressed);

    const bare: SensoryEvent = { ...turn, compressed: "adopted greyhound", keptRatio: 0.5 };
    const without = await codec.decode(await codec.encode(bare));
    assert.ok(without.ok);
    assert.deepEqual(without.value, bare);

    // float32 values come back exactly (Avro float).
    const vector = Array.from(new Float32Array([0.1, -0.25, 1 / 3, 0, 2 ** -20]));
    const carrying: SensoryEvent = { ...bare, embedding: { model: "onnx:all-MiniLM-L6-v2:fp32", vector } };
    const withVector = await codec.decode(await codec.encode(carrying));
    assert.ok(withVector.ok);
    assert.deepEqual(withVector.value, carrying);

    // A bad vector is refused at encode and named at decode (a dead letter, not a crash).
    await assert.rejects(codec.encode({ ...bare, embedding: { model: "m", vector: [] } }), /embedding\.vector/);
  } finally {
    await serdes.close().catch(() => undefined);
    await deleteSubjects(prefix);
  }
});

/** memory_embedded_texts_total of a stage process (texts its embedding model was given). */
const embeddedTexts = async (inst: Instance): Promise<number> => {
  const url = inst.startedFields?.metrics;
  assert.equal(typeof url, "string", `${inst.stage} says where its metrics are`);
  const body = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const line of body.split("\n"))
    if (line.startsWith("memory_embedded_texts_total")) n += Number(line.slice(line.lastIndexOf(" ") + 1));
  return n;
};

const TEXTS = [
  "I adopted a greyhound called Pepper last week.",
  "She sleeps on the sofa all afternoon.",
  "We walk along the canal every morning.",
];

test("turns are embedded once, by the sensory stage; a turn without a vector is still embedded and indexed", {
  skip,
  timeout: 300_000,
}, async () => {
  const run = await openNeo4jPipelineRun("turn-vectors");
  const { prefix, tenant, env, config, kafka, serdes, producer, stores, embedder } = run;
  const stages = (["sensory", "segmenter", "indexer"] as const).map((s) => startInstance(s, "0", env));
  const [sensory, segmenter, indexer] = stages as [Instance, Instance, Instance];
  const key = keyOf(tenant, "c1");
  try {
    const topics = await ensurePipelineTopics(kafka, config);
    const codecs = await openPipelineCodecs(serdes, topics);
    await waitStarted(stages);
    await producer.connect();
    const drained = () =>
      waitGroupsDrained(
        kafka,
        [
          { groupId: `${prefix}memory-sensory`, topic: topics.turns },
          { groupId: `${prefix}memory-segmenter`, topic: topics.sensory },
          { groupId: `${prefix}memory-indexer-raw-turns`, topic: topics.sensory },
        ],
        180_000,
      );

    // 1. Through the sensory stage: each turn's vector travels with it.
    const turns: Turn[] = TEXTS.map((text, i) => ({
      ...turnOf({ turnId: `t${i + 1}`, text }),
      tenant,
      conversation: "c1",
    }));
    await producer.send({
      topic: topics.turns,
      messages: await Promise.all(turns.map(async (t) => ({ key, value: await codecs.turns.encode(t) }))),
    });
    await drained();
    const sent = new Map<string, SensoryEvent>();
    for (const m of await readAll(kafka, topics.sensory)) {
      const d = await codecs.sensory.decode(m.value);
      if (d.ok) sent.set(d.value.turnId, d.value);
    }
    assert.equal(sent.size, turns.length);
    const own = await embedder.embed(turns.map(rawTurnText));
    turns.forEach((t, i) => {
      const e = sent.get(t.turnId)?.embedding;
      assert.equal(e?.model, embedder.id, "named by its model");
      assert.equal(e?.vector.length, embedder.dimension);
      const dot = (e?.vector ?? []).reduce((s, x, j) => s + x * ((own[i] as Float32Array)[j] ?? 0), 0);
      assert.ok(dot > 0.999, `the vector of "speaker: text" (cosine ${dot})`);
    });
    assert.equal(await embeddedTexts(sensory), turns.length, "the sensory stage embedded each turn");
    assert.equal(await embeddedTexts(segmenter), 0, "the segmenter embedded none");
    assert.equal(await embeddedTexts(indexer), 0, "the indexer's raw-turn consumer embedded none");
    const ids = turns.map((t) => turnRowId("c1", t.turnId));
    const stored = new Map((await stores.vectors.get(tenant, ids)).map((v) => [v.id, Array.from(v.vector)]));
    turns.forEach((t, i) => {
      assert.deepEqual(stored.get(ids[i] as string), sent.get(t.turnId)?.embedding?.vector, "stored as sent");
    });
    assert.equal((await stores.graph.getTurns(tenant, turns)).length, turns.length, "rows written");

    // 2. Straight onto the sensory topic: one turn without a vector (an older sensory stage), one
    // with another model's. Both consumers embed them, and the turns are indexed as before.
    const late = [
      { ...turnOf({ turnId: "t4", text: "My sister started a new job at the hospital." }), tenant, conversation: "c1" },
      {
        ...turnOf({ turnId: "t5", text: "She works night shifts in the emergency ward." }),
        tenant,
        conversation: "c1",
      },
    ];
    const foreign = Array.from({ length: embedder.dimension }, (_, j) => (j === 0 ? 1 : 0));
    const events: SensoryEvent[] = [
      { ...(late[0] as Turn), compressed: "sister new job hospital", keptRatio: 0.6 },
      {
        ...(late[1] as Turn),
        compressed: "night shifts emergency ward",
        keptRatio: 0.6,
        embedding: { model: "onnx:another-model:fp32", vector: foreign },
      },
    ];
    await producer.send({
      topic: topics.sensory,
      messages: await Promise.all(events.map(async (e) => ({ key, value: await codecs.sensory.encode(e) }))),
    });
    await drained();
    assert.equal(await embeddedTexts(indexer), 2, "the raw-turn consumer embedded the two turns");
    assert.equal(await embeddedTexts(segmenter), 2, "and so did the segmenter");
    assert.equal(await embeddedTexts(sensory), turns.length, "the sensory stage saw neither");
    const lateIds = late.map((t) => turnRowId("c1", t.turnId));
    const lateVectors = new Map((await stores.vectors.get(tenant, lateIds)).map((v) => [v.id, v.vector]));
    const expected = await embedder.embed(late.map(rawTurnText));
    lateIds.forEach((id, i) => {
      const v = lateVectors.get(id);
      assert.ok(v, `${id} has its vector`);
      const dot = v.reduce((s, x, j) => s + x * ((expected[i] as Float32Array)[j] ?? 0), 0);
      assert.ok(dot > 0.999, `${id}: the model's vector, not the foreign one (cosine ${dot})`);
    });
    assert.equal((await stores.graph.getTurns(tenant, late)).length, 2, "and its row");
  } catch (err) {
    for (const s of stages) process.stderr.write(`--- ${s.stage} log\n${s.log.slice(-25).join("\n")}\n`);
    throw err;
  } finally {
    for (const s of stages) await stopInstance(s, "SIGTERM").catch(() => undefined);
    await run.close();
  }
});
