// Crash recovery of the distributed pipeline (real Kafka + schema registry): the sensory and
// segmenter stages run as child processes; half the turns are produced, the segmenter is SIGKILLed
// once its log shows it has committed part of them, the rest is produced while it is down, and it
// is restarted. The segments topic (read_committed) must then hold exactly the segments of an
// uninterrupted reference run of the same pure logic: same ids, same turns, same order, none twice.
// Skips unless KAFKA_BROKERS and SCHEMA_REGISTRY_URL are set.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { ensurePipelineTopics, kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import { openPipelineCodecs, RegistrySerdes } from "../../../services/core/adapters/kafka/serde.ts";
import { CONTROL_HEADER } from "../../../services/core/adapters/kafka/topics.ts";
import { loadOnnxEmbedder } from "../../../services/core/adapters/onnx/embedder.ts";
import { loadLocomo } from "../../../services/core/datasets/locomo.ts";
import { toTurn } from "../../../services/core/service.ts";
import { turnEmbeddingText } from "../../../services/core/turn-text.ts";
import { keyOf, type Segment, type Turn } from "../../../services/core/types.ts";
import { DEFAULT_GATE } from "../../../services/segmenter/gate.ts";
import {
  initialSegmenterState,
  type SegmenterConfig,
  type SegmenterState,
  segmenterStep,
} from "../../../services/segmenter/handler.ts";
import { compressTurn } from "../../../services/sensory/handler.ts";
import { StatisticalCompressor } from "../../../services/sensory/statistical-compressor.ts";
import { collect, deleteSubjects, deleteTopics, skip as infraSkip, runPrefix, testEnv, until } from "./helpers.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const MODEL_DIR = join(ROOT, "models");
const EMBEDDER = join(MODEL_DIR, "all-MiniLM-L6-v2");
const skip = infraSkip || (existsSync(EMBEDDER) ? false : "embedder model missing: npm run setup");

const KEEP_RATE = 0.7;
const SEG_CFG: SegmenterConfig = { gate: DEFAULT_GATE, bufferTokens: 0, idleTimeoutMs: 3_600_000 };

/** Two conversations of the bundled LoCoMo sample: ~60 turns on (likely) different partitions. */
const conversations = (): { key: string; turns: Turn[] }[] => {
  const [sample] = loadLocomo(join(ROOT, "services", "cli", "sample-locomo.json"));
  assert.ok(sample);
  return ["c1", "c2"].map((conversation) => ({
    key: keyOf("acme", conversation),
    turns: sample.turns.map((t, i) => toTurn("acme", conversation, t, `t${i + 1}`) as Turn),
  }));
};

interface Stage {
  name: string;
  child: ChildProcess;
  committedInputs: number;
  started: boolean;
  exited: boolean;
  log: string[];
}

const startStage = (name: string, env: NodeJS.ProcessEnv): Stage => {
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "services", name, "main.ts")], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stage: Stage = { name, child, committedInputs: 0, started: false, exited: false, log: [] };
  let buf = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    buf += chunk.toString();
    let i = buf.indexOf("\n");
    while (i >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      i = buf.indexOf("\n");
      stage.log.push(line);
      try {
        const e = JSON.parse(line) as { msg?: string; inputs?: number };
        if (e.msg === "started") stage.started = true;
        if (e.msg === "committed") stage.committedInputs += e.inputs ?? 0;
      } catch {
        // not a log line
      }
    }
  });
  child.stderr?.on("data", (chunk: Buffer) => stage.log.push(chunk.toString()));
  child.on("exit", () => {
    stage.exited = true;
  });
  return stage;
};

const stopStage = async (s: Stage, signal: NodeJS.Signals): Promise<void> => {
  if (s.exited) return;
  s.child.kill(signal);
  await until(`${s.name} to exit`, () => s.exited, 30_000);
};

/** The uninterrupted reference: the same pure logic, in order, in this process. */
const reference = async (convs: { key: string; turns: Turn[] }[]): Promise<Map<string, Segment[]>> => {
  const embedder = await loadOnnxEmbedder(EMBEDDER);
  const compressor = new StatisticalCompressor();
  const out = new Map<string, Segment[]>();
  try {
    for (const { key, turns } of convs) {
      const first = turns[0] as Turn;
      let state: SegmenterState = initialSegmenterState(first.tenant, first.conversation);
      const segments: Segment[] = [];
      const vectors = await embedder.embed(turns.map((t) => turnEmbeddingText(t.speaker, t.text)));
      for (const [i, t] of turns.entries()) {
        const sensory = await compressTurn(t, compressor, KEEP_RATE);
        const r = segmenterStep(
          state,
          { kind: "turn", turn: sensory, embedding: vectors[i] as Float32Array, nowMs: 0 },
          SEG_CFG,
        );
        state = r.state;
        segments.push(...r.segments);
      }
      segments.push(...segmenterStep(state, { kind: "flush", reason: "flush", nowMs: 0 }, SEG_CFG).segments);
      out.set(key, segments);
    }
  } finally {
    await embedder.close();
  }
  return out;
};

