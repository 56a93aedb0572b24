/**
 * Restore time of one segmenter changelog partition (issue 12), against the broker and registry of
 * infra/ (`eval "$(bash infra/env.sh)"`), with its own topic prefix; deletes its topics after.
 *
 *   node --import tsx scripts/bench-segmenter-restore.ts [conversations=100] [openTurns=10] [repeats=3]
 *
 * Writes the changelog a segmenter partition would hold for N conversations with K open turns
 * each (one entry per key per turn: the history before compaction; or only the last entry per
 * key: what compaction leaves), in state format 1 (every turn's embedding) and format 2 (the gate
 * summary), then times a StageRuntime's restore of the partition ("state restored" ms: includes
 * the restore consumer's group join, measured alone by the 1-entry baseline). That figure also
 * includes the reader's disconnect, which waits for the reader's in-flight fetch, a long poll of
 * up to 5 s (kafkajs maxWaitTimeInMs): in about half the runs, whatever the size, ~5 s are added
 * after the last entry was read. The minimum over the repeats is the read itself.
 */
import { randomUUID } from "node:crypto";
import type { Message } from "kafkajs";
import { HashingEmbedder } from "../services/core/adapters/hash/embedder.ts";
import { ensureTopics } from "../services/core/adapters/kafka/admin.ts";
import { ensurePipelineTopics, kafkaClient } from "../services/core/adapters/kafka/process.ts";
import {
  openPipelineCodecs,
  RegistrySerdes,
  SCHEMA_FILES,
  StageStateEnvelopeSchema,
} from "../services/core/adapters/kafka/serde.ts";
import { type StageHandler, StageRuntime } from "../services/core/adapters/kafka/stage-runtime.ts";
import { loadConfig } from "../services/core/config.ts";
import { keyOf, type Segment, type SensoryTurn } from "../services/core/types.ts";
import { DEFAULT_GATE } from "../services/segmenter/gate.ts";
import { segmenterStage } from "../services/segmenter/kafka-handler.ts";
import {
  defaultSegmenterConfig,
  initialSegmenterState,
  type SegmenterState,
  segmenterStep,
} from "../services/segmenter/segment-state.ts";

const N = Number(process.argv[2] ?? 100);
const K = Number(process.argv[3] ?? 10);
const REPEATS = Number(process.argv[4] ?? 3);
const prefix = `t-restore-bench-${randomUUID().slice(0, 8)}.`;
const config = loadConfig(
  {},
  { ...process.env, MEMORY_CONFIG: "", MEMORY_TOPIC_PREFIX: prefix, MEMORY_KAFKA_PARTITIONS: "1" },
);
const kafka = kafkaClient(config, "restore-bench");
const serdes = new RegistrySerdes(config.kafka.registryUrl);
// No idle flush: the restoring runtimes must not write to the changelog they are timed on.
const cfg = defaultSegmenterConfig({
  idleTimeoutMs: Number.MAX_SAFE_INTEGER,
  gate: { ...DEFAULT_GATE, threshold: 1.01, hardCapTokens: 1_000_000 },
});
const embedder = new HashingEmbedder(384);

