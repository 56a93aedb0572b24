// Kafka value fuzz (issue 11), real Kafka + schema registry: every consuming stage of the
// distributed pipeline (sensory, segmenter, encoder, indexer) runs in this process on a run-unique
// topic prefix, and each stage's input topic gets ~20 generated bad values (seeded) followed by one
// good value:
//   - must reach the DLQ (memory.dlq.v1) with the stage, the original bytes (their head and hash
//     past DLQ_PAYLOAD_MAX_BYTES) and a reason naming the
//     problem: truncated Avro, a wrong magic byte, a schema id the registry does not have, a value
//     written with another subject's schema, an Avro-valid value that fails validation (incl. a
//     1,000,000-character text where the schema caps text at 100,000), an empty value, an unknown
//     control header, a key that does not match its value;
//   - may be processed or dead-lettered, but must not block the partition: control characters, a
//     ~100 KB text of words, a 100,000-character unbroken run and a CJK run (see PATHOLOGICAL);
//   - the good value after them is processed (the partition is unblocked): its output appears
//     downstream (sensory, segmenter, encoder) or its record is in the store (indexer).
// The indexer writes to SQLite + HNSW in a temporary folder; embeddings are the hashing embedder's.
// Skips unless KAFKA_BROKERS and SCHEMA_REGISTRY_URL are set.
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import type { Message } from "kafkajs";
import { z } from "zod";
import { HashingEmbedder } from "../../../services/core/adapters/hash/embedder.ts";
import { HnswVectorStore } from "../../../services/core/adapters/hnsw/vector-store.ts";
import { ensureTopics } from "../../../services/core/adapters/kafka/admin.ts";
import { ensurePipelineTopics, kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import {
  DLQ_PAYLOAD_MAX_BYTES,
  type DlqEntry,
  openPipelineCodecs,
  RegistrySerdes,
  SCHEMA_FILES,
  StageStateEnvelopeSchema,
} from "../../../services/core/adapters/kafka/serde.ts";
import { StageRuntime } from "../../../services/core/adapters/kafka/stage-runtime.ts";
import { CONTROL_HEADER } from "../../../services/core/adapters/kafka/topics.ts";
import { SqliteGraphStore } from "../../../services/core/adapters/sqlite/graph-store.ts";
import { openSqlite } from "../../../services/core/adapters/sqlite-db.ts";
import { CachingEmbedder } from "../../../services/core/caching-embedder.ts";
import { turnEmbeddingText } from "../../../services/core/turn-text.ts";
import { keyOf, type RecordsEvent, type Segment, type SensoryTurn, type Turn } from "../../../services/core/types.ts";
import { ExtractiveEncoder } from "../../../services/encoder/encode-segment.ts";
import { emptyContext } from "../../../services/encoder/extractor.ts";
import { encoderStage } from "../../../services/encoder/kafka-handler.ts";
import { indexerStage } from "../../../services/indexer/kafka-handler.ts";
import { DEFAULT_GATE } from "../../../services/segmenter/gate.ts";
import { segmenterStage } from "../../../services/segmenter/kafka-handler.ts";
import {
  initialSegmenterState,
  type SegmenterConfig,
  segmenterStep,
} from "../../../services/segmenter/segment-state.ts";
import { compressTurn } from "../../../services/sensory/compress-turn.ts";
import { sensoryStage } from "../../../services/sensory/kafka-handler.ts";
import { StatisticalCompressor } from "../../../services/sensory/statistical-compressor.ts";
import { collect, deleteSubjects, deleteTopics, runPrefix, skip, testConfig } from "./helpers.ts";

const SEED = 11_2028;
const PER_STAGE = 20;
const SEG_CFG: SegmenterConfig = { gate: DEFAULT_GATE, bufferTokens: 0, idleTimeoutMs: 3_600_000 };
/** How long the whole pipeline may take to get through every fuzzed partition (a loaded 2-core machine). */
const FLOW_MS = 240_000;

/**
 * Valid texts that must not block a partition, the long unbroken runs included (the token counter
 * is linear on them: services/core/tokens.ts).
 */
const PATHOLOGICAL: readonly (readonly [string, string])[] = [
  ["control characters", "Ana\u0000 said\u0007 hi\u001b[31m to\u0008 Ben\u007f."],
  ["a long text of words", "Ana walked the dog in the park. ".repeat(3000)],
  ["100,000-char unbroken run", "x".repeat(100_000)],
  ["30,000-char CJK run", "汉字".repeat(15_000)],
];

type StageName = "sensory" | "segmenter" | "encoder" | "indexer";
const STAGES: StageName[] = ["sensory", "segmenter", "encoder", "indexer"];

/** A generated input of a stage: the Kafka message, and what must become of it. */
interface FuzzValue {
  label: string;
  message: Message;
  /** dlq: must be dead-lettered with a reason matching `reason`; tolerated: processed or dead-lettered. */
  expect: { kind: "dlq"; reason: RegExp } | { kind: "tolerated" };
}

// ---------------------------------------------------------------------------------------------------
// Good values of every topic, made by the same pure logic the stages run.

const RUN = randomUUID().slice(0, 8);
const TENANT = `fz-${RUN}`;

const turnOf = (conversation: string, turnId: string, text: string): Turn => ({
  tenant: TENANT,
  conversation,
  turnId,
  speaker: "Ana",
  role: "user",
  text,
  timestamp: "2024-05-06T10:15:00.000Z",
  sessionId: "s1",
});

const embedder = new HashingEmbedder();
const compressor = new StatisticalCompressor();

const sensoryOf = (t: Turn): Promise<SensoryTurn> => compressTurn(t, compressor, 0.7);

const segmentOf = async (turns: Turn[]): Promise<Segment> => {
  const first = turns[0] as Turn;
  let state = initialSegmenterState(first.tenant, first.conversation);
  const out: Segment[] = [];
  for (const t of turns) {
    const s = await sensoryOf(t);
    const r = segmenterStep(
      state,
      { kind: "turn", turn: s, embedding: embedder.embedOne(turnEmbeddingText(s.speaker, s.text)), nowMs: 0 },
      SEG_CFG,
    );
    state = r.state;
    out.push(...r.segments);
  }
  out.push(...segmenterStep(state, { kind: "flush", reason: "flush", nowMs: 0 }, SEG_CFG).segments);
  assert.equal(out.length, 1, "one segment");
  return out[0] as Segment;
};

const recordsEventOf = async (segment: Segment): Promise<RecordsEvent> => {
  const r = await new ExtractiveEncoder().encode(segment, emptyContext());
  assert.ok(r.records.length > 0, "the good segment yields records");
  return {
    tenant: segment.tenant,
    conversation: segment.conversation,
    segment,
    records: r.records,
    context: r.context,
  };
};

// ---------------------------------------------------------------------------------------------------

test("generated bad values on every stage's input go to the DLQ with a reason; the partition stays unblocked", {
  skip,
  timeout: 420_000,
}, async () => {
  const prefix = runPrefix("fuzz");
  const config = testConfig(prefix, { MEMORY_KAFKA_PARTITIONS: "1" });
  const kafka = kafkaClient(config, "fuzz-values-test");
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const admin = kafka.admin();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  const dataDir = mkdtempSync(join(tmpdir(), "memory-fuzz-values-"));
  const db = openSqlite(dataDir);
  const graph = new SqliteGraphStore(db);
  const vectors = new HnswVectorStore(db, dataDir);
  const runtimes: { start(): Promise<void>; stop(): Promise<void> }[] = [];
  const collectors: Awaited<ReturnType<typeof collect>>[] = [];
  try {
    const topics = await ensurePipelineTopics(kafka, config);
    const codecs = await openPipelineCodecs(serdes, topics);
    await admin.connect();
    const changelog = (stage: string) => topics.state(stage);
    await ensureTopics(
      admin,
      ["segmenter", "encoder"].map((s) => ({ topic: changelog(s), partitions: 1, compacted: true })),
      config.kafka.replicationFactor,
    );
    const stateCodec = (stage: string) => serdes.codec(changelog(stage), SCHEMA_FILES.state, StageStateEnvelopeSchema);
    const input: Record<StageName, string> = {
      sensory: topics.turns,
      segmenter: topics.sensory,
      encoder: topics.segments,
      indexer: topics.records,
    };

    // Raw codecs: the topics' Avro schemas without the zod validation, to write Avro-valid values
    // that the stage must refuse.
    const raw = {
      turns: await serdes.codec(topics.turns, SCHEMA_FILES.turns, z.unknown()),
      sensory: await serdes.codec(topics.sensory, SCHEMA_FILES.sensory, z.unknown()),
      segments: await serdes.codec(topics.segments, SCHEMA_FILES.segments, z.unknown()),
      records: await serdes.codec(topics.records, SCHEMA_FILES.records, z.unknown()),
    };
    const rawOf: Record<StageName, (typeof raw)["turns"]> = {
      sensory: raw.turns,
      segmenter: raw.sensory,
      encoder: raw.segments,
      indexer: raw.records,
    };

    // --- Good values (the last message of each stage's input) ---
    const goodTurn = turnOf("sensory-good", "good-sensory", "Hi Ben! I adopted a dog called Pepper on Saturday.");
    const goodSensory = await sensoryOf(
      turnOf("segmenter-good", "good-segmenter", "Ben moved to Lisbon in March and works at a bakery."),
    );
    const goodSegment = await segmentOf([
      turnOf("encoder-good", "good-encoder", "Caroline started learning the violin last week."),
    ]);
    const goodEvent = await recordsEventOf(
      await segmentOf([turnOf("indexer-good", "good-indexer", "Melanie ran a marathon in Berlin in 2023.")]),
    );
    const goodOf: Record<StageName, { key: string; value: unknown }> = {
      sensory: { key: keyOf(TENANT, "sensory-good"), value: goodTurn },
      segmenter: { key: keyOf(TENANT, "segmenter-good"), value: goodSensory },
      encoder: { key: keyOf(TENANT, "encoder-good"), value: goodSegment },
      indexer: { key: keyOf(TENANT, "indexer-good"), value: goodEvent },
    };
    const encodeGood = (stage: StageName, value: unknown): Promise<Buffer> => rawOf[stage].encode(value);

    /** The stage's good value with `patch` applied (a function of a deep copy). */
    const variant = (stage: StageName, patch: (v: Record<string, unknown>) => void): Record<string, unknown> => {
      const v = structuredClone(goodOf[stage].value) as Record<string, unknown>;
      patch(v);
      return v;
    };
    /** Sets a text field of the stage's value: the turn's text, or the first segment turn's text. */
    const withText = (stage: StageName, text: string) =>
      variant(stage, (v) => {
        if (stage === "sensory") v.text = text;
        else if (stage === "segmenter") {
          v.text = text;
          v.compressed = text;
        } else {
          const seg = (stage === "encoder" ? v : v.segment) as { turns: { text: string; compressed: string }[] };
          (seg.turns[0] as { text: string }).text = text;
          (seg.turns[0] as { compressed: string }).compressed = text;
        }
      });
    /** The stage's good value with the field at `path` (dotted, array indexes as numbers) set to `value`. */
    const setAt = (stage: StageName, path: string, value: unknown): Record<string, unknown> =>
      variant(stage, (v) => {
        const parts = path.split(".");
        let cur = v as Record<string, unknown>;
        for (const p of parts.slice(0, -1)) cur = cur[p] as Record<string, unknown>;
        cur[parts.at(-1) as string] = value;
      });
    /** Avro-valid values of the stage's schema that its zod schema refuses, with the field at fault. */
    const invalidValues = (stage: StageName): { label: string; value: Record<string, unknown>; field: RegExp }[] => {
      switch (stage) {
        case "sensory":
        case "segmenter":
          return [
            { label: "empty text", value: setAt(stage, "text", ""), field: /text/ },
            { label: "blank tenant", value: setAt(stage, "tenant", "  "), field: /tenant/ },
            { label: "timestamp garbage", value: setAt(stage, "timestamp", "garbage"), field: /timestamp/ },
            // Over the 100,000-character cap, and just under the broker's 1 MiB message limit.
            { label: "1,000,000-char text", value: setAt(stage, "text", "w".repeat(1_000_000)), field: /text/ },
            ...(stage === "segmenter"
              ? [{ label: "keptRatio 1.5", value: setAt(stage, "keptRatio", 1.5), field: /keptRatio/ }]
              : []),
          ];
        case "encoder":
          return [
            { label: "no turns", value: setAt(stage, "turns", []), field: /turns/ },
            { label: "start garbage", value: setAt(stage, "start", "garbage"), field: /start/ },
            { label: "negative tokens", value: setAt(stage, "tokens", -5), field: /tokens/ },
          ];
        case "indexer":
          return [
            { label: "segment without turns", value: setAt(stage, "segment.turns", []), field: /segment\.turns/ },
            { label: "record with empty text", value: setAt(stage, "records.0.text", ""), field: /records\.0\.text/ },
            {
              label: "record source without turn ids",
              value: setAt(stage, "records.0.source.turnIds", []),
              field: /records\.0\.source\.turnIds/,
            },
          ];
      }
    };

    /** A value of another subject's schema (valid there, wrong here): a dead letter, or a turn on a segment topic. */
    const otherSubject = async (stage: StageName): Promise<Buffer> => {
      if (stage === "sensory") return codecs.segments.encode(goodSegment);
      if (stage === "segmenter") return codecs.records.encode(goodEvent);
      if (stage === "encoder") return codecs.turns.encode(goodTurn);
      return codecs.turns.encode(goodTurn);
    };

    // --- Generated bad values, per stage ---
    const kinds = [
      "truncated",
      "magic",
      "unknown-id",
      "other-subject",
      "invalid",
      "empty",
      "control-header",
      "wrong-key",
      "garbage",
    ] as const;
    const plan = fc.sample(
      fc.array(fc.tuple(fc.constantFrom(...kinds), fc.nat(), fc.nat({ max: 255 })), {
        minLength: PER_STAGE - 3,
        maxLength: PER_STAGE - 3,
      }),
      { seed: SEED, numRuns: STAGES.length },
    );

    const valuesOf = async (stage: StageName, picks: [string, number, number][]): Promise<FuzzValue[]> => {
      const key = goodOf[stage].key;
      const good = await encodeGood(stage, goodOf[stage].value);
      const out: FuzzValue[] = [];
      for (const [kind, n, byte] of picks) {
        switch (kind) {
          case "truncated": {
            // Cut inside the Avro body (after the 5-byte header) or inside the header itself.
            const cut = n % (good.length - 1);
            out.push({
              label: `Avro truncated to ${cut} of ${good.length} bytes`,
              message: { key, value: good.subarray(0, cut) },
              expect: { kind: "dlq", reason: /^decode: / },
            });
            break;
          }
          case "magic": {
            const b = Buffer.from(good);
            b[0] = 1 + (byte % 255);
            out.push({
              label: `magic byte ${b[0]}`,
              message: { key, value: b },
              // Magic byte 1 is the Confluent GUID format: then the reason names the unknown guid.
              expect: { kind: "dlq", reason: /^decode: .*(magic|guid)/i },
            });
            break;
          }
          case "unknown-id": {
            const b = Buffer.from(good);
            const id = 900_000_000 + (n % 1_000_000);
            b.writeUInt32BE(id, 1);
            out.push({
              label: `schema id ${id} (not registered)`,
              message: { key, value: b },
              expect: { kind: "dlq", reason: /^decode: / },
            });
            break;
          }
          case "other-subject":
            out.push({
              label: "a value of another subject's schema",
              message: { key, value: await otherSubject(stage) },
              expect: { kind: "dlq", reason: /^validation: / },
            });
            break;
          case "invalid": {
            const options = invalidValues(stage);
            const pick = options[n % options.length] as (typeof options)[number];
            out.push({
              label: `Avro-valid, zod-invalid: ${pick.label}`,
              message: { key, value: await rawOf[stage].encode(pick.value) },
              expect: { kind: "dlq", reason: new RegExp(`^validation: .*${pick.field.source}`) },
            });
            break;
          }
          case "empty":
            out.push({
              label: n % 2 ? "empty value" : "null value without a control header",
              message: { key, value: n % 2 ? Buffer.alloc(0) : null },
              expect: { kind: "dlq", reason: /^decode: empty value/ },
            });
            break;
          case "control-header":
            out.push({
              label: "unknown control message",
              message: { key, value: null, headers: { [CONTROL_HEADER]: `bogus-${byte}` } },
              expect: { kind: "dlq", reason: /unknown control message/ },
            });
            break;
          case "wrong-key":
            // The indexer writes what the event names, whatever the key: there a wrong key is harmless.
            out.push({
              label: "valid value under a key that does not match it",
              message: { key: `${TENANT}/someone-else-${n % 10}`, value: good },
              expect:
                stage === "indexer"
                  ? { kind: "tolerated" }
                  : { kind: "dlq", reason: /^handler: key .* does not match/ },
            });
            break;
          default: {
            const bytes = Buffer.from(
              fc.sample(fc.uint8Array({ minLength: 1, maxLength: 64 }), { seed: SEED + n, numRuns: 1 })[0] ?? [0],
            );
            out.push({
              label: `random bytes ${bytes.toString("hex").slice(0, 24)}`,
              message: { key, value: bytes },
              expect: { kind: "dlq", reason: /^decode: / },
            });
          }
        }
      }
      // Always one value over the text cap, just under the broker's 1 MiB message limit: its dead
      // letter in full (base64, +33%) would be over it, and the chunk's transaction would be refused
      // for ever (found by this test); dead letters keep the value's head and its hash instead.
      if (stage === "sensory" || stage === "segmenter")
        out.push({
          label: "Avro-valid, zod-invalid: 1,000,000-char text (fixed case)",
          message: { key, value: await rawOf[stage].encode(setAt(stage, "text", "w".repeat(1_000_000))) },
          expect: { kind: "dlq", reason: /^validation: .*text/ },
        });
      // Pathological but valid texts: processed or dead-lettered, never a blocked partition.
      for (const [label, text] of PATHOLOGICAL)
        out.push({
          label,
          message: { key, value: await rawOf[stage].encode(withText(stage, text)) },
          expect: { kind: "tolerated" },
        });
      return out;
    };

    const fuzzed = {} as Record<StageName, FuzzValue[]>;
    for (const [i, stage] of STAGES.entries())
      fuzzed[stage] = await valuesOf(stage, plan[i] as [string, number, number][]);

    // --- The stages ---
    const common = (stage: string) => ({
      kafka,
      admin,
      groupId: `${prefix}memory-${stage}`,
      transactionalIdPrefix: `${prefix}${stage}`,
      dlq: codecs.dlq,
      maxChunk: 5,
      backoffMs: 50,
      sessionTimeoutMs: config.kafka.sessionTimeoutMs,
    });
    const caching = new CachingEmbedder(embedder);
    runtimes.push(
      new StageRuntime(
        sensoryStage({ input: codecs.turns, output: codecs.sensory, compressor, keepRate: 0.7 }),
        common("sensory"),
      ),
      new StageRuntime(
        segmenterStage({
          input: codecs.sensory,
          output: codecs.segments,
          stateCodec: await stateCodec("segmenter"),
          embedder: caching,
          cfg: SEG_CFG,
        }),
        { ...common("segmenter"), changelogTopic: changelog("segmenter") },
      ),
      new StageRuntime(
        encoderStage({
          input: codecs.segments,
          output: codecs.records,
          stateCodec: await stateCodec("encoder"),
          encoder: new ExtractiveEncoder(),
        }),
        { ...common("encoder"), changelogTopic: changelog("encoder") },
      ),
      new StageRuntime(
        indexerStage({ input: codecs.records, output: codecs.updateQueue, graph, vectors, embedder: caching }),
        common("indexer"),
      ),
    );
    await Promise.all(runtimes.map((r) => r.start()));

    // --- Produce: bad values, then the good one (the segmenter's needs a flush to close its segment) ---
    await producer.connect();
    const offsets = new Map<StageName, string[]>();
    for (const stage of STAGES) {
      const list: string[] = [];
      for (const v of fuzzed[stage]) {
        // One message per request: a 1 MB value must not share a request with others.
        const [meta] = await producer.send({ topic: input[stage], messages: [v.message] });
        list.push(String(meta?.baseOffset));
      }
      offsets.set(stage, list);
      const good = goodOf[stage];
      await producer.send({
        topic: input[stage],
        messages: [
          { key: good.key, value: await encodeGood(stage, good.value) },
          ...(stage === "segmenter" ? [{ key: good.key, value: null, headers: { [CONTROL_HEADER]: "flush" } }] : []),
        ],
      });
    }

    // --- Observe ---
    const dlq = await collect(kafka, topics.dlq);
    const sensoryOut = await collect(kafka, topics.sensory);
    const segmentsOut = await collect(kafka, topics.segments);
    const recordsOut = await collect(kafka, topics.records);
    collectors.push(dlq, sensoryOut, segmentsOut, recordsOut);

    const decodeAll = async <T>(
      msgs: { value: Buffer | null }[],
      decode: (b: Buffer | null) => Promise<{ ok: boolean; value?: T }>,
    ) =>
      (await Promise.all(msgs.filter((m) => m.value !== null).map((m) => decode(m.value)))).flatMap((d) =>
        d.ok ? [d.value as T] : [],
      );
    const goodSeen = async (): Promise<Record<StageName, boolean>> => ({
      sensory: (await decodeAll(sensoryOut.messages, (b) => codecs.sensory.decode(b))).some(
        (t) => t.turnId === "good-sensory",
      ),
      segmenter: (await decodeAll(segmentsOut.messages, (b) => codecs.segments.decode(b))).some((s) =>
        s.turns.some((t) => t.turnId === "good-segmenter"),
      ),
      encoder: (await decodeAll(recordsOut.messages, (b) => codecs.records.decode(b))).some(
        (e) => e.segment.id === goodSegment.id,
      ),
      indexer: (await graph.getRecords(TENANT, [(goodEvent.records[0] as { id: string }).id])).length === 1,
    });

    /** What is still wrong: good values not through, bad values not (properly) dead-lettered. */
    const problemsNow = async (): Promise<string[]> => {
      const seen = await goodSeen();
      const letters: DlqEntry[] = [];
      for (const m of dlq.messages) {
        const d = await codecs.dlq.decode(m.value);
        if (!d.ok) return [`a dead letter that does not decode: ${d.reason}`];
        letters.push(d.value);
      }
      const problems: string[] = [];
      for (const stage of STAGES) {
        if (!seen[stage])
          problems.push(`${stage}: the good value after the fuzzed ones was not processed (partition blocked?)`);
        const mine = letters.filter((l) => l.stage === stage && l.sourceTopic === input[stage]);
        fuzzed[stage].forEach((v, i) => {
          const offset = offsets.get(stage)?.[i];
          const letter = mine.find((l) => l.sourceOffset === offset);
          if (v.expect.kind === "tolerated") {
            if (letter && letter.error.trim() === "")
              problems.push(`${stage} [${v.label}]: dead-lettered without a reason`);
            return;
          }
          if (!letter) {
            problems.push(`${stage} [${v.label}] @${offset}: not in the DLQ`);
            return;
          }
          if (!v.expect.reason.test(letter.error))
            problems.push(
              `${stage} [${v.label}] @${offset}: reason ${JSON.stringify(letter.error.slice(0, 200))} does not match ${v.expect.reason}`,
            );
          const sent = v.message.value;
          const original = sent === null || sent === undefined ? Buffer.alloc(0) : Buffer.from(sent as Buffer);
          // A dead letter keeps at most DLQ_PAYLOAD_MAX_BYTES of the value (its head) and names the
          // rest by length and sha256, so that it stays under the broker's message limit.
          const kept = original.length > DLQ_PAYLOAD_MAX_BYTES ? original.subarray(0, DLQ_PAYLOAD_MAX_BYTES) : original;
          if (!Buffer.from(letter.payload, "base64").equals(kept))
            problems.push(
              `${stage} [${v.label}] @${offset}: the DLQ payload is not the original bytes (or their head)`,
            );
          if (
            original.length > DLQ_PAYLOAD_MAX_BYTES &&
            !letter.error.includes(createHash("sha256").update(original).digest("hex"))
          )
            problems.push(`${stage} [${v.label}] @${offset}: a truncated payload's reason lacks the value's sha256`);
        });
      }
      return problems;
    };

    // Polled (bounded) until everything is through: the stages work asynchronously.
    const deadline = Date.now() + FLOW_MS;
    let problems = await problemsNow();
    while (problems.length > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1000));
      problems = await problemsNow();
    }
    assert.deepEqual(problems, [], `after ${FLOW_MS} ms:\n${problems.join("\n")}`);
  } finally {
    await Promise.allSettled(runtimes.map((r) => r.stop()));
    await Promise.allSettled(collectors.map((c) => c.consumer.disconnect()));
    await producer.disconnect().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
    await serdes.close().catch(() => undefined);
    await vectors.close().catch(() => undefined);
    await graph.close().catch(() => undefined);
    db.close();
    rmSync(dataDir, { recursive: true, force: true });
    await deleteTopics(kafka, prefix);
    await deleteSubjects(prefix);
  }
});
