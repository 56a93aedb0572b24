// Crash recovery of every stage of the distributed pipeline (real Kafka + schema registry; Neo4j
// for the indexer when NEO4J_URI is set, else the embedded store in a temporary folder).
//
// One test per stage, one shared body: the stage runs as a child process (the sensory case also
// runs the segmenter behind it) on a run-unique topic prefix, and its input topic is fed, in small
// transactions like an upstream stage's, with the items of an uninterrupted in-process reference
// run of the same pure logic (two copies of the bundled LoCoMo sample under two tenants). Half of
// each conversation is fed; the stage is SIGKILLed the moment its own log reports that it has
// committed part of it (the kill is sent from the log-line handler, no sleeping); the other half is
// fed while it is down; it is restarted and the conversations are flushed. Once every consumer
// group has committed its input to the end:
//   sensory, segmenter, encoder: the output topics read with read_committed hold exactly the
//     reference's items, in order per conversation, none twice (sensory: the compressed turns'
//     ids and the segments; segmenter: the segments; encoder: each records event's segment id and
//     record ids);
//   indexer: the store holds exactly the reference's record ids and segments, counted with
//     countRecords / countSegments (writes are upserts, so a replay must not duplicate).
// A stateful stage must have restored its keyed state from the changelog, and the restarted stage
// stops gracefully on SIGTERM (exit 0). Skips unless KAFKA_BROKERS and SCHEMA_REGISTRY_URL are set.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { Kafka, Message } from "kafkajs";
import { openStores } from "../../../services/composition/stores.ts";
import { ensurePipelineTopics, kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import {
  openPipelineCodecs,
  type PipelineCodecs,
  RegistrySerdes,
} from "../../../services/core/adapters/kafka/serde.ts";
import { CONTROL_HEADER, type TopicNames } from "../../../services/core/adapters/kafka/topics.ts";
import { loadOnnxEmbedder } from "../../../services/core/adapters/onnx/embedder.ts";
import { loadConfig } from "../../../services/core/config.ts";
import { loadLocomo } from "../../../services/core/datasets/locomo.ts";
import { turnEmbeddingText } from "../../../services/core/turn-text.ts";
import { toTurn } from "../../../services/core/turn-validation.ts";
import {
  type DisambiguationContext,
  keyOf,
  type RecordsEvent,
  type Segment,
  type SensoryTurn,
  type Turn,
} from "../../../services/core/types.ts";
import { ExtractiveEncoder } from "../../../services/encoder/encode-segment.ts";
import { emptyContext } from "../../../services/encoder/extractor.ts";
import { DEFAULT_GATE } from "../../../services/segmenter/gate.ts";
import {
  initialSegmenterState,
  type SegmenterConfig,
  type SegmenterState,
  segmenterStep,
} from "../../../services/segmenter/segment-state.ts";
import { compressTurn } from "../../../services/sensory/compress-turn.ts";
import { StatisticalCompressor } from "../../../services/sensory/statistical-compressor.ts";
import { neo4jSkip } from "../../helpers/neo4j-env.ts";
import {
  deleteSubjects,
  deleteTopics,
  skip as infraSkip,
  readAll,
  runPrefix,
  testEnv,
  until,
  waitGroupsDrained,
} from "./helpers.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const MODEL_DIR = join(ROOT, "models");
const EMBEDDER = join(MODEL_DIR, "all-MiniLM-L6-v2");
const skip = infraSkip || (existsSync(EMBEDDER) ? false : "embedder model missing: npm run setup");

const KEEP_RATE = 0.7;
const SEG_CFG: SegmenterConfig = { gate: DEFAULT_GATE, bufferTokens: 0, idleTimeoutMs: 3_600_000 };
/** Two tenants, so that the two copies of the sample give distinct record ids in one store. */
const RUN = randomUUID().slice(0, 8);
const CONVERSATIONS = ["a", "b", "c", "d"].map((t, i) => ({ tenant: `crash-${RUN}-${t}`, conversation: `c${i + 1}` }));

type StageName = "sensory" | "segmenter" | "encoder" | "indexer";
type Role = "turns" | "sensory" | "segments" | "records";
const INPUT_OF: Record<StageName, Role> = {
  sensory: "turns",
  segmenter: "sensory",
  encoder: "segments",
  indexer: "records",
};
/** Messages per transaction: small, so that a kill lands between commits of the stream. */
const MAX_CHUNK: Record<StageName, number> = { sensory: 2, segmenter: 2, encoder: 1, indexer: 1 };

// ---------------------------------------------------------------------------------------------------
// The uninterrupted reference: the same pure logic, in order, in this process.

interface Conversation {
  key: string;
  tenant: string;
  turns: Turn[];
  sensory: SensoryTurn[];
  segments: Segment[];
  records: RecordsEvent[];
}

const computeReference = async (): Promise<Conversation[]> => {
  const [sample] = loadLocomo(join(ROOT, "services", "cli", "sample-locomo.json"));
  assert.ok(sample);
  const embedder = await loadOnnxEmbedder(EMBEDDER);
  const compressor = new StatisticalCompressor();
  const encoder = new ExtractiveEncoder();
  const out: Conversation[] = [];
  try {
    for (const { tenant, conversation } of CONVERSATIONS) {
      const turns = sample.turns.map((t, i) => toTurn(tenant, conversation, t, `t${i + 1}`) as Turn);
      const sensory: SensoryTurn[] = [];
      for (const t of turns) sensory.push(await compressTurn(t, compressor, KEEP_RATE));
      const vectors = await embedder.embed(sensory.map((t) => turnEmbeddingText(t.speaker, t.text)));
      let state: SegmenterState = initialSegmenterState(tenant, conversation);
      const segments: Segment[] = [];
      for (const [i, turn] of sensory.entries()) {
        const r = segmenterStep(
          state,
          { kind: "turn", turn, embedding: vectors[i] as Float32Array, nowMs: 0 },
          SEG_CFG,
        );
        state = r.state;
        segments.push(...r.segments);
      }
      segments.push(...segmenterStep(state, { kind: "flush", reason: "flush", nowMs: 0 }, SEG_CFG).segments);
      let context: DisambiguationContext = emptyContext();
      const records: RecordsEvent[] = [];
      for (const segment of segments) {
        const r = await encoder.encode(segment, context);
        context = r.context;
        records.push({ tenant, conversation, segment, records: r.records, context });
      }
      out.push({ key: keyOf(tenant, conversation), tenant, turns, sensory, segments, records });
    }
  } finally {
    await embedder.close();
  }
  return out;
};

let referenceRun: Promise<Conversation[]> | undefined;
const reference = (): Promise<Conversation[]> => {
  referenceRun ??= computeReference();
  return referenceRun;
};

/** The input items of a stage, encoded with its input topic's codec, per conversation. */
const inputsOf = async (stage: StageName, conv: Conversation, codecs: PipelineCodecs): Promise<Buffer[]> => {
  switch (stage) {
    case "sensory":
      return Promise.all(conv.turns.map((t) => codecs.turns.encode(t)));
    case "segmenter":
      return Promise.all(conv.sensory.map((t) => codecs.sensory.encode(t)));
    case "encoder":
      return Promise.all(conv.segments.map((s) => codecs.segments.encode(s)));
    case "indexer":
      return Promise.all(conv.records.map((e) => codecs.records.encode(e)));
  }
};

// ---------------------------------------------------------------------------------------------------
// Stage processes

interface Stage {
  name: StageName;
  child: ChildProcess;
  committedInputs: number;
  started: boolean;
  exited: boolean;
  /**
   * SIGKILL sent from the log-line handler once committedInputs reached this, at the next
   * transaction's AddOffsetsToTxn request (kafkajs debug log): the chunk's outputs and changelog
   * entries are written into the open transaction (for the indexer, its store writes are done),
   * its offsets are not committed yet. Whether the signal lands before that transaction commits is
   * a race (for the slower stages it usually does, for the sensory stage often not); either way
   * nothing may be lost or duplicated.
   */
  killAt?: number;
  killed: boolean;
  log: string[];
}

const startStage = (name: StageName, env: NodeJS.ProcessEnv, killAt?: number): Stage => {
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "services", name, "main.ts")], {
    cwd: ROOT,
    env: {
      ...env,
      MEMORY_STAGE_MAX_CHUNK: String(MAX_CHUNK[name]),
      ...(killAt !== undefined ? { KAFKAJS_DEBUG: "1" } : {}),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stage: Stage = { name, child, committedInputs: 0, started: false, exited: false, killed: false, log: [] };
  if (killAt !== undefined) stage.killAt = killAt;
  let buf = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    buf += chunk.toString();
    let i = buf.indexOf("\n");
    while (i >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      i = buf.indexOf("\n");
      try {
        const e = JSON.parse(line) as { msg?: string; inputs?: number; level?: string; message?: string };
        if (e.level !== "DEBUG") stage.log.push(line);
        if (e.msg === "started") stage.started = true;
        if (e.msg === "committed") stage.committedInputs += e.inputs ?? 0;
        if (
          stage.killAt !== undefined &&
          !stage.killed &&
          stage.committedInputs >= stage.killAt &&
          e.message?.includes("Request AddOffsetsToTxn(")
        ) {
          stage.killed = true;
          child.kill("SIGKILL");
        }
      } catch {
        stage.log.push(line);
        // not a log line
      }
    }
  });
  child.stderr?.on("data", (chunk: Buffer) => stage.log.push(chunk.toString()));
  // "close", not "exit": every line the process wrote has been read by then.
  child.on("close", () => {
    stage.exited = true;
  });
  return stage;
};

