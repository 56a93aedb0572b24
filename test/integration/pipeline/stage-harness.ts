/**
 * Runs the stateful stages (segmenter → encoder → indexer) as child processes, any number of
 * instances each, against the in-process reference (reference.ts), and checks the result: the
 * segments and records topics read with read_committed and the Neo4j store equal the reference
 * (same ids and counts, none twice, none missing), and the dead-letter topic is empty. Used by
 * scale.test.ts and outage.test.ts (issue 12).
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import type { TestContext } from "node:test";
import type { Message } from "kafkajs";
import { openStores } from "../../../services/composition/stores.ts";
import { ensurePipelineTopics, kafkaClient } from "../../../services/core/adapters/kafka/process.ts";
import { openPipelineCodecs, RegistrySerdes } from "../../../services/core/adapters/kafka/serde.ts";
import { CONTROL_HEADER, type TopicNames } from "../../../services/core/adapters/kafka/topics.ts";
import { loadConfig } from "../../../services/core/config.ts";
import { ROOT } from "../distributed/helpers.ts";
import { deleteSubjects, deleteTopics, readAll, runPrefix, testEnv, until, waitGroupsDrained } from "./helpers.ts";
import {
  type Checked,
  type Conversation,
  computeReference,
  expectedOf,
  REFERENCE_ENV,
  readShaped,
} from "./reference.ts";

export type StageName = "sensory" | "segmenter" | "encoder" | "indexer";
export const PIPE: readonly StageName[] = ["segmenter", "encoder", "indexer"];
const INPUT_OF: Record<StageName, keyof Pick<TopicNames, "turns" | "sensory" | "segments" | "records">> = {
  sensory: "turns",
  segmenter: "sensory",
  encoder: "segments",
  indexer: "records",
};
const MAX_CHUNK: Record<StageName, number> = { sensory: 4, segmenter: 4, encoder: 1, indexer: 1 };
/** Commits of an instance before it may be the zombie (so that it has state and offsets behind it). */
export const ZOMBIE_AFTER: Record<StageName, number> = { sensory: 2, segmenter: 6, encoder: 2, indexer: 2 };
const CONVERSATIONS = 6;

export interface Instance {
  stage: StageName;
  id: string;
  child: ChildProcess;
  log: string[];
  started: boolean;
  exited: boolean;
  committedInputs: number;
  /** Each "partitions assigned" line: the partitions and whether it was a rejoin (new member id). */
  assignments: { partitions: number[]; rejoined: boolean }[];
  fenced: boolean;
  /** Each "state restored" line: partitions, changelog entries read, milliseconds. */
  restores: { partitions: number[]; entries: number; ms: number }[];
  /** Fields of the "started" line (metrics: the ops server's URL). */
  startedFields?: Record<string, unknown>;
}

export type LineHook = (inst: Instance, e: Record<string, unknown>) => void;

export const startInstance = (stage: StageName, id: string, env: NodeJS.ProcessEnv, hook?: LineHook): Instance => {
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "services", stage, "main.ts")], {
    cwd: ROOT,
    env: {
      ...env,
      MEMORY_KAFKA_INSTANCE_ID: id,
      MEMORY_STAGE_MAX_CHUNK: String(MAX_CHUNK[stage]),
      ...(hook ? { KAFKAJS_DEBUG: "1" } : {}),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const inst: Instance = {
    stage,
    id,
    child,
    log: [],
    started: false,
    exited: false,
    committedInputs: 0,
    assignments: [],
    restores: [],
    fenced: false,
  };
  let buf = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    buf += chunk.toString();
    let i = buf.indexOf("\n");
    while (i >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      i = buf.indexOf("\n");
      let e: Record<string, unknown>;
      try {
        e = JSON.parse(line) as Record<string, unknown>;
      } catch {
        inst.log.push(line);
        continue;
      }
      if (e.level !== "DEBUG" && e.msg !== "committed") inst.log.push(line);
      if (/fenced|old epoch|INVALID_PRODUCER_EPOCH|PRODUCER_FENCED/i.test(line)) inst.fenced = true;
      if (e.msg === "started") {
        inst.started = true;
        inst.startedFields = e;
      }
      if (e.msg === "committed") inst.committedInputs += Number(e.inputs ?? 0);
      if (e.msg === "state restored")
        inst.restores.push({
          partitions: (e.partitions as number[]) ?? [],
          entries: Number(e.entries ?? 0),
          ms: Number(e.ms ?? 0),
        });
      if (e.msg === "partitions assigned")
        inst.assignments.push({ partitions: (e.partitions as number[]) ?? [], rejoined: e.rejoined === true });
      hook?.(inst, e);
    }
  });
  child.stderr?.on("data", (chunk: Buffer) => inst.log.push(chunk.toString()));
  child.on("close", () => {
    inst.exited = true;
  });
  return inst;
};