/** mulberry32, seeded: the same vectors on every run. */
let seed = 12;
const random = (): number => {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const denseVector = (): Float32Array => {
  const v = Float32Array.from({ length: 384 }, () => random() - 0.5 + (random() < 0.1 ? 0.3 : 0));
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};

/** Each conversation's state after each of its K turns, in format 2 and (reconstructed) format 1. */
const histories = async () => {
  const out: { key: string; v1: string[]; v2: string[] }[] = [];
  for (let c = 0; c < N; c++) {
    let s = initialSegmenterState("bench", `c${c}`);
    const vectors: number[][] = [];
    const h = { key: keyOf("bench", `c${c}`), v1: [] as string[], v2: [] as string[] };
    for (let i = 0; i < K; i++) {
      const text = `conversation ${c} turn ${i}: we talked about the garden and the tomatoes again`;
      // Dense unit vectors like the real model's (the hashing embedder's are sparse: mostly zeros,
      // which would understate format 1's JSON).
      const embedding = denseVector();
      vectors.push(Array.from(embedding));
      const turn: SensoryTurn = {
        tenant: "bench",
        conversation: `c${c}`,
        turnId: `t${i}`,
        speaker: i % 2 ? "Ana" : "Ben",
        role: "user",
        text,
        compressed: text,
        keptRatio: 1,
        timestamp: new Date(Date.UTC(2024, 0, 1) + i * 60_000).toISOString(),
        sessionId: "s1",
      };
      s = segmenterStep(s, { kind: "turn", turn, embedding, nowMs: i }, cfg).state;
      h.v2.push(JSON.stringify(s));
      const { gate: _gate, ...open } = s.open ?? { gate: undefined };
      h.v1.push(JSON.stringify({ ...s, open: { ...open, embeddings: vectors } }));
    }
    out.push(h);
  }
  return out;
};

/** The registry subjects of this run's topics (best effort). */
const deleteSubjects = async (): Promise<void> => {
  const url = config.kafka.registryUrl;
  try {
    const subjects = (await (await fetch(`${url}/subjects`)).json()) as string[];
    for (const s of subjects.filter((x) => x.startsWith(prefix))) {
      await fetch(`${url}/subjects/${encodeURIComponent(s)}`, { method: "DELETE" });
      await fetch(`${url}/subjects/${encodeURIComponent(s)}?permanent=true`, { method: "DELETE" });
    }
  } catch {
    // best effort
  }
};

const main = async () => {
  const topics = await ensurePipelineTopics(kafka, config);
  const codecs = await openPipelineCodecs(serdes, topics);
  const admin = kafka.admin();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await admin.connect();
  await producer.connect();
  const data = await histories();
  const rows: string[] = [];
  try {
    const cases: { name: string; version: 1 | 2; compacted: boolean | "one" }[] = [
      { name: "baseline: 1 entry", version: 2, compacted: "one" },
      { name: "format 1, history (before)", version: 1, compacted: false },
      { name: "format 2, history (after)", version: 2, compacted: false },
      { name: "format 1, compacted (before)", version: 1, compacted: true },
      { name: "format 2, compacted (after)", version: 2, compacted: true },
    ];
    for (const [i, kase] of cases.entries()) {
      const changelog = `${prefix}changelog-${i}`;
      await ensureTopics(admin, [{ topic: changelog, partitions: 1, compacted: true }], config.kafka.replicationFactor);
      const codec = await serdes.codec(changelog, SCHEMA_FILES.state, StageStateEnvelopeSchema);
      const entries: { key: string; payload: string }[] = [];
      const pick = (xs: string[]) => (kase.compacted ? xs.slice(-1) : xs);
      for (let t = 0; t < K; t++)
        for (const h of data) {
          const xs = pick(kase.version === 1 ? h.v1 : h.v2);
          const payload = kase.compacted ? (t === K - 1 ? xs[0] : undefined) : xs[t];
          if (payload !== undefined) entries.push({ key: h.key, payload });
        }
      const chosen = kase.compacted === "one" ? entries.slice(0, 1) : entries;
      let bytes = 0;
      let batch: Message[] = [];
      let batchBytes = 0;
      const flush = async () => {
        if (batch.length > 0) await producer.send({ topic: changelog, messages: batch });
        batch = [];
        batchBytes = 0;
      };
      for (const e of chosen) {
        const value = await codec.encode({
          stage: "segmenter",
          key: e.key,
          stateVersion: kase.version,
          payload: e.payload,
          updatedAt: new Date().toISOString(),
        });
        bytes += value.length;
        if (batchBytes + value.length > 700_000) await flush();
        batch.push({ key: e.key, value, partition: 0 });
        batchBytes += value.length;
      }
      await flush();
      // The stage as each version reads it: format 1 without migration (the old runtime), format 2 now.
      const current = segmenterStage({
        input: codecs.sensory,
        output: codecs.segments,
        stateCodec: codec,
        embedder,
        cfg,
      });
      const handler: StageHandler<SensoryTurn, Segment, SegmenterState> =
        kase.version === 1 ? { ...current, state: { version: 1, codec } } : current;
      // Each restore is a fresh instance (its own group): the first restore of a partition.
      const times: number[] = [];
      for (let r = 0; r < REPEATS; r++) {
        let restored: Record<string, unknown> | undefined;
        const runtime = new StageRuntime(handler, {
          kafka,
          admin,
          groupId: `${prefix}segmenter-${i}-${r}`,
          transactionalIdPrefix: `${prefix}segmenter-${i}-${r}`,
          dlq: codecs.dlq,
          changelogTopic: changelog,
          observer: {
            log: (_l, msg, fields) => {
              if (msg === "state restored") restored = fields;
            },
          },
        });
        await runtime.start();
        const deadline = Date.now() + 300_000;
        while (!restored && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
        await runtime.stop();
        if (restored?.keys !== new Set(chosen.map((e) => e.key)).size)
          throw new Error(`${kase.name}: restore incomplete`);
        times.push(Number(restored.ms));
      }
      const sorted = [...times].sort((a, b) => a - b);
      rows.push(
        `${kase.name}: ${chosen.length} entries, ${(bytes / 1e6).toFixed(2)} MB -> restore ms ${times.join(" / ")} (min ${sorted[0]}, median ${sorted[sorted.length >> 1]})`,
      );
      console.log(rows.at(-1));
    }
  } finally {
    await producer.disconnect().catch(() => undefined);
    const mine = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
    if (mine.length > 0) await admin.deleteTopics({ topics: mine }).catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
    await deleteSubjects();
  }
  console.log(
    `\nsegmenter changelog restore, 1 partition, ${N} conversations x ${K} open turns:\n  ${rows.join("\n  ")}`,
  );
};

await main();