const stopStage = async (s: Stage, signal: NodeJS.Signals): Promise<void> => {
  if (s.exited) return;
  s.child.kill(signal);
  await until(`${s.name} to exit`, () => s.exited, 30_000);
};

const waitStarted = (stages: readonly Stage[]): Promise<void> =>
  until(
    `${stages.map((s) => s.name).join(", ")} to start`,
    () => {
      const dead = stages.find((s) => s.exited);
      if (dead) throw new Error(`${dead.name} exited before it started`);
      return stages.every((s) => s.started);
    },
    90_000,
  );

// ---------------------------------------------------------------------------------------------------
// What is compared

const shapes = {
  sensory: (t: SensoryTurn) => t.turnId,
  segments: (s: Segment) => ({ id: s.id, closedBy: s.closedBy, turns: s.turns.map((t) => t.turnId) }),
  records: (e: RecordsEvent) => ({ segment: e.segment.id, records: e.records.map((r) => r.id) }),
};
type Checked = keyof typeof shapes;

/** The output topic read with read_committed, decoded and shaped per conversation; all of it. */
const readTopic = async (
  kafka: Kafka,
  topics: TopicNames,
  codecs: PipelineCodecs,
  which: Checked,
): Promise<{ total: number; byKey: Map<string, unknown[]> }> => {
  // Control messages (a forwarded flush) keep their place in the stream but are not items.
  const messages = (await readAll(kafka, topics[which])).filter((m) => !m.control);
  const byKey = new Map<string, unknown[]>();
  for (const m of messages) {
    let shaped: unknown;
    if (which === "sensory") {
      const d = await codecs.sensory.decode(m.value);
      assert.ok(d.ok, d.ok ? "" : d.reason);
      shaped = shapes.sensory(d.value);
    } else if (which === "segments") {
      const d = await codecs.segments.decode(m.value);
      assert.ok(d.ok, d.ok ? "" : d.reason);
      shaped = shapes.segments(d.value);
    } else {
      const d = await codecs.records.decode(m.value);
      assert.ok(d.ok, d.ok ? "" : d.reason);
      shaped = shapes.records(d.value);
    }
    byKey.set(m.key, [...(byKey.get(m.key) ?? []), shaped]);
  }
  return { total: messages.length, byKey };
};

