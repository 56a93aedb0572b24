/**
 * `memory bench freshness`: how soon is a turn produced to Kafka queryable, and how fast does the
 * distributed pipeline go next to the embedded runtime, in one run (issue 18).
 *
 * Against the running Kafka + schema registry + Neo4j (eval "$(bash infra/env.sh)"); the four
 * stages (sensory, segmenter, encoder, indexer: services/<stage>/main.ts) run as child processes
 * with a topic prefix and a tenant of their own, both removed at the end (topics, subjects, tenant).
 *
 * 1. Freshness: the first turns of each dev conversation are produced to memory.turns.v1 at a fixed
 *    rate; every 100 ms the bench reads the stores. A raw turn is queryable once its row (the
 *    raw-lexical route's getTurns) and its vector (the raw-dense route) are both there; a turn's
 *    record is queryable once a record citing the turn is listed. A flush closes the open segments
 *    at the end; turns no record cites are left out of the record latency.
 * 2. Throughput: whole dev conversations produced at once (another tenant); turns per second from
 *    the first produce until every stage's consumer group has drained (after a flush), against the
 *    same turns through the embedded runtime (ingest, flush, drain) in the same run. Each runtime
 *    first takes other conversations in a warm-up pass (a third tenant, kept until the end), so both
 *    are measured as a running service is: warm code, and stores that already hold data. On an
 *    empty Neo4j the measured pass otherwise ran while Neo4j re-planned every statement as its
 *    statistics grew from nothing (docs/benchmarks.md); the warm-up pass's figures are reported too.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, type WriteStream } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type Command, InvalidArgumentError } from "commander";
import type { Admin, Consumer, Kafka, Producer } from "kafkajs";
import { openStores } from "../composition/stores.ts";
import { ensurePipelineTopics, kafkaClient } from "../core/adapters/kafka/process.ts";
import { openPipelineCodecs, RegistrySerdes } from "../core/adapters/kafka/serde.ts";
import { CONTROL_HEADER, type TopicNames } from "../core/adapters/kafka/topics.ts";
import { type Config, loadConfig } from "../core/config.ts";
import { loadLocomo } from "../core/datasets/locomo.ts";
import { turnRowId } from "../core/ids.ts";
import { keyOf, type Turn } from "../core/types.ts";
import { openEmbeddedEngine } from "../embedded/open.ts";
import { cpuSince, infraServerPids } from "./process-cpu.ts";
import { runEnvironment, writeReportFiles } from "./run.ts";
import { percentile } from "./scoring.ts";
import { fmt, markdownTable } from "./table.ts";

export interface FreshnessOptions {
  /** The configuration the bench was started with (model folder, Kafka, registry, Neo4j). */
  config: Config;
  /** LoCoMo-format file (the dev conversations). */
  data: string;
  /** Turns of each conversation produced in the freshness phase (default 40). */
  turns?: number;
  /** Turns per second produced in the freshness phase, all conversations together (default 4). */
  rate?: number;
  /** Conversations in the throughput phase, less the turns the freshness phase produced (default 1: the first dev conversation); 0 skips it. */
  throughputConversations?: number;
  /**
   * A warm-up pass through both runtimes before the measured one (default true), with the next
   * throughputConversations conversations (other texts: no embedding-cache hit carries over);
   * skipped when the data has no such conversations.
   */
  throughputWarmUp?: boolean;
  /** Output folder; null writes nothing. */
  out: string | null;
  /** Folder for each stage process's stdout and stderr (<stage>.log), e.g. with MEMORY_TRACING=console. */
  stageLogs?: string;
  /** Extra node flags of the stage processes, e.g. ["--cpu-prof", "--cpu-prof-dir=prof"] (not allowed in NODE_OPTIONS). */
  stageNodeArgs?: string[];
  log?: (line: string) => void;
}

export interface LatencySummary {
  n: number;
  p50: number | undefined;
  p95: number | undefined;
  max: number | undefined;
}