export const stopInstance = async (inst: Instance, signal: NodeJS.Signals, ms = 60_000): Promise<void> => {
  if (inst.exited) return;
  if (signal !== "SIGCONT") inst.child.kill("SIGCONT");
  inst.child.kill(signal);
  await until(`${inst.stage}/${inst.id} to exit`, () => inst.exited, ms);
};

export const waitStarted = (insts: readonly Instance[]): Promise<void> =>
  until(
    `${insts.map((s) => `${s.stage}/${s.id}`).join(", ")} to start`,
    () => {
      const dead = insts.find((s) => s.exited);
      if (dead)
        throw new Error(`${dead.stage}/${dead.id} exited before it started:\n${dead.log.slice(-20).join("\n")}`);
      return insts.every((s) => s.started);
    },
    180_000,
  );

export interface Harness {
  env: NodeJS.ProcessEnv;
  instances: Instance[];
  start(stage: StageName, id: string, hook?: LineHook, env?: Record<string, string>): Instance;
  /** Feeds items [from, to) of each conversation's sensory turns, interleaved, 3 per transaction. */
  feed(from: number, to: number): Promise<void>;
  flush(): Promise<void>;
  convs: Conversation[];
  /** Sensory turns per conversation. */
  length: number;
}

export const runScenario = async (
  t: TestContext,
  name: string,
  scenario: (h: Harness) => Promise<void>,
): Promise<void> => {
  const run = randomUUID().slice(0, 8);
  const convs = await computeReference(
    Array.from({ length: CONVERSATIONS }, (_, i) => ({ tenant: `${name}-${run}-${i}`, conversation: `c${i}` })),
  );
  const prefix = runPrefix(name);
  const env = testEnv(prefix, {
    ...REFERENCE_ENV,
    MEMORY_METRICS_PORT: "0",
    MEMORY_MODEL_DIR: join(ROOT, "models"),
    MEMORY_STORE: "neo4j",
    // The records path alone: these scenarios count each instance's commits and partition
    // assignments from its log lines, which the raw-turn consumer would add to (raw-turns.test.ts).
    MEMORY_RAW_TURNS_AT_ONCE: "false",
  });
  const config = loadConfig({}, env);
  const kafka = kafkaClient(config, `${name}-test`);
  const serdes = new RegistrySerdes(config.kafka.registryUrl);
  const feeder = kafka.producer({ transactionalId: `${prefix}feeder`, idempotent: true, maxInFlightRequests: 1 });
  const instances: Instance[] = [];
  const started = Date.now();
  try {
    const topics = await ensurePipelineTopics(kafka, config);
    const codecs = await openPipelineCodecs(serdes, topics);
    const inputs = await Promise.all(convs.map((c) => Promise.all(c.sensory.map((s) => codecs.sensory.encode(s)))));
    // The registry may be stopped mid-run (outage.test.ts) and comes back empty: the writer schemas
    // the checks below read with are fetched now, into the deserializer's cache.
    const [c0] = convs;
    if (c0?.segments[0]) await codecs.segments.decode(await codecs.segments.encode(c0.segments[0]));
    if (c0?.records[0]) await codecs.records.decode(await codecs.records.encode(c0.records[0]));
    await feeder.connect();
    const send = async (messages: Message[]): Promise<void> => {
      const tx = await feeder.transaction();
      try {
        if (messages.length > 0) await tx.send({ topic: topics.sensory, messages });
        await tx.commit();
      } catch (err) {
        await tx.abort().catch(() => undefined);
        throw err;
      }
    };
    const h: Harness = {
      env,
      instances,
      convs,
      length: Math.max(...inputs.map((x) => x.length)),
      start: (stage, id, hook, extra) => {
        const inst = startInstance(stage, id, { ...env, ...extra }, hook);
        instances.push(inst);
        return inst;
      },
      feed: async (from, to) => {
        for (let i = from; i < to; i += 3)
          await send(
            convs.flatMap((c, k) =>
              (inputs[k] ?? []).slice(i, Math.min(i + 3, to)).map((value) => ({ key: c.key, value })),
            ),
          );
      },
      flush: () => send(convs.map((c) => ({ key: c.key, value: null, headers: { [CONTROL_HEADER]: "flush" } }))),
    };
    await scenario(h);
    await waitGroupsDrained(
      kafka,
      PIPE.map((s) => ({ groupId: `${prefix}memory-${s}`, topic: topics[INPUT_OF[s]] })),
      300_000,
    );
    const seconds = (Date.now() - started) / 1000;
    const turns = convs.reduce((n, c) => n + c.sensory.length, 0);
    t.diagnostic(`${turns} turns through segmenter → encoder → indexer in ${seconds.toFixed(1)} s (with setup)`);
    for (const inst of instances) if (!inst.exited) await stopInstance(inst, "SIGTERM");
    for (const stage of PIPE) {
      const restores = instances.filter((i) => i.stage === stage).flatMap((i) => i.restores);
      if (restores.length === 0) continue;
      const perPartition = restores.map((r) => r.ms / Math.max(1, r.partitions.length));
      t.diagnostic(
        `${stage}: ${restores.length} restores, ${restores.reduce((n, r) => n + r.entries, 0)} changelog entries, ` +
          `ms per partition: max ${Math.max(...perPartition).toFixed(0)}, ` +
          `mean ${(perPartition.reduce((a, b) => a + b, 0) / perPartition.length).toFixed(0)}`,
      );
    }

    let aborted = 0;
    for (const topic of [topics.segments, topics.records])
      aborted += (await readAll(kafka, topic, 120_000, true)).length - (await readAll(kafka, topic, 120_000)).length;
    t.diagnostic(`${aborted} messages of aborted (fenced) transactions on the output topics`);
    const dead = await readAll(kafka, topics.dlq, 120_000);
    assert.equal(dead.length, 0, `no dead letters (${dead.length} found)`);
    for (const which of ["segments", "records"] as Checked[]) {
      const got = await readShaped(kafka, topics, codecs, which);
      const expected = convs.reduce((n, c) => n + expectedOf(c, which).length, 0);
      assert.equal(got.total, expected, `${which}: none twice, none missing`);
      for (const c of convs) assert.deepEqual(got.byKey.get(c.key) ?? [], expectedOf(c, which), `${which} of ${c.key}`);
    }
    const stores = await openStores(config, "neo4j");
    try {
      for (const c of convs) {
        const ids: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await stores.graph.listRecords(c.tenant, {
            limit: 200,
            includeSuperseded: true,
            ...(cursor ? { cursor } : {}),
          });
          ids.push(...page.records.map((r) => r.id));
          cursor = page.nextCursor;
        } while (cursor);
        const expected = [...new Set(c.records.flatMap((e) => e.records.map((r) => r.id)))].sort();
        assert.ok(expected.length > 0, "the reference has records");
        assert.deepEqual([...ids].sort(), expected, `record ids of ${c.tenant}`);
        assert.equal(await stores.graph.countRecords(c.tenant), expected.length, `records of ${c.tenant}`);
        assert.equal(await stores.graph.countSegments(c.tenant), c.segments.length, `segments of ${c.tenant}`);
      }
    } finally {
      for (const c of convs) {
        await stores.graph.deleteTenant(c.tenant).catch(() => undefined);
        await stores.vectors.deleteTenant(c.tenant).catch(() => undefined);
      }
      await stores.close();
    }
  } catch (err) {
    for (const s of instances) process.stderr.write(`--- ${s.stage}/${s.id} log\n${s.log.slice(-25).join("\n")}\n`);
    throw err;
  } finally {
    await Promise.allSettled(instances.map((s) => stopInstance(s, "SIGKILL")));
    await feeder.disconnect().catch(() => undefined);
    await serdes.close().catch(() => undefined);
    await deleteTopics(kafka, prefix);
    await deleteSubjects(prefix);
  }
};