const shape = (s: Segment) => ({ id: s.id, closedBy: s.closedBy, turns: s.turns.map((t) => t.turnId) });

test("SIGKILL of the segmenter mid-stream: the segments topic equals an uninterrupted run", {
  skip,
  timeout: 150_000,
}, async () => {
  const prefix = runPrefix("crash");
  const env = testEnv(prefix, {
    MEMORY_METRICS_PORT: "0",
    MEMORY_MODEL_DIR: MODEL_DIR,
    MEMORY_COMPRESSOR: "statistical",
    MEMORY_KEEP_RATE: String(KEEP_RATE),
    MEMORY_BUFFER_TOKENS: "0",
    MEMORY_IDLE_TIMEOUT_MS: "3600000",
    MEMORY_STAGE_MAX_CHUNK: "4",
  });
  const config = (await import("../../../services/core/config.ts")).loadConfig({}, env);
  const kafka = kafkaClient(config, "crash-test");
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const producer = kafka.producer();
  const stages: Stage[] = [];
  let segmentsCollector: Awaited<ReturnType<typeof collect>> | undefined;
  try {
    const convs = conversations();
    const expected = await reference(convs);
    const topics = await ensurePipelineTopics(kafka, config);
    const codecs = await openPipelineCodecs(serdes, topics);
    await producer.connect();

    const sensory = startStage("sensory", env);
    let segmenter = startStage("segmenter", env);
    stages.push(sensory, segmenter);
    await until("both stages to start", () => sensory.started && segmenter.started, 60_000);

    const produce = async (from: number, to: number): Promise<void> => {
      for (const { key, turns } of convs)
        await producer.send({
          topic: topics.turns,
          messages: await Promise.all(
            turns.slice(from, to).map(async (t) => ({ key, value: await codecs.turns.encode(t) })),
          ),
        });
    };
    const half = Math.floor((convs[0]?.turns.length ?? 0) / 2);
    await produce(0, half);
    // Kill once the segmenter's own log says it has committed part of the stream.
    await until("the segmenter to commit some turns", () => segmenter.committedInputs >= 8, 60_000);
    await stopStage(segmenter, "SIGKILL");
    const before = segmenter.committedInputs;
    assert.ok(before < 2 * half, `killed mid-stream (${before} of ${2 * half} committed)`);

    await produce(half, Number.MAX_SAFE_INTEGER);
    segmenter = startStage("segmenter", env);
    stages.push(segmenter);
    for (const { key } of convs)
      await producer.send({
        topic: topics.turns,
        messages: [{ key, value: null, headers: { [CONTROL_HEADER]: "flush" } }],
      });

    const collector = await collect(kafka, topics.segments);
    segmentsCollector = collector;
    const total = [...expected.values()].reduce((n, s) => n + s.length, 0);
    await until("every segment", () => collector.messages.length >= total, 90_000);
    // Anything duplicated would arrive right behind; give it a moment.
    await new Promise((r) => setTimeout(r, 1500));

    const got = new Map<string, Segment[]>();
    for (const m of collector.messages) {
      const d = await codecs.segments.decode(m.value);
      assert.ok(d.ok, d.ok ? "" : d.reason);
      got.set(m.key, [...(got.get(m.key) ?? []), d.value]);
    }
    const ids = collector.messages.length;
    assert.equal(ids, total, "no segment twice, none missing");
    for (const { key } of convs)
      assert.deepEqual((got.get(key) ?? []).map(shape), (expected.get(key) ?? []).map(shape), `segments of ${key}`);
    assert.ok(
      segmenter.log.some((l) => l.includes('"state restored"')),
      "the restarted segmenter restored its state from the changelog",
    );

    // Graceful stop: SIGTERM finishes the batch, commits and exits 0.
    await stopStage(segmenter, "SIGTERM");
    assert.equal(segmenter.child.exitCode, 0);
  } catch (err) {
    for (const s of stages) process.stderr.write(`--- ${s.name} log\n${s.log.slice(-30).join("\n")}\n`);
    throw err;
  } finally {
    await Promise.allSettled(stages.map((s) => stopStage(s, "SIGKILL")));
    await segmentsCollector?.consumer.disconnect().catch(() => undefined);
    await producer.disconnect().catch(() => undefined);
    await serdes.close().catch(() => undefined);
    await deleteTopics(kafka, prefix);
    await deleteSubjects(prefix);
  }
});