export interface FreshnessResult {
  environment: ReturnType<typeof runEnvironment> & { loadavg: number[] };
  rate: number;
  producedTurns: number;
  /** Produce → raw turn queryable (row and vector), ms. */
  rawTurn: LatencySummary;
  /** Raw turns never seen before the deadline. */
  rawTurnMissing: number;
  /** Produce → a record citing the turn queryable, ms (turns some record cites). */
  record: LatencySummary;
  /**
   * Where the raw-turn latency goes, per turn (a probe consumer reads the sensory topic as the
   * indexer's raw-turn consumer does, read_committed): produce → the sensory stage wrote the turn
   * (its record's timestamp: fetch + compress + embed), written → committed and fetched by a
   * read_committed consumer (the sensory transaction, the fetch), fetched → raw turn queryable
   * (the raw-turn consumer's fetch and store writes, and the bench's poll; it embeds only a turn
   * that came without its model's vector).
   */
  rawTurnStages?: {
    sensoryWritten: LatencySummary;
    sensoryVisible: LatencySummary;
    indexed: LatencySummary;
  };
  /** Each freshness turn's times, ms after the first produce at startedAt (epoch ms; JSON only). */
  timeline?: TurnTimeline[];
  startedAt?: number;
  throughput?: {
    /** The measured pass's conversations. */
    conversations: string[];
    turns: number;
    distributedSeconds: number;
    embeddedSeconds: number;
    distributedTurnsPerSecond: number;
    embeddedTurnsPerSecond: number;
    /** distributed / embedded. */
    ratio: number;
    /**
     * CPU seconds each stage process used in the distributed run (Linux /proc; Kafka and Neo4j,
     * shared servers, not counted), and the bench process in the embedded run (the whole runtime).
     */
    stageCpuSeconds?: Record<string, number>;
    /**
     * CPU seconds of the servers this checkout's infra runs (Kafka, registry, Neo4j; their pid
     * files, process-cpu.ts) in the distributed run, when it runs them: they share the machine's
     * cores with the stage processes.
     */
    serverCpuSeconds?: Record<string, number>;
    embeddedCpuSeconds?: number;
    /**
     * Texts each stage process gave its embedding model in the distributed run (its
     * memory_embedded_texts_total, read from its /metrics before and after; embedding-cache hits
     * not counted), and the embedded runtime's model in its run: where a text is embedded twice.
     */
    stageEmbeddedTexts?: Record<string, number>;
    embeddedTexts?: number;
    /** The warm-up pass before it (other conversations, another tenant; its data stays during the measured pass). */
    warmUp?: {
      conversations: string[];
      turns: number;
      distributedSeconds: number;
      embeddedSeconds: number;
      ratio: number;
    };
  };
}

export interface TurnTimeline {
  turn: string;
  sent: number;
  sensoryWritten?: number;
  sensoryVisible?: number;
  raw?: number;
  record?: number;
}

const STAGES = ["sensory", "segmenter", "encoder", "indexer"] as const;
const INPUT_OF: Record<(typeof STAGES)[number], keyof Pick<TopicNames, "turns" | "sensory" | "segments" | "records">> =
  {
    sensory: "turns",
    segmenter: "sensory",
    encoder: "segments",
    indexer: "records",
  };
const POLL_MS = 100;
/** How long the bench waits for the last turn to become queryable, and for the groups to drain. */
const DEADLINE_MS = 600_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const summary = (xs: readonly number[]): LatencySummary => ({
  n: xs.length,
  p50: percentile(xs, 50),
  p95: percentile(xs, 95),
  max: xs.length > 0 ? Math.max(...xs) : undefined,
});

interface Child {
  name: string;
  child: ChildProcess;
  started: Promise<void>;
  tail: string[];
  /** The process's /metrics server (from its "started" log line). */
  metricsUrl?: string;
}

const ROOT = resolve(import.meta.dirname, "..", "..");

/** Texts a stage process has given its embedding model so far (its /metrics); undefined when unknown. */
const embeddedTextsOf = async (metricsUrl: string | undefined): Promise<number | undefined> => {
  if (metricsUrl === undefined) return undefined;
  try {
    const body = await (await fetch(`${metricsUrl}/metrics`)).text();
    // A process that never embeds has the counter at 0 (prom-client lists it without a sample).
    let n = 0;
    for (const line of body.split("\n"))
      if (line.startsWith("memory_embedded_texts_total")) n += Number(line.slice(line.lastIndexOf(" ") + 1)) || 0;
    return n;
  } catch {
    return undefined;
  }
};

