// One trace per turn across the Kafka pipeline (issue 16 part 4, docs/tracing.md), on real Kafka and
// the schema registry: tracing on with an in-memory exporter; the four stages run in this process
// (StageRuntime with the real handlers, stores and embedder from the composition root, so their
// calls are traced too); one conversation's turns are produced through the gateway's
// KafkaTurnWriter and flushed. Then, for every turn: the gateway's produce span → sensory → the
// segmenter in that turn's trace; the segment that holds the turn carries a context that is the
// turn's segmenter span or an emit span linked to it; the encoder and the indexer continue that
// context, and the indexer's store calls nest under it. Every exported span's parent resolves.
// Skips unless KAFKA_BROKERS and SCHEMA_REGISTRY_URL are set.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { trace } from "@opentelemetry/api";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace";
import { stageEmbedder } from "../../../services/composition/parts.ts";
import { openSqliteStores } from "../../../services/composition/stores.ts";
import { HashingEmbedder } from "../../../services/core/adapters/hash/embedder.ts";
import { ensureTopics } from "../../../services/core/adapters/kafka/admin.ts";
import { ensurePipelineTopics, kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import {
  openPipelineCodecs,
  RegistrySerdes,
  SCHEMA_FILES,
  StageStateEnvelopeSchema,
} from "../../../services/core/adapters/kafka/serde.ts";
import { StageRuntime } from "../../../services/core/adapters/kafka/stage-runtime.ts";
import { contextFromHeaders } from "../../../services/core/adapters/kafka/stage-tracing.ts";
import type { Segment } from "../../../services/core/types.ts";
import { ExtractiveEncoder } from "../../../services/encoder/encode-segment.ts";
import { encoderStage } from "../../../services/encoder/kafka-handler.ts";
import { KafkaTurnWriter } from "../../../services/gateway/kafka-turn-writer.ts";
import { indexerStage } from "../../../services/indexer/kafka-handler.ts";
import { setupTracing } from "../../../services/platform/tracing.ts";
import { DEFAULT_GATE } from "../../../services/segmenter/gate.ts";
import { segmenterStage } from "../../../services/segmenter/kafka-handler.ts";
import type { SegmenterConfig } from "../../../services/segmenter/segment-state.ts";
import { sensoryStage } from "../../../services/sensory/kafka-handler.ts";
import { StatisticalCompressor } from "../../../services/sensory/statistical-compressor.ts";
import { collect, deleteSubjects, deleteTopics, runPrefix, skip, testConfig, until } from "./helpers.ts";

const TENANT = "trace-acme";
const CONVERSATION = "c1";
/** Two topics, so the gate is likely to close a segment on a turn (an emit span) as well as on the flush. */
const TURNS = [
  "Hi Ben! I adopted a dog called Pepper on Saturday.",
  "Pepper is a two-year-old beagle from the shelter in Portland.",
  "We walk Pepper every morning before work.",
  "By the way, I start my new job at Acme Robotics on Monday.",
  "The Acme Robotics office is in Seattle, so I will move there in June.",
];
const SEG_CFG: SegmenterConfig = { gate: DEFAULT_GATE, bufferTokens: 0, idleTimeoutMs: 3_600_000 };

const spanIdOf = (s: ReadableSpan): string => s.spanContext().spanId;
const parentOf = (s: ReadableSpan): string | undefined => s.parentSpanContext?.spanId;

test("one ingested turn yields one connected trace: gateway → sensory → segmenter → encoder → indexer", {
  skip,
  timeout: 180_000,
}, async (t) => {
  const exporter = new InMemorySpanExporter();
  const tracing = await setupTracing("embedded", { exporter });
  assert.ok(tracing, "tracing on");
  const prefix = runPrefix("trace");
  const dataDir = mkdtempSync(join(tmpdir(), "memory-trace-"));
  const config = testConfig(prefix, { MEMORY_KAFKA_PARTITIONS: "1", MEMORY_DATA_DIR: dataDir });
  const kafka = kafkaClient(config, "trace-test");
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const admin = kafka.admin();
  // From the composition root: traced stores and embedder (tracing is on already).
  const stores = openSqliteStores(config);
  const embedder = stageEmbedder(new HashingEmbedder());
  const runtimes: StageRuntime<never, unknown, unknown>[] = [];
  const collectors: Awaited<ReturnType<typeof collect>>[] = [];
  let writer: KafkaTurnWriter | undefined;
  /** Inputs each stage has committed (a chunk read again after a rebalance counts once). */
  const committed = new Map<string, number>();
  try {
    const topics = await ensurePipelineTopics(kafka, config);
    const codecs = await openPipelineCodecs(serdes, topics);
    await admin.connect();
    await ensureTopics(
      admin,
      ["segmenter", "encoder"].map((s) => ({ topic: topics.state(s), partitions: 1, compacted: true })),
      config.kafka.replicationFactor,
    );
    const stateCodec = (stage: string) =>
      serdes.codec(topics.state(stage), SCHEMA_FILES.state, StageStateEnvelopeSchema);
    const common = (stage: string) => ({
      kafka,
      admin,
      groupId: `${prefix}memory-${stage}`,
      transactionalIdPrefix: `${prefix}${stage}`,
      dlq: codecs.dlq,
      sessionTimeoutMs: config.kafka.sessionTimeoutMs,
      observer: {
        committed: (c: { inputs: number }) => committed.set(stage, (committed.get(stage) ?? 0) + c.inputs),
      },
    });
    const built = [
      new StageRuntime(
        sensoryStage({
          input: codecs.turns,
          output: codecs.sensory,
          compressor: new StatisticalCompressor(),
          keepRate: 0.7,
        }),
        common("sensory"),
      ),
      new StageRuntime(
        segmenterStage({
          input: codecs.sensory,
          output: codecs.segments,
          stateCodec: await stateCodec("segmenter"),
          embedder,
          cfg: SEG_CFG,
        }),
        { ...common("segmenter"), changelogTopic: topics.state("segmenter") },
      ),
      new StageRuntime(
        encoderStage({
          input: codecs.segments,
          output: codecs.records,
          stateCodec: await stateCodec("encoder"),
          encoder: new ExtractiveEncoder(),
        }),
        { ...common("encoder"), changelogTopic: topics.state("encoder") },
      ),
      new StageRuntime(
        indexerStage({
          input: codecs.records,
          output: codecs.updateQueue,
          graph: stores.graph,
          vectors: stores.vectors,
          embedder,
        }),
        common("indexer"),
      ),
    ];
    runtimes.push(...(built as unknown as StageRuntime<never, unknown, unknown>[]));
    await Promise.all(runtimes.map((r) => r.start()));

    // --- The gateway's side: one produce call per turn, then the flush that closes the last segment.
    writer = await KafkaTurnWriter.open({ config, kafka });
    const turnIds: string[] = [];
    for (const [i, text] of TURNS.entries()) {
      const turnId = `t${i + 1}`;
      await writer.ingest(TENANT, CONVERSATION, [
        { turnId, speaker: "Ana", role: "user", text, timestamp: `2024-05-0${i + 1}T10:00:00.000Z`, sessionId: "s1" },
      ]);
      turnIds.push(turnId);
    }
    await writer.flush(TENANT, CONVERSATION);

    // --- Wait until every turn's segment went through the indexer (its handling span has ended).
    const segmentsOut = await collect(kafka, topics.segments);
    collectors.push(segmentsOut);
    type Collected = (typeof segmentsOut.messages)[number];
    const segments = async (): Promise<{ segment: Segment; message: Collected }[]> => {
      const out: { segment: Segment; message: Collected }[] = [];
      for (const m of segmentsOut.messages.filter((x) => x.value !== null)) {
        const d = await codecs.segments.decode(m.value);
        assert.ok(d.ok, d.ok ? "" : d.reason);
        out.push({ segment: d.value, message: m });
      }
      return out;
    };
    const handled = (stage: string) =>
      exporter
        .getFinishedSpans()
        .filter((s) => s.name === `${stage} handle` && s.attributes["memory.input"] === "event");
    await until(
      "every turn in a segment",
      () =>
        segmentsOut.messages.filter((m) => m.value !== null).length > 0 && handled("segmenter").length >= TURNS.length,
      120_000,
    );
    let segs = await segments();
    const deadline = Date.now() + 120_000;
    while (
      (segs.flatMap((s) => s.segment.turns).length < TURNS.length || (committed.get("indexer") ?? 0) < segs.length) &&
      Date.now() < deadline
    ) {
      await new Promise((r) => setTimeout(r, 200));
      segs = await segments();
    }
    assert.deepEqual(segs.flatMap((s) => s.segment.turns.map((t) => t.turnId)).sort(), [...turnIds].sort());
    assert.equal(committed.get("indexer"), segs.length, "the indexer committed every segment's records");

    // Every span ended: the runtimes finish their chunks, then the exporter has them all.
    await Promise.all(runtimes.map((r) => r.stop()));
    await tracing.flush();
    const spans = exporter.getFinishedSpans();
    const byId = new Map(spans.map((s) => [spanIdOf(s), s]));
    /**
     * The `name` spans under any of the parents. An input is handled more than once when its chunk
     * was abandoned uncommitted (a rebalance: the group evicts a member on a loaded machine) and
     * read again; each attempt has its span, and the committed output names the one that counted.
     */
    const childrenOf = (parents: readonly ReadableSpan[], name: string): ReadableSpan[] => {
      const ids = new Set(parents.map(spanIdOf));
      const found = spans.filter((s) => s.name === name && ids.has(parentOf(s) ?? ""));
      assert.ok(found.length > 0, `a "${name}" span under ${parents.map((p) => p.name).join(" / ")}`);
      return found;
    };

    // Parents resolve: every span that names a parent names one that was exported.
    for (const s of spans) {
      const p = parentOf(s);
      if (p !== undefined) assert.ok(byId.has(p), `the parent of "${s.name}" is among the exported spans`);
    }

    const produces = spans.filter((s) => s.name === "gateway produce");
    assert.equal(produces.length, TURNS.length, "one produce span per ingest call");
    let emitted = 0;
    for (const [i, produce] of produces.entries()) {
      const turnId = turnIds[i] as string;
      const traceId = produce.spanContext().traceId;
      assert.equal(produce.attributes["memory.tenant"], TENANT);
      // gateway → sensory → segmenter: one trace, parent by parent.
      const sensory = childrenOf([produce], "sensory handle");
      const segmenter = childrenOf(sensory, "segmenter handle");
      for (const s of [...sensory, ...segmenter]) {
        assert.equal(s.spanContext().traceId, traceId, `${s.name} in ${turnId}'s trace`);
        assert.equal(s.attributes["memory.stage"], s.name.split(" ")[0]);
      }

      // The segment holding the turn carries the turn's segmenter span, or an emit span linked to it.
      const holder = segs.find((s) => s.segment.turns.some((t) => t.turnId === turnId));
      assert.ok(holder, `a segment holds ${turnId}`);
      const carried = trace.getSpanContext(contextFromHeaders(holder.message.message.headers));
      assert.ok(carried, `the segment of ${turnId} carries a trace context`);
      const segmentSpan = byId.get(carried.spanId);
      assert.ok(segmentSpan, "the segment's span was exported");
      const segmenterIds = new Set(segmenter.map(spanIdOf));
      if (segmentSpan.name === "segmenter emit") {
        emitted++;
        assert.equal(parentOf(segmentSpan), undefined, "the segment's span starts its own trace");
        assert.ok(
          segmentSpan.links.some((l) => segmenterIds.has(l.context.spanId)),
          `the segment's emit span links ${turnId}'s segmenter span`,
        );
      } else assert.ok(segmenterIds.has(spanIdOf(segmentSpan)), "a one-turn segment carries the turn's span");

      // encoder → indexer continue the segment's context; the indexer's store calls nest under it.
      const encoder = childrenOf([segmentSpan], "encoder handle");
      const indexer = childrenOf(encoder, "indexer handle");
      for (const s of [...encoder, ...indexer]) assert.equal(s.spanContext().traceId, carried.traceId);
      const indexerIds = new Set(indexer.map(spanIdOf));
      const storeCalls = spans.filter(
        (s) => indexerIds.has(parentOf(s) ?? "") && s.attributes["memory.port"] !== undefined,
      );
      assert.ok(
        storeCalls.some((s) => s.name.startsWith("graph.")) && storeCalls.some((s) => s.name.startsWith("vectors.")),
        `the indexer's graph and vector calls are its children (${storeCalls.map((s) => s.name).join(", ")})`,
      );
    }
    const counts = new Map<string, number>();
    for (const s of spans) counts.set(s.name, (counts.get(s.name) ?? 0) + 1);
    t.diagnostic(
      `${segs.length} segments, ${emitted} of ${TURNS.length} turns reached theirs through an emit span's link`,
    );
    t.diagnostic(`spans: ${[...counts].map(([n, c]) => `${n} ${c}`).join(", ")}`);
    assert.ok(emitted > 0, "at least one segment aggregated several turns (an emit span with links)");
    assert.equal(tracing.service, "memory-embedded");
  } finally {
    await Promise.allSettled(runtimes.map((r) => r.stop()));
    await Promise.allSettled(collectors.map((c) => c.consumer.disconnect()));
    await writer?.close().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
    await serdes.close().catch(() => undefined);
    await stores.close().catch(() => undefined);
    await tracing.shutdown();
    await deleteTopics(kafka, prefix);
    await deleteSubjects(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  }
});