const expectedOf = (conv: Conversation, which: Checked): unknown[] =>
  which === "sensory"
    ? conv.sensory.map(shapes.sensory)
    : which === "segments"
      ? conv.segments.map(shapes.segments)
      : conv.records.map(shapes.records);

interface Case {
  /** The stage SIGKILLed mid-stream and restarted. */
  kill: StageName;
  /** Stages run as child processes, in pipeline order; the first one's input topic is fed. */
  run: StageName[];
  /** Output topics compared with the reference (the indexer's result is its store). */
  check: Checked[];
  /** Committed inputs of the killed stage that trigger the kill (less than half its input). */
  killAt: number;
  /** Copies of the sample fed (the later stages see few items per conversation: 4 segments). */
  conversations: number;
}

const STATEFUL = new Set<StageName>(["segmenter", "encoder"]);

/** The killed stage's own output topic, read uncommitted too: aborted messages show a kill mid-transaction. */
const OUTPUT_OF: Record<StageName, "sensory" | "segments" | "records" | "updateQueue"> = {
  sensory: "sensory",
  segmenter: "segments",
  encoder: "records",
  indexer: "updateQueue",
};

const CASES: Case[] = [
  { kill: "sensory", run: ["sensory", "segmenter"], check: ["sensory", "segments"], killAt: 6, conversations: 2 },
  { kill: "segmenter", run: ["segmenter"], check: ["segments"], killAt: 6, conversations: 2 },
  { kill: "encoder", run: ["encoder"], check: ["records"], killAt: 2, conversations: 4 },
  { kill: "indexer", run: ["indexer"], check: [], killAt: 2, conversations: 4 },
];

