// Exactly-once of the stateful stages when they run as several instances (issue 12), real Kafka,
// schema registry and Neo4j. The segmenter, encoder and indexer run as child processes on a
// run-unique prefix; their first input (the sensory topic) is fed with the compressed turns of an
// uninterrupted in-process reference run (reference.ts: six copies of the bundled LoCoMo sample
// under six tenants), in small transactions like the sensory stage's, then each conversation is
// flushed. Once every group has committed its input to the end, the segments and records topics
// read with read_committed hold exactly the reference's items, in order per conversation, none
// twice, and Neo4j holds exactly the reference's record ids and segments.
//
// - zombie: two instances per stage. Per stage, the first instance to reach a transaction's
//   AddOffsetsToTxn request (kafkajs debug log) after a few commits is SIGSTOPped there: its
//   transaction is open, its outputs written. It stays stopped until its peer has been given all
//   partitions (the session timeout passed and the group rebalanced), then is resumed: it goes on
//   and tries to commit; its producer must be fenced, and it must rejoin with a new member id.
// - scale: one instance per stage; a third of the input; two more instances per stage; another
//   third; the first instance and one of the new ones stop (SIGTERM); the rest and the flushes.
//
// Skips unless KAFKA_BROKERS, SCHEMA_REGISTRY_URL and NEO4J_URI are set and the embedder exists.
import assert from "node:assert/strict";
import { test } from "node:test";
import { skip } from "../distributed/helpers.ts";
import { until } from "./helpers.ts";
import {
  type Instance,
  type LineHook,
  PIPE,
  runScenario,
  type StageName,
  stopInstance,
  waitStarted,
  ZOMBIE_AFTER,
} from "./stage-harness.ts";

test("a stage instance paused past the session timeout, then resumed mid-commit: fenced, result equals the reference", {
  skip,
  timeout: 900_000,
}, async (t) => {
  await runScenario(t, "zombie", async (h) => {
    const zombies = new Map<StageName, { inst: Instance; at: number; peerAt: number; resumed: boolean }>();
    const peerOf = (inst: Instance): Instance | undefined =>
      h.instances.find((x) => x.stage === inst.stage && x !== inst);
    const hook: LineHook = (inst, e) => {
      if (zombies.has(inst.stage) || inst.committedInputs < ZOMBIE_AFTER[inst.stage]) return;
      if (!String(e.message ?? "").includes("Request AddOffsetsToTxn(")) return;
      zombies.set(inst.stage, {
        inst,
        at: inst.assignments.length,
        peerAt: peerOf(inst)?.assignments.length ?? 0,
        resumed: false,
      });
      inst.child.kill("SIGSTOP");
    };
    for (const stage of PIPE) for (const i of [1, 2]) h.start(stage, `${stage}-${i}`, hook);
    await waitStarted(h.instances);
    await h.feed(0, h.length);
    // Each zombie is resumed once its peer holds every partition (the group evicted it).
    await until(
      "a zombie of every stage, resumed after its peer took its partitions",
      () => {
        for (const [stage, z] of zombies) {
          if (z.resumed) continue;
          const peer = peerOf(z.inst);
          if (peer?.assignments.slice(z.peerAt).some((a) => a.partitions.length === 3)) {
            z.at = z.inst.assignments.length;
            z.inst.child.kill("SIGCONT");
            z.resumed = true;
            t.diagnostic(`${stage}: ${z.inst.id} stopped after ${z.inst.committedInputs} inputs, resumed`);
          }
        }
        return zombies.size === PIPE.length && [...zombies.values()].every((z) => z.resumed);
      },
      480_000,
    );
    await h.flush();
    for (const [stage, z] of zombies) {
      await until(
        `the ${stage} zombie to rejoin with a new member id`,
        () => z.inst.assignments.slice(z.at).some((a) => a.rejoined),
        120_000,
      );
      assert.equal(z.inst.exited, false, `the ${stage} zombie carries on after being fenced`);
      t.diagnostic(`${stage}: zombie ${z.inst.id} fenced in its log: ${z.inst.fenced}`);
    }
  });
});

test("scale out 1 → 3 instances per stage and back to 1 while ingesting: result equals the reference", {
  skip,
  timeout: 900_000,
}, async (t) => {
  await runScenario(t, "scale", async (h) => {
    const first = PIPE.map((stage) => h.start(stage, `${stage}-1`));
    await waitStarted(first);
    const third = Math.ceil(h.length / 3);
    await h.feed(0, third);
    // Only the segmenter is sure to have output by then (a segment closes when the gate says so).
    const segmenter = first[0] as Instance;
    await until(
      "the segmenter to commit the first third",
      () => segmenter.committedInputs >= third * h.convs.length,
      300_000,
    );
    const more = PIPE.flatMap((stage) => [h.start(stage, `${stage}-2`), h.start(stage, `${stage}-3`)]);
    await waitStarted(more);
    await until(
      "the new instances to get partitions",
      () => more.every((i) => (i.assignments.at(-1)?.partitions.length ?? 0) > 0),
      300_000,
    );
    await h.feed(third, 2 * third);
    const segmenters = (): number =>
      h.instances.filter((i) => i.stage === "segmenter").reduce((n, i) => n + i.committedInputs, 0);
    await until("the segmenters to commit the second third", () => segmenters() >= 2 * third * h.convs.length, 300_000);
    t.diagnostic(
      `committed inputs at 3 instances: ${h.instances.map((i) => `${i.id}=${i.committedInputs}`).join(" ")}`,
    );
    // Scale in: the first instance of each stage and one of the new ones stop gracefully.
    const leaving = [...first, ...more.filter((i) => i.id.endsWith("-2"))];
    await Promise.all(leaving.map((i) => stopInstance(i, "SIGTERM")));
    for (const i of leaving) assert.equal(i.child.exitCode, 0, `${i.id} stopped gracefully`);
    await h.feed(2 * third, h.length);
    await h.flush();
    t.diagnostic(`committed inputs per instance: ${h.instances.map((i) => `${i.id}=${i.committedInputs}`).join(" ")}`);
  });
});