/** The metrics URL of a stage's "started" log line (JSON), if it has one. */
const metricsUrlOf = (line: string): string | undefined => {
  try {
    const url = (JSON.parse(line) as { metrics?: unknown }).metrics;
    return typeof url === "string" ? url : undefined;
  } catch {
    return undefined;
  }
};

const startStage = (name: string, env: NodeJS.ProcessEnv, logDir?: string, nodeArgs: string[] = []): Child => {
  const child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", join(ROOT, "services", name, "main.ts")], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let file: WriteStream | undefined;
  if (logDir) {
    file = createWriteStream(join(logDir, `${name}.log`));
    child.stdout?.on("data", (chunk: Buffer) => file?.write(chunk));
    child.stderr?.on("data", (chunk: Buffer) => file?.write(chunk));
    child.on("exit", () => file?.end());
  }
  const tail: string[] = [];
  const handle: Child = { name, child, started: Promise.resolve(), tail };
  handle.started = new Promise<void>((ok, fail) => {
    let buf = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      buf += chunk.toString();
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        tail.push(line);
        if (tail.length > 20) tail.shift();
        if (line.includes('"msg":"started"')) {
          const url = metricsUrlOf(line);
          if (url !== undefined) handle.metricsUrl = url;
          ok();
        }
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => tail.push(chunk.toString()));
    child.on("exit", (code) => fail(new Error(`${name} exited (${code}) before it started:\n${tail.join("\n")}`)));
  });
  return handle;
};

const stopStage = async (c: Child): Promise<void> => {
  if (c.child.exitCode !== null) return;
  const exited = new Promise<void>((r) => c.child.once("exit", () => r()));
  c.child.kill("SIGTERM");
  const timer = setTimeout(() => c.child.kill("SIGKILL"), 30_000);
  await exited;
  clearTimeout(timer);
};

/** Messages the stages' consumer groups have not yet committed past (0: drained). */
const behind = async (admin: Admin, prefix: string, topics: TopicNames): Promise<number> => {
  let n = 0;
  for (const stage of STAGES) {
    const topic = topics[INPUT_OF[stage]];
    const [committed] = await admin.fetchOffsets({ groupId: `${prefix}memory-${stage}`, topics: [topic] });
    for (const e of await admin.fetchTopicOffsets(topic)) {
      const c = Number(committed?.partitions.find((p) => p.partition === e.partition)?.offset ?? -1);
      // Transaction markers take an offset: a drained partition is one behind its high watermark.
      n += Math.max(0, Number(e.high) - 1 - Math.max(0, c));
    }
  }
  return n;
};

const waitDrained = async (admin: Admin, prefix: string, topics: TopicNames): Promise<void> => {
  const end = Date.now() + DEADLINE_MS;
  let streak = 0;
  while (streak < 2) {
    if (Date.now() > end) throw new Error(`the pipeline did not drain within ${DEADLINE_MS / 1000} s`);
    streak = (await behind(admin, prefix, topics)) === 0 ? streak + 1 : 0;
    if (streak < 2) await sleep(250);
  }
};