// The cases share nothing but the reference (each has its own topic prefix, groups, transactional
// ids and stage processes), so they run side by side: most of a case is waiting on Kafka (group
// joins, the restart, the drain), not CPU. CRASH_TEST_CONCURRENCY=1 runs them one after another.
describe("SIGKILL of each stage mid-stream", {
  skip,
  concurrency: Math.max(1, Number(process.env.CRASH_TEST_CONCURRENCY ?? CASES.length)),
}, () => {
  for (const c of CASES)
    it(`SIGKILL of the ${c.kill} mid-stream, restart: the result equals an uninterrupted run`, {
      timeout: 240_000,
    }, async (t) => {
      const prefix = runPrefix(`crash-${c.kill}`);
      const neo4j = c.kill === "indexer" && !neo4jSkip;
      const dataDir = c.kill === "indexer" && !neo4j ? mkdtempSync(join(tmpdir(), "crash-indexer-")) : undefined;
      const env = testEnv(prefix, {
        MEMORY_METRICS_PORT: "0",
        MEMORY_MODEL_DIR: MODEL_DIR,
        MEMORY_COMPRESSOR: "statistical",
        MEMORY_KEEP_RATE: String(KEEP_RATE),
        MEMORY_BUFFER_TOKENS: "0",
        MEMORY_IDLE_TIMEOUT_MS: "3600000",
        MEMORY_STORE: neo4j ? "neo4j" : "embedded",
        ...(dataDir ? { MEMORY_DATA_DIR: dataDir } : {}),
      });
      const config = loadConfig({}, env);
      const kafka = kafkaClient(config, `crash-test-${c.kill}`);
      const serdes = new RegistrySerdes(config.kafka.registryUrl);
      const feeder = kafka.producer({
        transactionalId: `${prefix}crash-feeder`,
        idempotent: true,
        maxInFlightRequests: 1,
      });
      const stages: Stage[] = [];
      const convs = (await reference()).slice(0, c.conversations);
      try {
        const topics = await ensurePipelineTopics(kafka, config);
        const codecs = await openPipelineCodecs(serdes, topics);
        const inputTopic = topics[INPUT_OF[c.run[0] as StageName]];
        const inputs = await Promise.all(convs.map((conv) => inputsOf(c.run[0] as StageName, conv, codecs)));
        await feeder.connect();
        /** Writes like an upstream stage: a few messages per transaction, conversations interleaved. */
        const feed = async (batches: Message[][]): Promise<void> => {
          for (let i = 0; i < Math.max(...batches.map((b) => b.length)); i += 3) {
            const tx = await feeder.transaction();
            try {
              const messages = batches.flatMap((b) => b.slice(i, i + 3));
              if (messages.length > 0) await tx.send({ topic: inputTopic, messages });
              await tx.commit();
            } catch (err) {
              await tx.abort().catch(() => undefined);
              throw err;
            }
          }
        };
        const halfOf = (n: number): number => Math.ceil(n / 2);
        const firstHalf = inputs.reduce((n, xs) => n + halfOf(xs.length), 0);
        assert.ok(c.killAt < firstHalf, `kill threshold ${c.killAt} below the first half (${firstHalf})`);

        const running = new Map<StageName, Stage>();
        for (const name of c.run) {
          const s = startStage(name, env, name === c.kill ? c.killAt : undefined);
          running.set(name, s);
          stages.push(s);
        }
        await waitStarted([...running.values()]);

        // First half; the killed stage's log-line handler sends SIGKILL once it has committed killAt inputs.
        const part = (from: "first" | "second"): Message[][] =>
          convs.map((conv, i) => {
            const xs = inputs[i] ?? [];
            const half = halfOf(xs.length);
            return (from === "first" ? xs.slice(0, half) : xs.slice(half)).map((value) => ({ key: conv.key, value }));
          });
        await feed(part("first"));
        const victim = running.get(c.kill) as Stage;
        await until(`the ${c.kill} to be killed mid-stream`, () => victim.exited, 90_000);
        assert.ok(victim.killed, `${c.kill} was killed by the test, not by itself`);
        const before = victim.committedInputs;
        assert.ok(
          before >= c.killAt && before < firstHalf,
          `killed mid-stream: ${before} of the ${firstHalf} inputs fed so far committed`,
        );

        // Second half while it is down, then restart it and flush the conversations.
        await feed(part("second"));
        const restarted = startStage(c.kill, env);
        running.set(c.kill, restarted);
        stages.push(restarted);
        await waitStarted([restarted]);
        await feed(convs.map((conv) => [{ key: conv.key, value: null, headers: { [CONTROL_HEADER]: "flush" } }]));

        t.diagnostic(`${c.kill} killed after committing ${before} of ${firstHalf} inputs fed`);
        await waitGroupsDrained(
          kafka,
          c.run.map((name) => ({ groupId: `${prefix}memory-${name}`, topic: topics[INPUT_OF[name]] })),
          120_000,
        );
        if (STATEFUL.has(c.kill))
          assert.ok(
            restarted.log.some((l) => l.includes('"state restored"')),
            `the restarted ${c.kill} restored its state from the changelog`,
          );
        // Graceful stop: SIGTERM finishes the batch, commits and exits 0.
        for (const s of [...running.values()].reverse()) await stopStage(s, "SIGTERM");
        assert.equal(restarted.child.exitCode, 0, `the restarted ${c.kill} stopped gracefully`);
        // The killed transaction was aborted when the restarted stage fenced it: what it had written
        // is in the log but invisible to read_committed (the indexer's outputs may be empty).
        let aborted = 0;
        for (const topic of [topics[OUTPUT_OF[c.kill]], ...(STATEFUL.has(c.kill) ? [topics.state(c.kill)] : [])])
          aborted += (await readAll(kafka, topic, 60_000, true)).length - (await readAll(kafka, topic)).length;
        t.diagnostic(
          `the restarted ${c.kill} committed ${restarted.committedInputs} inputs; ` +
            `${aborted} messages of the killed transaction aborted`,
        );

        for (const which of c.check) {
          const got = await readTopic(kafka, topics, codecs, which);
          const expected = convs.reduce((n, conv) => n + expectedOf(conv, which).length, 0);
          assert.equal(got.total, expected, `${which}: none twice, none missing`);
          for (const conv of convs)
            assert.deepEqual(got.byKey.get(conv.key) ?? [], expectedOf(conv, which), `${which} of ${conv.key}`);
        }

        if (c.kill === "indexer") {
          const stores = await openStores(config, neo4j ? "neo4j" : "embedded");
          try {
            for (const conv of convs) {
              const ids: string[] = [];
              let cursor: string | undefined;
              do {
                const page = await stores.graph.listRecords(conv.tenant, {
                  limit: 200,
                  includeSuperseded: true,
                  ...(cursor ? { cursor } : {}),
                });
                ids.push(...page.records.map((r) => r.id));
                cursor = page.nextCursor;
              } while (cursor);
              const expected = [...new Set(conv.records.flatMap((e) => e.records.map((r) => r.id)))].sort();
              assert.ok(expected.length > 0, "the reference has records");
              assert.deepEqual([...ids].sort(), expected, `record ids of ${conv.tenant}`);
              assert.equal(await stores.graph.countRecords(conv.tenant), expected.length, `records of ${conv.tenant}`);
              assert.equal(
                await stores.graph.countSegments(conv.tenant),
                conv.segments.length,
                `segments of ${conv.tenant}`,
              );
            }
          } finally {
            if (neo4j)
              for (const conv of convs) {
                await stores.graph.deleteTenant(conv.tenant).catch(() => undefined);
                await stores.vectors.deleteTenant(conv.tenant).catch(() => undefined);
              }
            await stores.close();
          }
        }
        if (process.env.CRASH_TEST_LOGS)
          for (const s of stages)
            process.stderr.write(`--- ${s.name}\n${s.log.filter((l) => !l.includes('"committed"')).join("\n")}\n`);
      } catch (err) {
        for (const s of stages) process.stderr.write(`--- ${s.name} log\n${s.log.slice(-30).join("\n")}\n`);
        throw err;
      } finally {
        await Promise.allSettled(stages.map((s) => stopStage(s, "SIGKILL")));
        await feeder.disconnect().catch(() => undefined);
        await serdes.close().catch(() => undefined);
        await deleteTopics(kafka, prefix);
        await deleteSubjects(prefix);
        if (dataDir) rmSync(dataDir, { recursive: true, force: true });
      }
    });
});
