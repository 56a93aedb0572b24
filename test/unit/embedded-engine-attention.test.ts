/**
 * The embedded engine's segmenter with attention boundaries (docs/segmenter.md): an inbox batch's
 * turn pairs go to the attention model in one call beside the embedding call, the segmenter cuts
 * where attention dips (mode attention) and logs the check in every decision; mode gate never
 * calls the model. The model is scripted (test/helpers/scripted-attention.ts); the real one is
 * tested in onnx-attention.test.ts.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, describe, it } from "node:test";
import { HashingEmbedder } from "../../services/core/adapters/hash/embedder.ts";
import { loadConfig } from "../../services/core/config.ts";
import type { TurnInput } from "../../services/core/requests.ts";
import type { Segment } from "../../services/core/types.ts";
import { engineSettingsFrom, openEmbeddedEngine } from "../../services/embedded/open.ts";
import type { BoundaryMode } from "../../services/segmenter/attention-rule.ts";
import { Closer } from "../helpers/closer.ts";
import { scriptedAttention } from "../helpers/scripted-attention.ts";

const TEXTS = [
  "Ben planted tomatoes in the garden on Monday",
  "Ana asked how many tomatoes Ben planted there",
  "Ben said twelve tomatoes and some basil too",
  "Ana wanted to know about the basil variety",
  "Ben said it was Genovese basil from the market",
  "Ana liked that and asked about watering the garden",
  "NEW by the way my sister moves to Lisbon in June",
  "Ben asked whether the sister found a flat yet",
];
const turns = (): TurnInput[] =>
  TEXTS.map((text, i) => ({
    turnId: `t${i}`,
    speaker: i % 2 ? "Ana" : "Ben",
    text,
    timestamp: new Date(Date.UTC(2024, 4, 6, 10, i)).toISOString(),
    sessionId: "s1",
    role: "user" as const,
  }));

describe("embedded engine with attention boundaries (scripted model)", () => {
  const dirs: string[] = [];
  const engines = new Closer();
  afterEach(() => engines.closeAll());
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const run = async (boundaries: BoundaryMode) => {
    const dir = mkdtempSync(join(tmpdir(), "memory-engine-attn-"));
    dirs.push(dir);
    const model = scriptedAttention((_prev, cur) => (cur.includes("NEW") ? 0.02 : 0.4 + (cur.length % 5) / 50));
    const segments: Segment[] = [];
    const config = loadConfig({ dataDir: dir });
    const o = await engines.track(
      openEmbeddedEngine(config, {
        embedder: new HashingEmbedder(),
        attention: model,
        observer: {
          stageEvent: () => {},
          segmentClosed: () => {},
          recordsWritten: () => {},
          segmentIndexed: (s) => segments.push(s),
        },
        settings: {
          batchSize: 64,
          segmenter: { ...engineSettingsFrom(config).segmenter, boundaries, bufferTokens: 0 },
        },
      }),
    );
    await o.engine.ingest("t", "c", turns());
    await o.engine.flush("t", "c");
    await o.engine.drain();
    await o.close();
    return { model, segments: segments.sort((a, b) => a.start.localeCompare(b.start)) };
  };

  it("mode attention: one attention call for the batch, a cut at the dip, the check in the log", async () => {
    const { model, segments } = await run("attention");
    assert.equal(model.calls.length, 1, "the batch's pairs go in one call");
    assert.equal(model.calls[0]?.length, TEXTS.length - 1);
    assert.deepEqual(
      segments.map((s) => s.turns.map((t) => t.turnId)),
      [
        ["t0", "t1", "t2", "t3", "t4", "t5"],
        ["t6", "t7"],
      ],
    );
    assert.equal(segments[0]?.closedBy, "attention");
    const decisions = segments.flatMap((s) => s.decisions);
    assert.equal(decisions.length, TEXTS.length - 1);
    assert.ok(decisions.every((d) => d.attention !== undefined && Number.isFinite(d.attention.share)));
    assert.equal(decisions.find((d) => d.turnId === "t6")?.attention?.decision, "proposed");
  });

  it("mode gate never calls the attention model and logs no check", async () => {
    const { model, segments } = await run("gate");
    assert.equal(model.calls.length, 0);
    assert.ok(segments.flatMap((s) => s.decisions).every((d) => d.attention === undefined));
  });
});