export const runFreshnessBench = async (
  o: FreshnessOptions,
): Promise<{ result: FreshnessResult; markdown: string; files: string[] }> => {
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const perConversation = o.turns ?? 40;
  const rate = o.rate ?? 4;
  const run = randomUUID().slice(0, 8);
  const prefix = `bench-fresh-${run}.`;
  const tenant = `bench-fresh-${run}`;
  const throughputTenant = `bench-fresh-${run}-tp`;
  const warmUpTenant = `bench-fresh-${run}-warm`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    MEMORY_TOPIC_PREFIX: prefix,
    MEMORY_STORE: "neo4j",
    MEMORY_METRICS_PORT: "0",
    MEMORY_MODEL_DIR: resolve(o.config.modelDir),
  };
  const config = loadConfig({}, env);
  const conversations = loadLocomo(o.data);
  const kafka: Kafka = kafkaClient(config, "bench-freshness");
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const producer: Producer = kafka.producer();
  const admin = kafka.admin();
  const stores = await openStores(config, "neo4j");
  const children: Child[] = [];
  let probe: Consumer | undefined;
  try {
    const topics = await ensurePipelineTopics(kafka, config);
    const codecs = await openPipelineCodecs(serdes, topics);
    await admin.connect();
    await producer.connect();
    log(`freshness: starting ${STAGES.join(", ")} (topic prefix ${prefix})`);
    if (o.stageLogs) mkdirSync(o.stageLogs, { recursive: true });
    for (const s of STAGES) children.push(startStage(s, env, o.stageLogs, o.stageNodeArgs));
    await Promise.all(children.map((c) => c.started));

    // --- 1. Freshness: produce at a fixed rate, watch the stores.
    const asTurn = (t: string, conversation: string, turn: (typeof conversations)[number]["turns"][number]): Turn => ({
      tenant: t,
      conversation,
      turnId: turn.turnId ?? "",
      speaker: turn.speaker,
      role: turn.role,
      text: turn.text,
      timestamp: turn.timestamp,
      sessionId: turn.sessionId,
    });
    const schedule: Turn[] = [];
    for (let i = 0; i < perConversation; i++)
      for (const c of conversations) {
        const t = c.turns[i];
        if (t) schedule.push(asTurn(tenant, c.id, t));
      }
    const sentAt = new Map<string, number>();
    const rawSeen = new Map<string, number>();
    const recordSeen = new Map<string, number>();
    const keyOfTurn = (t: { conversation: string; turnId: string }) => turnRowId(t.conversation, t.turnId);
    // The probe: when each turn's sensory output was written (its record's timestamp) and when a
    // read_committed consumer got it. A short fetch wait, so that the probe's own wait is not counted.
    const sensoryWritten = new Map<string, number>();
    const sensoryVisible = new Map<string, number>();
    probe = kafka.consumer({ groupId: `${prefix}bench-probe`, readUncommitted: false, maxWaitTimeInMs: 100 });
    await probe.connect();
    await probe.subscribe({ topic: topics.sensory, fromBeginning: true });
    await probe.run({
      eachMessage: async ({ message }) => {
        const now = Date.now();
        if (message.value === null) return;
        const d = await codecs.sensory.decode(message.value);
        if (!d.ok || d.value.tenant !== tenant) return;
        const k = keyOfTurn(d.value);
        sensoryWritten.set(k, Number(message.timestamp));
        sensoryVisible.set(k, now);
      },
    });
    let polling = true;
    let deadline = Number.POSITIVE_INFINITY;
    const poller = (async () => {
      while (polling || rawSeen.size < sentAt.size) {
        const pending = schedule.filter((t) => sentAt.has(keyOfTurn(t)) && !rawSeen.has(keyOfTurn(t)));
        if (pending.length > 0) {
          const [rows, vectors] = await Promise.all([
            stores.graph.getTurns(tenant, pending),
            stores.vectors.get(tenant, pending.map(keyOfTurn)),
          ]);
          const now = Date.now();
          const withVector = new Set(vectors.map((v) => v.id));
          for (const r of rows) if (withVector.has(keyOfTurn(r))) rawSeen.set(keyOfTurn(r), now);
        }
        if (!polling && rawSeen.size < sentAt.size && Date.now() > deadline) break;
        await sleep(POLL_MS);
      }
    })();
    const recordPoller = (async () => {
      while (polling) {
        let cursor: string | undefined;
        const now = Date.now();
        do {
          const page = await stores.graph.listRecords(tenant, { limit: 500, ...(cursor ? { cursor } : {}) });
          for (const r of page.records)
            for (const turnId of r.source.turnIds) {
              const k = turnRowId(r.source.conversation, turnId);
              if (!recordSeen.has(k)) recordSeen.set(k, now);
            }
          cursor = page.nextCursor;
        } while (cursor);
        await sleep(POLL_MS * 5);
      }
    })();
    log(`freshness: producing ${schedule.length} turns at ${rate}/s`);
    const started = Date.now();
    for (const [i, t] of schedule.entries()) {
      const due = started + (i * 1000) / rate;
      if (due > Date.now()) await sleep(due - Date.now());
      const value = await codecs.turns.encode(t);
      sentAt.set(keyOfTurn(t), Date.now());
      await producer.send({ topic: topics.turns, messages: [{ key: keyOf(t.tenant, t.conversation), value }] });
    }
    await producer.send({
      topic: topics.turns,
      messages: conversations.map((c) => ({
        key: keyOf(tenant, c.id),
        value: null,
        headers: { [CONTROL_HEADER]: "flush" },
      })),
    });
    await waitDrained(admin, prefix, topics);
    deadline = Date.now() + 10_000;
    await sleep(POLL_MS * 6);
    polling = false;
    await Promise.all([poller, recordPoller]);
    await probe.disconnect();
    probe = undefined;
    const rawLatency = [...rawSeen].map(([k, at]) => at - (sentAt.get(k) ?? at));
    const stageOf = (from: Map<string, number>, to: Map<string, number>): number[] =>
      [...to].flatMap(([k, at]) => {
        const f = from.get(k);
        return f === undefined ? [] : [at - f];
      });
    const rawTurnStages = {
      sensoryWritten: summary(stageOf(sentAt, sensoryWritten)),
      sensoryVisible: summary(stageOf(sensoryWritten, sensoryVisible)),
      indexed: summary(stageOf(sensoryVisible, rawSeen)),
    };
    const rel = (m: Map<string, number>, k: string): { at?: number } => {
      const v = m.get(k);
      return v === undefined ? {} : { at: v - started };
    };
    const timeline: TurnTimeline[] = schedule.map((t) => {
      const k = keyOfTurn(t);
      const at = (m: Map<string, number>) => rel(m, k).at;
      const entries = {
        sensoryWritten: at(sensoryWritten),
        sensoryVisible: at(sensoryVisible),
        raw: at(rawSeen),
        record: at(recordSeen),
      };
      return {
        turn: k,
        sent: (sentAt.get(k) ?? started) - started,
        ...Object.fromEntries(Object.entries(entries).filter(([, v]) => v !== undefined)),
      };
    });
    const recordLatency = [...recordSeen].filter(([k]) => sentAt.has(k)).map(([k, at]) => at - (sentAt.get(k) ?? at));

    // --- 2. Throughput: whole conversations at once, distributed and embedded, the same turns.
    let throughput: FreshnessResult["throughput"];
    // Without the turns phase 1 produced: the stage processes' embedding caches hold their texts,
    // and the embedded runtime below starts with empty ones, so those turns would flatter the
    // distributed run. The warm-up pass takes the next conversations, for the same reason.
    const count = o.throughputConversations ?? 1;
    const remainder = (from: number) =>
      conversations
        .slice(from, from + count)
        .map((c) => ({ ...c, turns: c.turns.slice(perConversation) }))
        .filter((c) => c.turns.length > 0);
    const picked = remainder(0);
    const warmUpWanted = o.throughputWarmUp ?? true;
    const warmUp = warmUpWanted && count > 0 ? remainder(count) : [];
    const warmUpTurns = warmUp.reduce((n, c) => n + c.turns.length, 0);
    if (picked.length > 0 && warmUpWanted && warmUp.length === 0)
      log("throughput: no other conversations in the data for a warm-up pass; measuring cold");
    const turnsOf = (t: string, cs: typeof picked): Turn[] => cs.flatMap((c) => c.turns.map((x) => asTurn(t, c.id, x)));
    /** Produces the conversations' turns at once and a flush; seconds until every stage has drained. */
    const throughDistributed = async (t: string, cs: typeof picked): Promise<number> => {
      const t0 = Date.now();
      const encoded = await Promise.all(
        turnsOf(t, cs).map(async (x) => ({
          key: keyOf(x.tenant, x.conversation),
          value: await codecs.turns.encode(x),
        })),
      );
      for (let i = 0; i < encoded.length; i += 100)
        await producer.send({ topic: topics.turns, messages: encoded.slice(i, i + 100) });
      await producer.send({
        topic: topics.turns,
        messages: cs.map((c) => ({ key: keyOf(t, c.id), value: null, headers: { [CONTROL_HEADER]: "flush" } })),
      });
      await waitDrained(admin, prefix, topics);
      return (Date.now() - t0) / 1000;
    };
    if (picked.length > 0) {
      const turns = turnsOf(throughputTenant, picked);
      let warmDistributed: number | undefined;
      if (warmUp.length > 0) {
        log(`throughput: warm-up pass, ${warmUpTurns} turns of other conversations`);
        warmDistributed = await throughDistributed(warmUpTenant, warmUp);
      }
      log(`throughput: ${turns.length} turns through the distributed pipeline`);
      const stageCpu = cpuSince(children.map((c) => [c.name, c.child.pid] as const));
      const serverCpu = cpuSince(
        Object.entries(infraServerPids(process.env.INFRA_WORK_DIR ?? join(ROOT, "infra", ".work"))),
      );
      const textsBefore = await Promise.all(children.map((c) => embeddedTextsOf(c.metricsUrl)));
      const distributedSeconds = await throughDistributed(throughputTenant, picked);
      const stageCpuSeconds = stageCpu();
      const serverCpuSeconds = serverCpu();
      const textsAfter = await Promise.all(children.map((c) => embeddedTextsOf(c.metricsUrl)));
      const stageEmbeddedTexts: Record<string, number> = {};
      children.forEach((c, i) => {
        const [before, after] = [textsBefore[i], textsAfter[i]];
        if (before !== undefined && after !== undefined) stageEmbeddedTexts[c.name] = after - before;
      });
      for (const c of children) await stopStage(c);
      log(`throughput: the same turns through the embedded runtime`);
      const dataDir = mkdtempSync(join(tmpdir(), "bench-fresh-"));
      try {
        const opened = await openEmbeddedEngine({ ...o.config, dataDir });
        try {
          const throughEmbedded = async (t: string, cs: typeof picked): Promise<number> => {
            const e0 = Date.now();
            for (const c of cs) {
              await opened.engine.ingest(t, c.id, c.turns);
              await opened.engine.flush(t, c.id);
            }
            await opened.engine.drain();
            return (Date.now() - e0) / 1000;
          };
          const warmEmbedded = warmUp.length > 0 ? await throughEmbedded(warmUpTenant, warmUp) : undefined;
          const cpu0 = process.cpuUsage();
          // Both models' texts when the second opinion is on, as the stage processes count them.
          const textsNow = () => opened.embedder.stats().texts + (opened.secondEmbedder?.stats().texts ?? 0);
          const texts0 = textsNow();
          const embeddedSeconds = await throughEmbedded(throughputTenant, picked);
          const cpu = process.cpuUsage(cpu0);
          const embeddedCpuSeconds = (cpu.user + cpu.system) / 1e6;
          const embeddedTexts = textsNow() - texts0;
          throughput = {
            conversations: picked.map((c) => c.id),
            turns: turns.length,
            distributedSeconds,
            embeddedSeconds,
            distributedTurnsPerSecond: turns.length / distributedSeconds,
            embeddedTurnsPerSecond: turns.length / embeddedSeconds,
            ratio: embeddedSeconds / distributedSeconds,
            stageCpuSeconds,
            ...(Object.keys(serverCpuSeconds).length > 0 ? { serverCpuSeconds } : {}),
            embeddedCpuSeconds,
            stageEmbeddedTexts,
            embeddedTexts,
            ...(warmDistributed !== undefined && warmEmbedded !== undefined
              ? {
                  warmUp: {
                    conversations: warmUp.map((c) => c.id),
                    turns: warmUpTurns,
                    distributedSeconds: warmDistributed,
                    embeddedSeconds: warmEmbedded,
                    ratio: warmEmbedded / warmDistributed,
                  },
                }
              : {}),
          };
        } finally {
          await opened.close();
        }
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }

    const result: FreshnessResult = {
      environment: { ...runEnvironment(), loadavg: loadavg() },
      rate,
      producedTurns: schedule.length,
      rawTurn: summary(rawLatency),
      rawTurnMissing: schedule.length - rawSeen.size,
      record: summary(recordLatency),
      rawTurnStages,
      timeline,
      startedAt: started,
      ...(throughput ? { throughput } : {}),
    };
    const markdown = freshnessMarkdown(result);
    const files = o.out ? writeReportFiles(o.out, "freshness", result.environment.date, markdown, result) : [];
    return { result, markdown, files };
  } catch (err) {
    for (const c of children) log(`--- ${c.name}\n${c.tail.join("\n")}`);
    throw err;
  } finally {
    await probe?.disconnect().catch(() => undefined);
    await Promise.allSettled(children.map(stopStage));
    for (const t of [tenant, throughputTenant, warmUpTenant]) {
      await stores.graph.deleteTenant(t).catch(() => undefined);
      await stores.vectors.deleteTenant(t).catch(() => undefined);
    }
    await stores.close().catch(() => undefined);
    await producer.disconnect().catch(() => undefined);
    await cleanKafka(admin, prefix, config.kafka.registryUrl, serdes);
  }
};

