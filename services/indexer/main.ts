/**
 * Indexer stage process (distributed runtime): memory.records.v1 -> the stores (MEMORY_STORE=
 * embedded|neo4j, MEMORY_VECTOR_STORE) and memory.update-queue.v1. A sink: store writes are
 * idempotent upserts, the update-queue entries and the consumed offsets commit in one transaction.
 * MEMORY_METRICS_PORT defaults to 9104.
 *
 * Beside it, in the same process (the same stores and embedding cache), its raw-turn consumer:
 * memory.sensory.v1 -> raw turns in the stores as they arrive (raw-turn-stage.ts, issue 18), its own
 * consumer group (memory-indexer-raw-turns). MEMORY_RAW_TURNS_AT_ONCE=false leaves it out (raw turns
 * then become queryable at segment close only, as before).
 */
import { setTimeout as delay } from "node:timers/promises";
import {
  candidateSettingsFrom,
  openSecondOpinionEmbedder,
  openStageEmbedderThread,
  STAGE_EMBEDDER_THREADS,
  stageEmbedder,
} from "../composition/parts.ts";
import { openStores } from "../composition/stores.ts";
import { runStageProcess } from "../core/adapters/kafka/process.ts";
import { loadProcessConfig } from "../core/config.ts";
import { setupTracing } from "../platform/tracing.ts";
import { FreshnessGate } from "./freshness-gate.ts";
import { indexerStage } from "./kafka-handler.ts";
import { rawTurnStage } from "./raw-turn-stage.ts";
import { SlicedEmbedder } from "./sliced-embedder.ts";
import { warmUpStores } from "./warm-up.ts";

/** How long the stage start waits for the store warm-up at most. */
const WARM_UP_WAIT_MS = 20_000;

const config = loadProcessConfig();
await setupTracing("indexer"); // MEMORY_TRACING (docs/tracing.md); off by default
await runStageProcess({
  stage: "indexer",
  config,
  defaultMetricsPort: 9104,
  build: async ({ codecs, metrics, log }) => {
    // On a worker thread: the records consumer's next-segment embedding overlaps the current
    // segment's store round trips only when the model does not hold the event loop (parts.ts).
    // A dead worker thread must not turn healthy segments into dead letters (its errors are
    // nobody's value's fault, and the runtime dead-letters unrecognised ones after a few tries):
    // the process exits at once, as it did when the model crashed on the main thread, and what it
    // had not committed is consumed again after the restart.
    const model = await openStageEmbedderThread(config, (err) => {
      log("error", "embedding worker thread failed; exiting", { error: err.message });
      process.exit(1);
    });
    const second = await openSecondOpinionEmbedder(config, {
      defaultThreads: STAGE_EMBEDDER_THREADS,
      onFailure: (err) => {
        log("error", "second-opinion worker thread failed; exiting", { error: err.message });
        process.exit(1);
      },
    });
    // Counted with the first model's texts (memory_embedded_texts_total is the process's model work)
    // and cached apart from them.
    const secondEmbedder = second
      ? {
          secondEmbedder: stageEmbedder(
            second,
            (calls, texts) => metrics.embedding(calls, texts),
            config.cache.embeddingEntries,
          ),
        }
      : {};
    const stores = await openStores(config);
    log("info", "stores opened", { store: stores.kind, where: stores.label });
    // One cache for both consumers: a turn embedded on arrival is not embedded again at segment close.
    // Its model calls are counted (memory_embedded_texts_total) like the segmenter's: the bench says
    // which stage embeds what.
    const embedder = stageEmbedder(
      model,
      (calls, texts) => metrics.embedding(calls, texts),
      config.cache.embeddingEntries,
    );
    // The records consumer embeds in slices, so that an arriving raw turn waits for one slice of
    // a segment's record texts at most, not all of them (sliced-embedder.ts). Without the
    // raw-turn consumer there is nobody to let in between: one call, as before.
    // And its steps wait while raw-turn writes run (freshness-gate.ts): those make turns queryable.
    const gate = config.kafka.rawTurnsAtOnce ? new FreshnessGate(config.kafka.rawTurnsFirstMaxWaitMs) : undefined;
    const yieldTo = gate ? () => gate.idle() : undefined;
    const recordsEmbedder = gate ? new SlicedEmbedder(embedder, config.kafka.indexerEmbedSlice, yieldTo) : embedder;
    const onErased = (e: object) => log("info", "erased again", { ...e });
    const candidates = candidateSettingsFrom(config);
    // Neo4j plans and compiles each statement on its first run: that first run happens here, on a
    // scratch tenant, not on the first turns and segments of a Neo4j just started (warm-up.ts).
    // Awaited for WARM_UP_WAIT_MS at most (cold: 11-17 s measured): the ops server and the signal
    // handlers start after build(), and a Neo4j that is down must not hold the stage back; a
    // longer warm-up goes on beside the consumers.
    if (stores.kind === "neo4j") {
      const warm = warmUpStores({
        graph: stores.graph,
        vectors: stores.vectors,
        embedder: model,
        ...secondEmbedder,
        candidates,
      }).then(
        ({ ms, leftovers }) =>
          log("info", "stores warmed up", {
            ms: Math.round(ms),
            ...(leftovers.length > 0 ? { erasedLeftovers: leftovers } : {}),
          }),
        (err: unknown) =>
          log("warn", "store warm-up failed", { error: err instanceof Error ? err.message : String(err) }),
      );
      await Promise.race([warm, delay(WARM_UP_WAIT_MS, undefined, { ref: false })]);
    }
    return {
      handler: indexerStage({
        input: codecs.records,
        output: codecs.updateQueue,
        graph: stores.graph,
        vectors: stores.vectors,
        embedder: recordsEmbedder,
        ...secondEmbedder,
        candidates,
        ...(yieldTo ? { yieldTo } : {}),
        onIndexed: (n) => metrics.recordsWritten(n),
        onErased,
        partitionsAtOnce: config.kafka.recordsPartitionsAtOnce,
      }),
      companions: config.kafka.rawTurnsAtOnce
        ? [
            rawTurnStage({
              input: codecs.sensory,
              output: codecs.updateQueue,
              graph: stores.graph,
              vectors: stores.vectors,
              embedder,
              ...secondEmbedder,
              onErased,
              partitionsAtOnce: config.kafka.rawTurnPartitionsAtOnce,
              ...(gate ? { gate } : {}),
            }),
          ]
        : [],
      close: async () => {
        await stores.close();
        await model.close();
        await second?.close();
      },
    };
  },
});