/** Removes the run's topics and registry subjects (best effort). */
const cleanKafka = async (admin: Admin, prefix: string, registryUrl: string, serdes: RegistrySerdes): Promise<void> => {
  try {
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
    if (topics.length > 0) await admin.deleteTopics({ topics });
  } catch {
    // best effort
  }
  await admin.disconnect().catch(() => undefined);
  await serdes.close().catch(() => undefined);
  try {
    const subjects = (await (await fetch(`${registryUrl}/subjects`)).json()) as string[];
    for (const s of subjects.filter((x) => x.startsWith(prefix))) {
      await fetch(`${registryUrl}/subjects/${encodeURIComponent(s)}`, { method: "DELETE" });
      await fetch(`${registryUrl}/subjects/${encodeURIComponent(s)}?permanent=true`, { method: "DELETE" });
    }
  } catch {
    // best effort
  }
};

export const freshnessMarkdown = (r: FreshnessResult): string => {
  const ms = (v: number | undefined) => (v === undefined ? "–" : fmt(v, 0));
  const lines = [
    `# Freshness: produce → queryable (${r.producedTurns} turns at ${r.rate}/s; ${r.environment.cpus} CPUs, load ${r.environment.loadavg.map((x) => x.toFixed(1)).join(" ")})`,
    "",
    markdownTable(
      ["what", "n", "p50 ms", "p95 ms", "max ms"],
      [
        [
          "produce → raw turn queryable (row + vector)",
          String(r.rawTurn.n),
          ms(r.rawTurn.p50),
          ms(r.rawTurn.p95),
          ms(r.rawTurn.max),
        ],
        [
          "produce → a record citing the turn queryable",
          String(r.record.n),
          ms(r.record.p50),
          ms(r.record.p95),
          ms(r.record.max),
        ],
      ],
    ),
  ];
  if (r.rawTurnMissing > 0) lines.push("", `${r.rawTurnMissing} raw turns were never seen.`);
  if (r.rawTurnStages) {
    const s = r.rawTurnStages;
    const row = (what: string, l: LatencySummary) => [what, String(l.n), ms(l.p50), ms(l.p95), ms(l.max)];
    lines.push(
      "",
      "Where the raw-turn latency goes (a read_committed probe on the sensory topic):",
      "",
      markdownTable(
        ["step", "n", "p50 ms", "p95 ms", "max ms"],
        [
          row("produce → sensory wrote the turn (fetch, compress, embed)", s.sensoryWritten),
          row("written → read_committed consumer has it (transaction, fetch)", s.sensoryVisible),
          row("consumer has it → raw turn queryable (store writes, poll)", s.indexed),
        ],
      ),
    );
  }
  if (r.throughput) {
    const t = r.throughput;
    lines.push(
      "",
      markdownTable(
        ["runtime", "turns", "seconds", "turns/s"],
        [
          [
            "distributed (4 stage processes, Neo4j)",
            String(t.turns),
            fmt(t.distributedSeconds, 1),
            fmt(t.distributedTurnsPerSecond, 2),
          ],
          ["embedded (SQLite + HNSW)", String(t.turns), fmt(t.embeddedSeconds, 1), fmt(t.embeddedTurnsPerSecond, 2)],
        ],
      ),
      "",
      `distributed / embedded throughput: ${fmt(t.ratio, 2)} (${t.conversations.join(", ")}${t.warmUp ? ", after the warm-up pass" : ", cold: no warm-up pass"})`,
    );
    if (t.warmUp) {
      const w = t.warmUp;
      lines.push(
        "",
        `Warm-up pass before it (${w.conversations.join(", ")}, ${w.turns} turns, another tenant kept meanwhile): distributed ${fmt(w.distributedSeconds, 1)} s, embedded ${fmt(w.embeddedSeconds, 1)} s, ratio ${fmt(w.ratio, 2)} (cold code, and stores that start empty).`,
      );
    }
    if (t.stageCpuSeconds && Object.keys(t.stageCpuSeconds).length > 0) {
      const stages = Object.entries(t.stageCpuSeconds);
      const total = stages.reduce((n, [, v]) => n + v, 0);
      lines.push(
        "",
        `CPU seconds in the throughput run: ${stages.map(([k, v]) => `${k} ${fmt(v, 1)}`).join(", ")} (stage processes ${fmt(total, 1)}, without Kafka and Neo4j)${t.embeddedCpuSeconds !== undefined ? `; embedded runtime ${fmt(t.embeddedCpuSeconds, 1)}` : ""}.`,
      );
    }
    if (t.serverCpuSeconds && t.stageCpuSeconds) {
      const servers = Object.entries(t.serverCpuSeconds);
      const all = [...Object.values(t.stageCpuSeconds), ...servers.map(([, v]) => v)].reduce((n, v) => n + v, 0);
      const cores = r.environment.cpus;
      // All of the distributed run's CPU on this machine's cores: its wall time cannot be shorter.
      const floor = all / cores;
      lines.push(
        "",
        `Servers' CPU seconds in the throughput run (this checkout's infra): ${servers.map(([k, v]) => `${k} ${fmt(v, 1)}`).join(", ")}; the distributed run in all (stage processes + servers) ${fmt(all, 1)} CPU s, on ${cores} cores at least ${fmt(floor, 1)} s of wall time (a ratio of ${fmt(t.embeddedSeconds / floor, 2)} at most against this embedded run).`,
      );
    }
    if (t.stageEmbeddedTexts && Object.keys(t.stageEmbeddedTexts).length > 0) {
      const stages = Object.entries(t.stageEmbeddedTexts);
      const total = stages.reduce((n, [, v]) => n + v, 0);
      lines.push(
        "",
        `Texts embedded in the throughput run: ${stages.map(([k, v]) => `${k} ${v}`).join(", ")} (stage processes ${total})${t.embeddedTexts !== undefined ? `; embedded runtime ${t.embeddedTexts}` : ""}.`,
      );
    }
  }
  return `${lines.join("\n")}\n`;
};

const positiveNumber = (v: string): number => {
  const n = Number(v);
  if (!(Number.isFinite(n) && n > 0)) throw new InvalidArgumentError("expected a positive number");
  return n;
};

const wholeNumber = (v: string): number => {
  const n = Number(v);
  if (!(Number.isInteger(n) && n >= 0)) throw new InvalidArgumentError("expected a whole number");
  return n;
};

/** `memory bench freshness` (registered under `memory bench` by cli.ts). */
export const registerFreshnessCommand = (bench: Command, config: () => Config): void => {
  bench
    .command("freshness")
    .description(
      'produce → raw turn / record queryable through Kafka (p50/p95), and distributed vs embedded throughput in the same run; needs the infra (eval "$(bash infra/env.sh)")',
    )
    .option("--data <file>", "LoCoMo-format file the turns come from", "../shared/data/locomo-dev.json")
    .option("--turns <n>", "turns of each conversation in the freshness phase", wholeNumber, 40)
    .option("--rate <n>", "turns per second produced in the freshness phase", positiveNumber, 4)
    .option(
      "--throughput-conversations <n>",
      "conversations in the throughput phase, after the turns the freshness phase produced (0: none)",
      wholeNumber,
      1,
    )
    .option(
      "--no-throughput-warm-up",
      "measure the throughput phase cold: no warm-up pass of other conversations through both runtimes first",
    )
    .option("--out <dir>", "output folder for the markdown and JSON reports", "bench-out")
    .option("--stage-logs <dir>", "write each stage process's output to <dir>/<stage>.log")
    .option(
      "--stage-node-args <flags>",
      'extra node flags of the stage processes, e.g. "--cpu-prof --cpu-prof-dir=prof"',
    )
    .action(
      async (o: {
        data: string;
        turns: number;
        rate: number;
        throughputConversations: number;
        throughputWarmUp: boolean;
        out: string;
        stageLogs?: string;
        stageNodeArgs?: string;
      }) => {
        const { markdown, files } = await runFreshnessBench({
          config: config(),
          data: o.data,
          turns: o.turns,
          rate: o.rate,
          throughputConversations: o.throughputConversations,
          throughputWarmUp: o.throughputWarmUp,
          out: o.out,
          ...(o.stageLogs ? { stageLogs: o.stageLogs } : {}),
          ...(o.stageNodeArgs ? { stageNodeArgs: o.stageNodeArgs.split(/\s+/).filter(Boolean) } : {}),
        });
        console.log(markdown);
        if (files.length > 0) console.log(`written: ${files.join(", ")}`);
      },
    );
};
